// ConvBN blocks, the conv-bias check and BatchNorm folding.
#include "nn/conv_bn.h"

#include "autograd/checkpoint.h"
#include "autograd/grad_mode.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"

namespace ember::nn {

namespace {

// Folds bn's eval-mode affine map into conv's weight and bias.
void fold_into(Conv2d& conv, const BatchNorm2d& bn) {
    EMBER_CHECK(bn.running_mean.defined(),
                "fold_batchnorm: a BatchNorm2d without running "
                "statistics (track_running_stats = false) cannot be folded");
    NoGradGuard no_grad;
    const Tensor w = conv.weight.detach();
    Tensor s = kernels::rsqrt(kernels::add(bn.running_var, bn.options().eps));  // 1/√(var + eps)
    if (bn.weight.defined()) s = kernels::mul(s, bn.weight.detach());
    const int64_t out = w.size(0);
    const Tensor s_col = kernels::reshape(s.to(w.dtype()), {out, 1, 1, 1});
    const Tensor b =
        conv.bias.defined() ? conv.bias.detach() : zeros({out}, {w.dtype(), w.device()});
    Tensor new_b = kernels::mul(kernels::sub(b, bn.running_mean.to(w.dtype())), s.to(w.dtype()));
    if (bn.bias.defined()) new_b = kernels::add(new_b, bn.bias.detach().to(w.dtype()));
    conv.weight.detach().copy_(kernels::mul(w, s_col));
    conv.set_bias(new_b);
}

}  // namespace

ConvBN::ConvBN(int64_t in_channels, int64_t out_channels, Pair kernel_size, Conv2dOptions c,
               BatchNormOptions b, bool relu)
    : relu_(relu) {
    c.bias = false;  // the point of the block
    conv = register_module("conv", Conv2d(in_channels, out_channels, kernel_size, c));
    bn = register_module("bn", BatchNorm2d(out_channels, b));
}

bool ConvBN::fused_bn() const {
    return bn && (bn->is_training() || !bn->options().track_running_stats);
}

void ConvBN::count_batch() {
    // Counted as BatchNorm2d::forward counts (not when a checkpointed segment
    // is recomputed).
    if (bn->is_training() && bn->options().track_running_stats && !autograd::is_recomputing()) {
        NoGradGuard no_grad;
        add_(bn->num_batches_tracked, ones({}, {DType::i64, bn->num_batches_tracked.device()}));
    }
}

// Training (or no running statistics): one fused batch norm + ReLU op
// (kernels/norm.h, Note [Fused batch norm + ReLU]) instead of bn then relu,
// with BatchNorm2d::forward's batch counter. Eval: bn's running statistics,
// then relu (or, once folded, the biased conv then relu).
Tensor ConvBN::forward(const Tensor& x) {
    Tensor h = conv->forward(x);
    if (relu_ && fused_bn()) {
        const BatchNormOptions& o = bn->options();
        // The conv's output channels are bn's by construction.
        Tensor y = batch_norm_relu(h, bn->running_mean, bn->running_var, bn->weight, bn->bias, true,
                                   o.momentum, o.eps);
        count_batch();
        return y;
    }
    if (bn) h = bn->forward(h);
    return relu_ ? relu(h) : h;
}

// As forward, with the fused batch norm + add + ReLU op when training.
Tensor ConvBN::forward_add_relu(const Tensor& x, const Tensor& residual) {
    EMBER_CHECK(!relu_, type_name(), "::forward_add_relu: the block already ends in a ReLU");
    Tensor h = conv->forward(x);
    if (fused_bn()) {
        const BatchNormOptions& o = bn->options();
        Tensor y = batch_norm_add_relu(h, residual, bn->running_mean, bn->running_var, bn->weight,
                                       bn->bias, true, o.momentum, o.eps);
        count_batch();
        return y;
    }
    if (bn) h = bn->forward(h);
    return relu(h + residual);
}

bool ConvBN::fold() {
    if (!bn) return false;
    fold_into(*conv, *bn);
    replace_child(1, std::make_shared<Identity>());
    bn = nullptr;
    return true;
}

std::string conv_bias_before_batchnorm_warning(const Module& prev, const Module& next,
                                               const std::string& prev_name,
                                               const std::string& next_name) {
    const auto* conv = dynamic_cast<const Conv2d*>(&prev);
    if (!conv || !conv->bias.defined() || !dynamic_cast<const BatchNorm2d*>(&next)) return "";
    return str("Conv2d '", prev_name, "' has a bias but feeds BatchNorm2d '", next_name,
               "', which cancels it: build the conv with .bias = false (or use nn::ConvBN); "
               "the bias costs memory and time for nothing");
}

std::vector<std::string> find_conv_bias_before_batchnorm(Module& model) {
    std::vector<std::string> found;
    for (auto& [name, m] : model.named_modules()) {
        if (!dynamic_cast<Sequential*>(m)) continue;
        const auto& kids = m->named_children();
        for (size_t i = 1; i < kids.size(); ++i) {
            const std::string base = name.empty() ? "" : name + ".";
            std::string w =
                conv_bias_before_batchnorm_warning(*kids[i - 1].second, *kids[i].second,
                                                   base + kids[i - 1].first, base + kids[i].first);
            if (!w.empty()) found.push_back(std::move(w));
        }
    }
    return found;
}

int fold_batchnorm(Module& model) {
    // Find the containers first: folding destroys BatchNorm2d modules that a
    // walk over named_modules() would still point to.
    std::vector<ConvBN*> blocks;
    std::vector<Sequential*> seqs;
    for (auto& [name, m] : model.named_modules()) {
        if (auto* block = dynamic_cast<ConvBN*>(m)) blocks.push_back(block);
        if (auto* seq = dynamic_cast<Sequential*>(m)) seqs.push_back(seq);
    }
    // All or nothing: every BatchNorm2d that would be folded must have running statistics.
    auto check = [](const BatchNorm2d* bn, const std::string& where) {
        EMBER_CHECK(!bn || bn->running_mean.defined(), "fold_batchnorm: the BatchNorm2d in ", where,
                    " has no running statistics (track_running_stats = false); nothing "
                    "was folded");
    };
    for (ConvBN* block : blocks) check(block->bn.get(), "a " + block->type_name() + " block");
    for (Sequential* seq : seqs)
        for (size_t i = 1; i < seq->size(); ++i)
            if (dynamic_cast<Conv2d*>((*seq)[i - 1].get()))
                check(dynamic_cast<BatchNorm2d*>((*seq)[i].get()),
                      "a Sequential at position " + std::to_string(i));
    int folded = 0;
    for (ConvBN* block : blocks) folded += block->fold() ? 1 : 0;
    for (Sequential* seq : seqs) {
        for (size_t i = 1; i < seq->size(); ++i) {
            auto* conv = dynamic_cast<Conv2d*>((*seq)[i - 1].get());
            auto* bn = dynamic_cast<BatchNorm2d*>((*seq)[i].get());
            if (!conv || !bn) continue;
            fold_into(*conv, *bn);
            seq->replace(i, std::make_shared<Identity>());
            ++folded;
        }
    }
    return folded;
}

}  // namespace ember::nn

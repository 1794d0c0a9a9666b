// Losses: fused cross-entropy (log_softmax + NLL in one kernel each way),
// and nll_loss / mse_loss composed from differentiable ops.
#include "autograd/autocast.h"
#include "autograd/graph.h"
#include "kernels/copy.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/index.h"
#include "autograd/ops/nn_ops.h"
#include "autograd/ops/reduce.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/loss.h"
#include "kernels/reduce.h"

namespace ember {
using autograd::TensorList;

namespace {

// Number of targets that count (not ignore_index), as a 0-d tensor on the
// targets' device: a mean divides by it without a host sync.
Tensor counted(const Tensor& target, int64_t ignore_index, DType dtype) {
    return kernels::sum(kernels::ne(target, double(ignore_index)).to(dtype));
}

Tensor reduce(const Tensor& per_sample, Reduction r, const Tensor& count) {
    switch (r) {
        case Reduction::none: return per_sample;
        case Reduction::sum: return sum(per_sample);
        case Reduction::mean: return div(sum(per_sample), count);
    }
    return per_sample;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits0, const Tensor& target, const CrossEntropyOptions& o) {
    const Tensor logits = amp::cast_input("cross_entropy", logits0);
    kernels::CrossEntropyForward f =
        kernels::cross_entropy_forward(logits, target, o.label_smoothing, o.ignore_index);
    const Tensor count = o.reduction == Reduction::mean
                             ? counted(target, o.ignore_index, f.loss.dtype())
                             : Tensor();
    Tensor out;
    switch (o.reduction) {
        case Reduction::none: out = f.loss; break;
        case Reduction::sum:
            out = kernels::sum(f.loss);
            break;
        case Reduction::mean:
            out = kernels::div(kernels::sum(f.loss), count);
            break;
    }
    if (auto node = autograd::make_node("cross_entropy", {logits})) {
        node->backward = [x = node->save(logits), lse = node->save(f.lse), t = node->save(target),
                          count, o, n = f.loss.shape()](const TensorList& g) {
            // The upstream gradient of each sample's loss: g itself (none), or g
            // broadcast (sum), or g / count (mean).
            Tensor per = g[0];
            if (o.reduction != Reduction::none) {
                const Tensor scaled =
                    o.reduction == Reduction::mean ? kernels::div(g[0], count) : g[0];
                per = views::expand(kernels::reshape(scaled, {1}), n);
            }
            return TensorList{
                kernels::cross_entropy_backward(per, x, lse, t, o.label_smoothing, o.ignore_index)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor nll_loss(const Tensor& log_probs0, const Tensor& target, const NllLossOptions& o) {
    const Tensor log_probs = amp::cast_input("nll_loss", log_probs0);
    // Everything the ops below would check is checked here first, so that an
    // error names nll_loss and its argument, not the gather inside.
    EMBER_CHECK(log_probs.defined() && target.defined(), "nll_loss: undefined tensor (log_probs ",
                log_probs.defined() ? shape_str(log_probs.shape()) : "undefined", ", target ",
                target.defined() ? shape_str(target.shape()) : "undefined", ")");
    EMBER_CHECK(log_probs.dim() == 2 && target.dim() == 1 && target.size(0) == log_probs.size(0),
                "nll_loss: expected log_probs [N, C] and target [N], got ",
                shape_str(log_probs.shape()), " and ", shape_str(target.shape()));
    EMBER_CHECK(is_floating(log_probs.dtype()), "nll_loss: log_probs must be floating-point, got ",
                dtype_name(log_probs.dtype()));
    EMBER_CHECK(target.dtype() == DType::i64, "nll_loss: target must be i64, got ",
                dtype_name(target.dtype()));
    kernels::check_class_targets("nll_loss", target, log_probs.size(1), o.ignore_index);
    const Tensor keep = kernels::ne(target, double(o.ignore_index));
    // Ignored rows read class 0 (always valid) and are masked out.
    const Tensor safe = kernels::where(keep, target, kernels::mul(target, 0.0).to(DType::i64));
    const Tensor picked = gather(log_probs, 1, views::unsqueeze(safe, 1)).squeeze(1);
    // where, not a multiplication by the mask: ignored rows contribute exactly 0
    // even where their (unused) log-probability is -inf.
    const Tensor per = neg(where(keep, picked, zeros_like(picked)));
    return reduce(per, o.reduction, counted(target, o.ignore_index, log_probs.dtype()));
}

Tensor mse_loss(const Tensor& input0, const Tensor& target0, Reduction reduction) {
    const Tensor input = amp::cast_input("mse_loss", input0),
                 target = amp::cast_input("mse_loss", target0);
    EMBER_CHECK(input.defined() && target.defined(), "mse_loss: undefined tensor (input ",
                input.defined() ? shape_str(input.shape()) : "undefined", ", target ",
                target.defined() ? shape_str(target.shape()) : "undefined", ")");
    EMBER_CHECK(input.shape() == target.shape(), "mse_loss: input ", shape_str(input.shape()),
                " and target ", shape_str(target.shape()), " differ in shape");
    EMBER_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()),
                "mse_loss: input and target must be floating-point, got ",
                dtype_name(input.dtype()), " and ", dtype_name(target.dtype()));
    const Tensor d = sub(input, target);
    const Tensor sq = mul(d, d);
    // mean, not sum / numel: f16 would overflow the sum (and the count past
    // 65504), while mean accumulates in f32 and rounds once.
    return reduction == Reduction::mean ? mean(sq) : reduce(sq, reduction, Tensor());
}

}  // namespace ember

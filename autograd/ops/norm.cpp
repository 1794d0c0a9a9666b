// Differentiable batch norm (and batch norm + ReLU), layer norm and dropout
// over the fused kernels in kernels/norm.h and kernels/dropout.h.
#include "kernels/norm.h"

#include "autograd/autocast.h"
#include "autograd/checkpoint.h"
#include "autograd/graph.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/nn_ops.h"
#include "kernels/copy.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/reduce.h"

namespace ember {
using autograd::TensorList;

namespace {

// Eval-mode batch norm is an affine map per channel with constant statistics:
// dx = g·w·invstd, dw = Σ g·x̂, db = Σ g (sums over every dim but 1).
TensorList batch_norm_eval_backward(const Tensor& g, const Tensor& x, const Tensor& w,
                                    const Tensor& mean, const Tensor& var, double eps,
                                    std::array<bool, 3> need) {
    Shape bshape(size_t(x.dim()), 1);
    bshape[1] = x.size(1);
    Shape dims;
    for (int64_t d = 0; d < x.dim(); ++d)
        if (d != 1) dims.push_back(d);
    const Tensor invstd =
        kernels::reshape(kernels::rsqrt(kernels::add(var.to(g.dtype()), eps)), bshape);
    const Tensor scale =
        w.defined() ? kernels::mul(invstd, kernels::reshape(w.to(g.dtype()), bshape)) : invstd;
    TensorList out(3);
    if (need[0]) out[0] = kernels::mul(g, scale);
    if (need[1]) {
        const Tensor xhat =
            kernels::mul(kernels::sub(x, kernels::reshape(mean.to(g.dtype()), bshape)), invstd);
        out[1] = kernels::sum(kernels::mul(g, xhat), dims);
    }
    if (need[2]) out[2] = kernels::sum(g, dims);
    return out;
}

}  // namespace

Tensor batch_norm(const Tensor& x0, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
    const Tensor x = amp::cast_input("batch_norm", x0);
    if (!training) {
        EMBER_CHECK(running_mean.defined() && running_var.defined(),
                    "batch_norm: evaluation mode needs running_mean and running_var");
        Tensor out = kernels::batch_norm_inference(x, weight, bias, running_mean, running_var, eps);
        if (auto node = autograd::make_node("batch_norm", {x, weight, bias})) {
            const std::array<bool, 3> need = {node->needs_input_grad(0), node->needs_input_grad(1),
                                              node->needs_input_grad(2)};
            node->backward = [x = node->save(x), w = node->save(weight),
                              m = node->save(running_mean), v = node->save(running_var), eps,
                              need](const TensorList& g) {
                return batch_norm_eval_backward(g[0], x, w, m, v, eps, need);
            };
            autograd::set_history(node, out);
        }
        return out;
    }
    // A checkpointed segment's recompute must not update the running
    // statistics a second time (autograd::is_recomputing()).
    const bool update = !autograd::is_recomputing();
    kernels::BatchNormForward f =
        kernels::batch_norm_forward(x, weight, bias, update ? running_mean : Tensor(),
                                    update ? running_var : Tensor(), momentum, eps);
    if (auto node = autograd::make_node("batch_norm", {x, weight, bias})) {
        const std::array<bool, 3> need = {node->needs_input_grad(0), node->needs_input_grad(1),
                                          node->needs_input_grad(2)};
        node->backward = [x = node->save(x), w = node->save(weight), m = node->save(f.save_mean),
                          s = node->save(f.save_invstd), need](const TensorList& g) {
            kernels::NormGrads d = kernels::batch_norm_backward(g[0], x, w, m, s, need);
            return TensorList{d.input, d.weight, d.bias};
        };
        autograd::set_history(node, f.output);
    }
    return f.output;
}

Tensor batch_norm_relu(const Tensor& x0, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training, double momentum,
                       double eps) {
    if (!training)
        return relu(batch_norm(x0, running_mean, running_var, weight, bias, false, momentum, eps));
    // batch_norm's autocast policy (as given): the same statistics, the same kernel.
    const Tensor x = amp::cast_input("batch_norm", x0);
    const bool update = !autograd::is_recomputing();  // as batch_norm
    kernels::BatchNormForward f =
        kernels::batch_norm_relu_forward(x, weight, bias, update ? running_mean : Tensor(),
                                         update ? running_var : Tensor(), momentum, eps);
    if (auto node = autograd::make_node("batch_norm_relu", {x, weight, bias})) {
        const std::array<bool, 3> need = {node->needs_input_grad(0), node->needs_input_grad(1),
                                          node->needs_input_grad(2)};
        // Saves x (the statistics' input) and y (the ReLU's mask): what
        // batch_norm then relu would save, minus the pre-ReLU tensor.
        node->backward = [x = node->save(x), y = node->save(f.output), w = node->save(weight),
                          m = node->save(f.save_mean), s = node->save(f.save_invstd),
                          need](const TensorList& g) {
            kernels::NormGrads d = kernels::batch_norm_relu_backward(g[0], y, x, w, m, s, need);
            return TensorList{d.input, d.weight, d.bias};
        };
        autograd::set_history(node, f.output);
    }
    return f.output;
}

Tensor batch_norm_add_relu(const Tensor& x0, const Tensor& residual0, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                           bool training, double momentum, double eps) {
    if (!training)
        return relu(
            add(batch_norm(x0, running_mean, running_var, weight, bias, false, momentum, eps),
                residual0));
    // batch_norm's autocast policy (as given) for both.
    const Tensor x = amp::cast_input("batch_norm", x0);
    const Tensor residual = amp::cast_input("batch_norm", residual0);
    const bool update = !autograd::is_recomputing();  // as batch_norm
    kernels::BatchNormForward f = kernels::batch_norm_add_relu_forward(
        x, residual, weight, bias, update ? running_mean : Tensor(),
        update ? running_var : Tensor(), momentum, eps);
    if (auto node = autograd::make_node("batch_norm_add_relu", {x, residual, weight, bias})) {
        const std::array<bool, 3> need = {node->needs_input_grad(0), node->needs_input_grad(2),
                                          node->needs_input_grad(3)};
        const bool need_residual = node->needs_input_grad(1);
        // Saves x and y, as batch_norm_relu; the residual is not needed. The
        // ReLU's masked gradient is the residual's gradient and batch norm's
        // upstream one: materialized once, as relu then add would.
        node->backward = [x = node->save(x), y = node->save(f.output), w = node->save(weight),
                          m = node->save(f.save_mean), s = node->save(f.save_invstd), need,
                          need_residual](const TensorList& g) {
            const Tensor masked = kernels::relu_backward(g[0], y);
            kernels::NormGrads d = need[0] || need[1] || need[2]
                                       ? kernels::batch_norm_backward(masked, x, w, m, s, need)
                                       : kernels::NormGrads{};
            return TensorList{d.input, need_residual ? masked : Tensor(), d.weight, d.bias};
        };
        autograd::set_history(node, f.output);
    }
    return f.output;
}

Tensor layer_norm(const Tensor& x0, const Shape& normalized_shape, const Tensor& weight,
                  const Tensor& bias, double eps) {
    const Tensor x = amp::cast_input("layer_norm", x0);
    kernels::LayerNormForward f =
        kernels::layer_norm_forward(x, normalized_shape, weight, bias, eps);
    if (auto node = autograd::make_node("layer_norm", {x, weight, bias})) {
        const std::array<bool, 3> need = {node->needs_input_grad(0), node->needs_input_grad(1),
                                          node->needs_input_grad(2)};
        node->backward = [x = node->save(x), w = node->save(weight), m = node->save(f.mean),
                          r = node->save(f.rstd), normalized_shape, need](const TensorList& g) {
            kernels::NormGrads d =
                kernels::layer_norm_backward(g[0], x, normalized_shape, w, m, r, need);
            return TensorList{d.input, d.weight, d.bias};
        };
        autograd::set_history(node, f.output);
    }
    return f.output;
}

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
    EMBER_CHECK(x.defined(), "dropout: undefined tensor");
    EMBER_CHECK(p >= 0 && p <= 1, "dropout: p must be in [0, 1], got ", p);
    if (!training || p == 0) return x;
    if (p == 1) return mul(x, 0.0);  // every element dropped (recorded: gradient 0)
    Generator& g = gen ? *gen : default_generator();
    const GeneratorState at = g.reserve(kernels::dropout_blocks(x.numel()));
    kernels::DropoutForward f = kernels::dropout_forward(x, p, at.seed, at.offset);
    if (auto node = autograd::make_node("dropout", {x})) {
        node->backward = [mask = node->save(f.mask), p](const TensorList& g) {
            return TensorList{kernels::dropout_backward(g[0], mask, p)};
        };
        autograd::set_history(node, f.output);
    }
    return f.output;
}

}  // namespace ember

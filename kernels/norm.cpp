// Front for batch norm and layer norm: argument checks with the shapes in the
// message, x brought to a dense [N, C, S] (contiguous, or channels-last,
// which the results keep) or [R, M], allocation of the
// outputs and saved statistics, and one call through the dispatch. Kernels:
// kernels/cpu/norm.cpp and kernels/cuda/batch_norm.cu and layer_norm.cu.
#include "kernels/norm.h"

#include <cmath>
#include <limits>

#include "kernels/copy.h"
#include "kernels/cpu/norm.h"
#include "kernels/cpu/policy.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/policy.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

View optional_view(const Tensor& t, const char* op) {
    return t.defined() ? view_of(t, op) : View{};
}

// The product of s[from:], saturating at the int64 maximum (0 if a size is 0):
// the sizes of an empty tensor may multiply past int64.
int64_t dims_numel(const Shape& s, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i)
        if (s[i] == 0) return 0;
    int64_t n = 1;
    for (size_t i = from; i < to; ++i)
        if (__builtin_mul_overflow(n, s[i], &n)) return std::numeric_limits<int64_t>::max();
    return n;
}

void check_input(const char* op, const Tensor& x) {
    EMBER_CHECK(x.defined(), op, ": undefined input");
    check_floating(x, op);
}

void check_eps(const char* op, double eps) {
    EMBER_CHECK(eps > 0 && std::isfinite(eps), op, ": eps must be > 0, got ", eps);
}

// An optional per-channel (or per-element) parameter: absent, or floating of
// exactly `shape` on x's device.
void check_param(const char* op, const char* what, const Tensor& t, const Tensor& x,
                 const Shape& shape) {
    if (!t.defined()) return;
    check_same_device({&x, &t}, op);
    EMBER_CHECK(is_floating(t.dtype()) && t.shape() == shape, op, ": expected ", what, " of shape ",
                shape_str(shape), " (floating) for input ", describe(x), ", got ", describe(t));
}

// A saved statistic from the forward: the statistics dtype and `shape`.
void check_saved(const char* op, const char* what, const Tensor& t, const Tensor& x,
                 const Shape& shape) {
    const DType acc = acc_dtype(x.dtype());
    EMBER_CHECK(t.defined() && t.dtype() == acc && t.shape() == shape, op, ": expected ", what, " ",
                dtype_name(acc), " ", shape_str(shape), " (the forward's) for input ", describe(x),
                ", got ", describe(t));
    check_same_device({&x, &t}, op);
}

void check_grad(const char* op, const Tensor& grad_y, const Tensor& x) {
    EMBER_CHECK(grad_y.defined() && grad_y.shape() == x.shape() && grad_y.dtype() == x.dtype(), op,
                ": grad_y ", describe(grad_y), " must have the shape and dtype of input ",
                describe(x));
    check_same_device({&x, &grad_y}, op);
}

// Batch norm's x as [N, C, S]: the checks shared by the three entry points.
int64_t check_batch_input(const char* op, const Tensor& x, const Tensor& weight,
                          const Tensor& bias) {
    check_input(op, x);
    EMBER_CHECK(x.dim() >= 2, op, ": expected input [N, C, *], got ", describe(x));
    const int64_t C = x.size(1);
    check_param(op, "weight", weight, x, {C});
    check_param(op, "bias", bias, x, {C});
    return C;
}

// The layout batch norm computes and returns x's results in: x's own
// (channels-last for a channels-last x, else contiguous). Both backends read
// either.
MemoryFormat layout(const Tensor& x) { return x.suggest_memory_format(); }

// A dense x (contiguous or channels-last, non-empty) as the kernels' [N, C, S]:
// the [N, C, S] view of either layout where the backend reads the strides
// (the CPU); where it takes channels as rows (CUDA: kernels/*/policy.h) a
// contiguous one, a channels-last x as [N·H·W, C, 1] (whole rows of C
// channels; kernels/cuda/batch_norm.cu).
View ncs_view(const Tensor& xc, const char* op) {
    const Shape& s = xc.shape();
    const bool rows_of_channels = backend_choice(
        op, xc.device(), [] { return cpu::batch_norm_channels_last_rows(); },
        [](auto) { return cuda::batch_norm_channels_last_rows(); });
    if (rows_of_channels && !xc.is_contiguous()) {
        EMBER_INTERNAL_ASSERT(xc.dim() == 4 && xc.is_contiguous(MemoryFormat::channels_last));
        const auto rows = views::try_view(views::permute(xc, {0, 2, 3, 1}), {-1, s[1], 1});
        EMBER_INTERNAL_CHECK(rows.has_value(), "batch norm: a channels-last ", describe(xc),
                             " is not a [N·H·W, C] view");
        return view_of(*rows, op);
    }
    return view_of(reshape(xc, {s[0], s[1], dims_numel(s, 2, s.size())}), op);
}

// A gradient for a parameter: its shape, and its dtype (or the statistics dtype).
Tensor param_grad(bool need, const Tensor& param, const Shape& shape, const Tensor& x) {
    if (!need) return Tensor();
    return empty(shape, like(x, param.defined() ? param.dtype() : acc_dtype(x.dtype())));
}

}  // namespace

namespace {

// The training forward, with or without the fused ReLU (op names the entry point).
// With a residual (and relu): relu(batch_norm(x) + *residual).
BatchNormForward train_forward(const char* op, const Tensor& x, const Tensor& weight,
                               const Tensor& bias, const Tensor& running_mean,
                               const Tensor& running_var, double momentum, double eps, bool relu,
                               const Tensor* residual = nullptr) {
    const int64_t C = check_batch_input(op, x, weight, bias);
    if (residual) {
        EMBER_CHECK(
            residual->defined() && residual->shape() == x.shape() && residual->dtype() == x.dtype(),
            op, ": residual ", describe(*residual), " must have the shape and dtype of input ",
            describe(x));
        check_same_device({&x, residual}, op);
    }
    check_param(op, "running_mean", running_mean, x, {C});
    check_param(op, "running_var", running_var, x, {C});
    EMBER_CHECK(running_mean.defined() == running_var.defined(), op,
                ": running_mean and running_var must be given together, got ",
                describe(running_mean), " and ", describe(running_var));
    check_eps(op, eps);
    EMBER_CHECK(momentum >= 0 && momentum <= 1, op, ": momentum must be in [0, 1], got ", momentum);
    Shape counted = x.shape();  // the values per channel: every dim but C
    counted.erase(counted.begin() + 1);
    const int64_t n = dims_numel(counted, 0, counted.size());
    EMBER_CHECK(n >= 2, op, ": expected more than 1 value per channel when training, got input ",
                describe(x));
    const TensorOptions stats = like(x, acc_dtype(x.dtype()));
    const MemoryFormat format = layout(x);
    BatchNormForward r{empty(x.shape(), like(x), format), empty({C}, stats), empty({C}, stats)};
    if (C == 0) return r;
    // perf: a strided input is copied first; the kernel reads dense planes or pixels.
    const Tensor xc = contiguous(x, format);
    const Tensor rc = residual ? contiguous(*residual, format) : Tensor();
    const BatchNormArgs a{.out = ncs_view(r.output, op),
                          .save_mean = view_of(r.save_mean, op),
                          .save_invstd = view_of(r.save_invstd, op),
                          .x = ncs_view(xc, op),
                          .weight = optional_view(weight, op),
                          .bias = optional_view(bias, op),
                          .running_mean = optional_view(running_mean, op),
                          .running_var = optional_view(running_var, op),
                          .momentum = momentum,
                          .eps = eps,
                          .relu = relu,
                          .residual = rc.defined() ? ncs_view(rc, op) : View{}};
    dispatch(
        {op,
         x.device(),
         {&r.output, &r.save_mean, &r.save_invstd, &xc, &weight, &bias, &running_mean, &running_var,
          &rc}},
        [&] { cpu::batch_norm_forward(a); },
        [&](auto stream) { cuda::batch_norm_forward(a, stream); });
    if (running_mean.defined()) {
        running_mean.storage()->bump_version();
        running_var.storage()->bump_version();
    }
    return r;
}

}  // namespace

BatchNormForward batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    double momentum, double eps) {
    return train_forward("batch_norm_forward", x, weight, bias, running_mean, running_var, momentum,
                         eps, false);
}

BatchNormForward batch_norm_relu_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         const Tensor& running_mean, const Tensor& running_var,
                                         double momentum, double eps) {
    return train_forward("batch_norm_relu_forward", x, weight, bias, running_mean, running_var,
                         momentum, eps, true);
}

BatchNormForward batch_norm_add_relu_forward(const Tensor& x, const Tensor& residual,
                                             const Tensor& weight, const Tensor& bias,
                                             const Tensor& running_mean, const Tensor& running_var,
                                             double momentum, double eps) {
    return train_forward("batch_norm_add_relu_forward", x, weight, bias, running_mean, running_var,
                         momentum, eps, true, &residual);
}

Tensor batch_norm_inference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, double eps) {
    const char* op = "batch_norm_inference";
    const int64_t C = check_batch_input(op, x, weight, bias);
    EMBER_CHECK(running_mean.defined() && running_var.defined(), op,
                ": eval mode needs running_mean and running_var, got ", describe(running_mean),
                " and ", describe(running_var));
    check_param(op, "running_mean", running_mean, x, {C});
    check_param(op, "running_var", running_var, x, {C});
    check_eps(op, eps);
    const MemoryFormat format = layout(x);
    Tensor out = empty(x.shape(), like(x), format);
    if (out.numel() == 0) return out;
    const Tensor xc = contiguous(x, format);  // perf: strided input copied first
    const BatchNormArgs a{.out = ncs_view(out, op),
                          .x = ncs_view(xc, op),
                          .weight = optional_view(weight, op),
                          .bias = optional_view(bias, op),
                          .running_mean = view_of(running_mean, op),
                          .running_var = view_of(running_var, op),
                          .eps = eps};
    dispatch(
        {op, x.device(), {&out, &xc, &weight, &bias, &running_mean, &running_var}},
        [&] { cpu::batch_norm_inference(a); },
        [&](auto stream) { cuda::batch_norm_inference(a, stream); });
    return out;
}

namespace {

// The training backward; with relu, relu_out is the fused forward's output.
NormGrads train_backward(const char* op, bool relu, const Tensor& grad_y, const Tensor& relu_out,
                         const Tensor& x, const Tensor& weight, const Tensor& save_mean,
                         const Tensor& save_invstd, std::array<bool, 3> need) {
    const int64_t C = check_batch_input(op, x, weight, Tensor());
    check_grad(op, grad_y, x);
    if (relu) {
        EMBER_CHECK(
            relu_out.defined() && relu_out.shape() == x.shape() && relu_out.dtype() == x.dtype(),
            op, ": output ", describe(relu_out),
            " (the forward's) must have the shape and dtype of input ", describe(x));
        check_same_device({&x, &relu_out}, op);
    }
    check_saved(op, "save_mean", save_mean, x, {C});
    check_saved(op, "save_invstd", save_invstd, x, {C});
    const MemoryFormat format = layout(x);
    NormGrads r{need[0] ? empty(x.shape(), like(x), format) : Tensor(),
                param_grad(need[1], weight, {C}, x), param_grad(need[2], weight, {C}, x)};
    if (x.numel() == 0) {  // no values: Σ g and Σ g·x̂ are 0
        if (r.weight.defined()) fill(r.weight, 0);
        if (r.bias.defined()) fill(r.bias, 0);
        return r;
    }
    // perf: strided inputs are copied first.
    const Tensor xc = contiguous(x, format), gc = contiguous(grad_y, format);
    const Tensor yc = relu ? contiguous(relu_out, format) : Tensor();
    const BatchNormBackwardArgs a{r.input.defined() ? ncs_view(r.input, op) : View{},
                                  optional_view(r.weight, op),
                                  optional_view(r.bias, op),
                                  ncs_view(gc, op),
                                  ncs_view(xc, op),
                                  optional_view(weight, op),
                                  view_of(save_mean, op),
                                  view_of(save_invstd, op),
                                  yc.defined() ? ncs_view(yc, op) : View{}};
    dispatch(
        {op,
         x.device(),
         {&r.input, &r.weight, &r.bias, &gc, &xc, &weight, &save_mean, &save_invstd, &yc}},
        [&] { cpu::batch_norm_backward(a); },
        [&](auto stream) { cuda::batch_norm_backward(a, stream); });
    return r;
}

}  // namespace

NormGrads batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                              const Tensor& save_mean, const Tensor& save_invstd,
                              std::array<bool, 3> need) {
    return train_backward("batch_norm_backward", false, grad_y, Tensor(), x, weight, save_mean,
                          save_invstd, need);
}

NormGrads batch_norm_relu_backward(const Tensor& grad_y, const Tensor& output, const Tensor& x,
                                   const Tensor& weight, const Tensor& save_mean,
                                   const Tensor& save_invstd, std::array<bool, 3> need) {
    return train_backward("batch_norm_relu_backward", true, grad_y, output, x, weight, save_mean,
                          save_invstd, need);
}

namespace {

// Checks normalized_shape against x; returns the split point (the first normalized dim).
size_t check_layer_input(const char* op, const Tensor& x, const Shape& normalized_shape,
                         const Tensor& weight, const Tensor& bias) {
    check_input(op, x);
    const size_t k = normalized_shape.size();
    EMBER_CHECK(k >= 1 && int64_t(k) <= x.dim() &&
                    Shape(x.shape().end() - int64_t(k), x.shape().end()) == normalized_shape,
                op, ": normalized_shape ", shape_str(normalized_shape),
                " must be non-empty and equal the trailing dims of input ", describe(x));
    check_param(op, "weight", weight, x, normalized_shape);
    check_param(op, "bias", bias, x, normalized_shape);
    return x.shape().size() - k;
}

// mean and rstd's shape: x's with the normalized dims set to 1.
Shape stats_shape(const Tensor& x, size_t axis) {
    Shape s = x.shape();
    for (size_t i = axis; i < s.size(); ++i) s[i] = 1;
    return s;
}

// A parameter of normalized_shape as 1-d of its M elements (undefined stays undefined).
Tensor flat_param(const Tensor& t, int64_t m) {
    return t.defined() ? views::view(contiguous(t), {m}) : t;
}

}  // namespace

LayerNormForward layer_norm_forward(const Tensor& x, const Shape& normalized_shape,
                                    const Tensor& weight, const Tensor& bias, double eps) {
    const char* op = "layer_norm_forward";
    const size_t axis = check_layer_input(op, x, normalized_shape, weight, bias);
    check_eps(op, eps);
    const TensorOptions stats = like(x, acc_dtype(x.dtype()));
    LayerNormForward r{empty(x.shape(), like(x)), empty(stats_shape(x, axis), stats),
                       empty(stats_shape(x, axis), stats)};
    if (x.numel() == 0) {  // the mean of no values is NaN (none at all when R = 0)
        fill(r.mean, NAN);
        fill(r.rstd, NAN);
        return r;
    }
    const int64_t R = dims_numel(x.shape(), 0, axis), M = dims_numel(x.shape(), axis, x.shape().size());
    const Tensor xc = contiguous(x);  // perf: strided input copied first
    const Tensor w = flat_param(weight, M), b = flat_param(bias, M);
    const LayerNormArgs a{view_of(views::view(r.output, {R, M}), op),
                          view_of(r.mean, op),
                          view_of(r.rstd, op),
                          view_of(views::view(xc, {R, M}), op),
                          optional_view(w, op),
                          optional_view(b, op),
                          eps};
    dispatch(
        {op, x.device(), {&r.output, &r.mean, &r.rstd, &xc, &w, &b}},
        [&] { cpu::layer_norm_forward(a); },
        [&](auto stream) { cuda::layer_norm_forward(a, stream); });
    return r;
}

NormGrads layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Shape& normalized_shape,
                              const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                              std::array<bool, 3> need) {
    const char* op = "layer_norm_backward";
    const size_t axis = check_layer_input(op, x, normalized_shape, weight, Tensor());
    check_grad(op, grad_y, x);
    check_saved(op, "mean", mean, x, stats_shape(x, axis));
    check_saved(op, "rstd", rstd, x, stats_shape(x, axis));
    NormGrads r{need[0] ? empty(x.shape(), like(x)) : Tensor(),
                param_grad(need[1], weight, normalized_shape, x),
                param_grad(need[2], weight, normalized_shape, x)};
    if (x.numel() == 0) {
        if (r.weight.defined()) fill(r.weight, 0);
        if (r.bias.defined()) fill(r.bias, 0);
        return r;
    }
    const int64_t R = dims_numel(x.shape(), 0, axis), M = dims_numel(x.shape(), axis, x.shape().size());
    // perf: strided inputs are copied first.
    const Tensor xc = contiguous(x), gc = contiguous(grad_y), w = flat_param(weight, M);
    const Tensor m = contiguous(mean), s = contiguous(rstd);
    auto rows = [&](const Tensor& t, Shape shape) {
        return t.defined() ? view_of(views::view(t, shape), op) : View{};
    };
    const LayerNormBackwardArgs a{rows(r.input, {R, M}), rows(r.weight, {M}), rows(r.bias, {M}),
                                  rows(gc, {R, M}),      rows(xc, {R, M}),    optional_view(w, op),
                                  view_of(m, op),        view_of(s, op)};
    dispatch(
        {op, x.device(), {&r.input, &r.weight, &r.bias, &gc, &xc, &w, &m, &s}},
        [&] { cpu::layer_norm_backward(a); },
        [&](auto stream) { cuda::layer_norm_backward(a, stream); });
    return r;
}

}  // namespace ember::kernels

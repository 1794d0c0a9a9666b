// Fronts for 2-d pooling and its backwards: window checks with PyTorch's
// rules and messages that name the input, output sizes, allocation, and one
// call through the dispatch. A 3-d [C, H, W] input is pooled as a batch of one.
#include "kernels/pool.h"

#include <optional>

#include "kernels/copy.h"
#include "kernels/cpu/policy.h"
#include "kernels/cpu/pool.h"
#include "kernels/cuda/policy.h"
#include "kernels/cuda/pool.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

std::string pair_str(Int2 p) { return shape_str({p[0], p[1]}); }

void check_input(const Tensor& input, const char* op) {
    EMBER_CHECK(input.defined(), op, ": undefined input");
    EMBER_CHECK(input.dim() == 3 || input.dim() == 4, op,
                ": expected input [N, C, H, W] or [C, H, W], got ", describe(input));
    check_floating(input, op);
}

// Input seen as 4-d.
Tensor batched(const Tensor& input) {
    return input.dim() == 3 ? views::unsqueeze(input, 0) : input;
}
// A 4-d result shaped like the caller's input.
Tensor unbatched(const Tensor& out, const Tensor& input) {
    return input.dim() == 3 ? views::squeeze(out, 0) : out;
}

// PyTorch's pooling output size: floor (or ceil) of the span over the
// stride, plus one; with ceil_mode a last window starting in the right
// padding is dropped.
int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    const int64_t span = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t out = (span >= 0 ? span / s : -((-span + s - 1) / s)) + 1;  // floor division
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
}

// Checks a window and returns it with the output shape [N, C, OH, OW] of the 4-d input x.
Pool2dWindow make_window(const Tensor& x, Int2 kernel, Int2 stride, Int2 padding, Int2 dilation,
                         bool ceil_mode, const char* op, Shape* out) {
    if (stride[0] == 0 && stride[1] == 0) stride = kernel;
    EMBER_CHECK(kernel[0] >= 1 && kernel[1] >= 1 && stride[0] >= 1 && stride[1] >= 1 &&
                    dilation[0] >= 1 && dilation[1] >= 1,
                op, ": expected kernel, stride and dilation >= 1, got kernel ", pair_str(kernel),
                ", stride ", pair_str(stride), ", dilation ", pair_str(dilation));
    constexpr int64_t kMax = int64_t(1) << 30;  // keeps every size product below 2^62
    EMBER_CHECK(kernel[0] <= kMax && kernel[1] <= kMax && stride[0] <= kMax && stride[1] <= kMax &&
                    dilation[0] <= kMax && dilation[1] <= kMax && x.size(2) <= kMax &&
                    x.size(3) <= kMax,
                op, ": kernel ", pair_str(kernel), ", stride ", pair_str(stride), ", dilation ",
                pair_str(dilation), " or input ", describe(x), " exceed 2^30");
    EMBER_CHECK(padding[0] >= 0 && padding[1] >= 0 && padding[0] <= kernel[0] / 2 &&
                    padding[1] <= kernel[1] / 2,
                op, ": padding ", pair_str(padding), " must be between 0 and half the kernel ",
                pair_str(kernel));
    const int64_t oh =
        pooled_size(x.size(2), kernel[0], stride[0], padding[0], dilation[0], ceil_mode);
    const int64_t ow =
        pooled_size(x.size(3), kernel[1], stride[1], padding[1], dilation[1], ceil_mode);
    EMBER_CHECK(oh >= 1 && ow >= 1, op, ": output size ", oh, "x", ow, " is too small for input ",
                describe(x), " (kernel ", pair_str(kernel), ", stride ", pair_str(stride),
                ", padding ", pair_str(padding), ", dilation ", pair_str(dilation), ")");
    // Every window must see at least one input element (a dilated window can
    // straddle a small input entirely): else max would be -inf with index -1.
    const int64_t sizes[2] = {x.size(2), x.size(3)}, outs[2] = {oh, ow};
    for (int a = 0; a < 2; ++a)
        for (int64_t i = 0; i < outs[a]; ++i) {
            const int64_t start = i * stride[a] - padding[a];
            bool hit = false;
            for (int64_t j = 0; j < kernel[a] && !hit; ++j) {
                const int64_t at = start + j * dilation[a];
                hit = at >= 0 && at < sizes[a];
            }
            EMBER_CHECK(hit, op, ": window ", i, " of dim ", a + 2, " covers no element of input ",
                        describe(x), " (kernel ", pair_str(kernel), ", stride ", pair_str(stride),
                        ", padding ", pair_str(padding), ", dilation ", pair_str(dilation), ")");
        }
    *out = {x.size(0), x.size(1), oh, ow};
    return {kernel[0],  kernel[1],  stride[0],   stride[1],
            padding[0], padding[1], dilation[0], dilation[1]};
}

// A backward's grad_output against its input: same device and dtype.
void check_grad(const Tensor& grad_output, const Tensor& input, const char* op) {
    check_input(input, op);
    check_same_device({&grad_output, &input}, op);
    EMBER_CHECK(grad_output.dtype() == input.dtype(), op, ": grad_output ", describe(grad_output),
                " and input ", describe(input), " must have one dtype");
}

// grad_output's dims other than the last two must be input's.
void check_leading(const Tensor& grad_output, const Tensor& input, const char* op) {
    bool ok = grad_output.dim() == input.dim();
    std::string want = "[";
    for (int64_t d = 0; d < input.dim() - 2; ++d) {
        ok = ok && grad_output.size(d) == input.size(d);
        want += std::to_string(input.size(d)) + ", ";
    }
    EMBER_CHECK(ok, op, ": grad_output ", describe(grad_output), " does not match input ",
                describe(input), ": expected ", want, "OH, OW]");
}

// grad_output must have the forward's output shape (`want` is 4-d).
void check_output_shape(const Tensor& grad_output, const Tensor& input, Shape want,
                        const char* forward, const char* op) {
    if (input.dim() == 3) want.erase(want.begin());
    EMBER_CHECK(grad_output.shape() == want, op, ": grad_output ", describe(grad_output),
                " does not match the ", forward, " output shape ", shape_str(want), " of input ",
                describe(input));
}

// A zeroed-by-the-kernel grad_input for the 4-d input x, in the kernels'
// accumulation type (f32 for f16/bf16: rounded once, at the end).
Tensor grad_buffer(const Tensor& x) { return empty(x.shape(), like(x, acc_dtype(x.dtype()))); }

// The buffer as the caller's gradient: input's dtype, shape and memory
// format (a channels-last input's gradient is converted: the kernels write
// contiguous planes) — one copy where both the dtype and the layout change.
Tensor finish(const Tensor& dx, const Tensor& input) {
    const MemoryFormat format = input.suggest_memory_format();
    const Tensor g = dx.dtype() == input.dtype() ? dx : cast(dx, input.dtype(), format);
    return contiguous(unbatched(g, input), format);
}

}  // namespace

MaxPool2dResult max_pool2d(const Tensor& input, Int2 kernel, Int2 stride, Int2 padding,
                           Int2 dilation, bool ceil_mode) {
    check_input(input, "max_pool2d");
    const Tensor x = batched(input);
    Shape shape;
    const Pool2dWindow w =
        make_window(x, kernel, stride, padding, dilation, ceil_mode, "max_pool2d", &shape);
    Tensor values = empty(shape, like(x)), indices = empty(shape, like(x, DType::i64));
    if (values.numel() > 0) {
        const View v = view_of(values), i = view_of(indices), in = view_of(x);
        // CUDA: a hand-written kernel (cuDNN's pooling returns no indices).
        dispatch(
            {"max_pool2d", x.device(), {&values, &indices, &x}},
            [&] { cpu::max_pool2d(v, i, in, w); },
            [&](auto stream) { cuda::max_pool2d(v, i, in, w, stream); });
    }
    return {unbatched(values, input), unbatched(indices, input)};
}

Tensor avg_pool2d(const Tensor& input, Int2 kernel, Int2 stride, Int2 padding, bool ceil_mode,
                  bool count_include_pad) {
    check_input(input, "avg_pool2d");
    const Tensor x = batched(input);
    Shape shape;
    const Pool2dWindow w =
        make_window(x, kernel, stride, padding, {1, 1}, ceil_mode, "avg_pool2d", &shape);
    Tensor out = empty(shape, like(x));
    if (out.numel() > 0) {
        const View o = view_of(out), in = view_of(x);
        dispatch(
            {"avg_pool2d", x.device(), {&out, &x}},
            [&] { cpu::avg_pool2d(o, in, w, count_include_pad); },
            [&](auto stream) { cuda::avg_pool2d(o, in, w, count_include_pad, stream); });
    }
    return unbatched(out, input);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Int2 output_size) {
    check_input(input, "adaptive_avg_pool2d");
    const Tensor x = batched(input);
    EMBER_CHECK(output_size[0] >= 1 && output_size[1] >= 1, "adaptive_avg_pool2d: output size ",
                pair_str(output_size), " must be at least 1x1");
    EMBER_CHECK(x.size(2) >= 1 && x.size(3) >= 1, "adaptive_avg_pool2d: input ", describe(input),
                " has an empty plane");
    Tensor out = empty({x.size(0), x.size(1), output_size[0], output_size[1]}, like(x));
    if (out.numel() > 0) {
        const View o = view_of(out), in = view_of(x);
        dispatch(
            {"adaptive_avg_pool2d", x.device(), {&out, &x}},
            [&] { cpu::adaptive_avg_pool2d(o, in); },
            [&](auto stream) { cuda::adaptive_avg_pool2d(o, in, stream); });
    }
    return unbatched(out, input);
}

Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& indices) {
    const char* op = "max_pool2d_backward";
    check_grad(grad_output, input, op);
    check_same_device({&grad_output, &indices}, op);
    EMBER_CHECK(indices.dtype() == DType::i64, op, ": expected i64 indices, got ",
                describe(indices));
    EMBER_CHECK(indices.shape() == grad_output.shape(), op, ": indices ", describe(indices),
                " and grad_output ", describe(grad_output), " must have one shape");
    check_leading(grad_output, input, op);
    const Tensor x = batched(input), dy = batched(grad_output), idx = batched(indices);
    Tensor dx = grad_buffer(x);
    if (dx.numel() > 0) {
        std::optional<int64_t> bad;
        const View gx = view_of(dx), gy = view_of(dy), vi = view_of(idx);
        // CUDA: one thread per input element summing the outputs that chose
        // it (atomicAdd would not be deterministic); a bad index raises the
        // device error flag and surfaces at the next synchronization.
        dispatch(
            {op, x.device(), {&dx, &dy, &idx}}, [&] { bad = cpu::max_pool2d_backward(gx, gy, vi); },
            [&](auto stream) { cuda::max_pool2d_backward(gx, gy, vi, stream); });
        if (bad)
            EMBER_FAIL(op, ": index ", *bad, " in indices ", describe(indices), " is outside the ",
                       x.size(2), "x", x.size(3), " plane of input ", describe(input));
    }
    return finish(dx, input);
}

Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& input, Int2 kernel, Int2 stride,
                           Int2 padding, bool ceil_mode, bool count_include_pad) {
    const char* op = "avg_pool2d_backward";
    check_grad(grad_output, input, op);
    const Tensor x = batched(input);
    Shape shape;
    const Pool2dWindow w = make_window(x, kernel, stride, padding, {1, 1}, ceil_mode, op, &shape);
    check_output_shape(grad_output, input, shape, "avg_pool2d", op);
    const Tensor dy = batched(grad_output);
    Tensor dx = grad_buffer(x);
    if (dx.numel() > 0) {
        const View gx = view_of(dx), gy = view_of(dy);
        dispatch(
            {op, x.device(), {&dx, &dy}},
            [&] { cpu::avg_pool2d_backward(gx, gy, w, count_include_pad); },
            [&](auto stream) { cuda::avg_pool2d_backward(gx, gy, w, count_include_pad, stream); });
    }
    return finish(dx, input);
}

Tensor adaptive_avg_pool2d_backward(const Tensor& grad_output, const Tensor& input) {
    const char* op = "adaptive_avg_pool2d_backward";
    check_grad(grad_output, input, op);
    check_leading(grad_output, input, op);
    const Tensor x = batched(input), dy = batched(grad_output);
    EMBER_CHECK(dy.size(2) >= 1 && dy.size(3) >= 1, op, ": grad_output ", describe(grad_output),
                " has an output size ", dy.size(2), "x", dy.size(3), " below 1x1");
    EMBER_CHECK(x.size(2) >= 1 && x.size(3) >= 1, op, ": input ", describe(input),
                " has an empty plane");
    // A channels-last input whose windows tile its plane (a global pool):
    // where the backend writes its gradient as it lies, one pass and no
    // conversion after.
    const bool in_layout =
        x.suggest_memory_format() == MemoryFormat::channels_last && dy.dtype() == x.dtype() &&
        x.size(2) % dy.size(2) == 0 && x.size(3) % dy.size(3) == 0 &&
        backend_choice(
            op, x.device(), [] { return cpu::adaptive_pool_grad_channels_last(); },
            [](auto) { return cuda::adaptive_pool_grad_channels_last(); });
    Tensor dx = in_layout ? empty(x.shape(), like(x), MemoryFormat::channels_last) : grad_buffer(x);
    if (dx.numel() > 0) {
        const View gx = view_of(dx), gy = view_of(dy);
        dispatch(
            {op, x.device(), {&dx, &dy}}, [&] { cpu::adaptive_avg_pool2d_backward(gx, gy); },
            [&](auto stream) { cuda::adaptive_avg_pool2d_backward(gx, gy, stream); });
    }
    return finish(dx, input);
}

}  // namespace ember::kernels

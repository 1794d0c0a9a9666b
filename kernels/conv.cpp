// Fronts for conv2d and conv2d_backward: argument checks naming shapes,
// dtypes and devices, the output size, f16/bf16 through f32 on the CPU (cuDNN
// takes them as they are), contiguous operands for the kernels, and one call
// through the dispatch. conv2d's result and conv2d_backward's grad_input take
// the input's memory format (channels-last: the CPU's channels-last kernels
// where they fit, cuDNN's NHWC formats for f32/f16/bf16 on CUDA, NCHW and a
// conversion elsewhere).
#include "kernels/conv.h"

#include "kernels/copy.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/policy.h"
#include "kernels/cuda/conv.h"
#include "kernels/cuda/policy.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

std::string pair_str(Int2 p) { return shape_str({p[0], p[1]}); }

// The weight in cuDNN's NHWC filter order (OHWI): itself when its memory is
// already so (a 1×1 or one-channel kernel lies the same either way), else a copy.
Tensor filter_nhwc(const Tensor& weight) {
    return weight.is_contiguous(MemoryFormat::channels_last)
               ? weight
               : contiguous(weight, MemoryFormat::channels_last);
}

// t as a contiguous tensor of dtype ct (undefined stays undefined).
Tensor contiguous_in(const Tensor& t, DType ct) {
    if (!t.defined()) return t;
    return t.dtype() == ct ? contiguous(t) : cast(t, ct);
}

// Checks the window and sizes of a conv2d (as `op`) of a 4-d input and
// 4-d weight and returns its sizes, the output's included.
Conv2dShape conv2d_shape(const Tensor& input, const Tensor& weight, Int2 stride, Int2 padding,
                         Int2 dilation, int64_t groups, const char* op) {
    EMBER_CHECK(stride[0] >= 1 && stride[1] >= 1 && padding[0] >= 0 && padding[1] >= 0 &&
                    dilation[0] >= 1 && dilation[1] >= 1 && groups >= 1,
                op,
                ": expected stride >= 1, padding >= 0, dilation >= 1 and groups >= 1, got stride ",
                pair_str(stride), ", padding ", pair_str(padding), ", dilation ",
                pair_str(dilation), ", groups ", groups);
    // Bounds that keep every size product below 2^62: no overflow anywhere after this.
    constexpr int64_t kMax = int64_t(1) << 30;
    EMBER_CHECK(stride[0] <= kMax && stride[1] <= kMax && padding[0] <= kMax &&
                    padding[1] <= kMax && dilation[0] <= kMax && dilation[1] <= kMax &&
                    input.size(-1) <= kMax && input.size(-2) <= kMax && weight.size(2) <= kMax &&
                    weight.size(3) <= kMax,
                op, ": stride ", pair_str(stride), ", padding ", pair_str(padding), ", dilation ",
                pair_str(dilation), " or the sizes of ", describe(input), " and ", describe(weight),
                " exceed 2^30");

    const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
    const int64_t o = weight.size(0), kh = weight.size(2), kw = weight.size(3);
    EMBER_CHECK(c % groups == 0, op, ": the ", c, " channels of input ", describe(input),
                " are not divisible by groups = ", groups);
    EMBER_CHECK(o % groups == 0, op, ": the ", o, " output channels of weight ", describe(weight),
                " are not divisible by groups = ", groups);
    EMBER_CHECK(weight.size(1) == c / groups, op, ": weight ", describe(weight),
                " with groups = ", groups, " expects ", weight.size(1) * groups,
                " input channels, got input ", describe(input));
    EMBER_CHECK(kh >= 1 && kw >= 1, op, ": empty kernel in weight ", describe(weight));
    const int64_t eh = dilation[0] * (kh - 1) + 1, ew = dilation[1] * (kw - 1) + 1;
    const int64_t ph = h + 2 * padding[0], pw = w + 2 * padding[1];
    EMBER_CHECK(ph >= eh && pw >= ew, op, ": padded input size ", ph, "x", pw, " of input ",
                describe(input), " is smaller than the dilated kernel ", eh, "x", ew, " of weight ",
                describe(weight));
    return Conv2dShape{n,
                       c,
                       h,
                       w,
                       o,
                       kh,
                       kw,
                       stride[0],
                       stride[1],
                       padding[0],
                       padding[1],
                       dilation[0],
                       dilation[1],
                       groups,
                       (ph - eh) / stride[0] + 1,
                       (pw - ew) / stride[1] + 1};
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Int2 stride,
              Int2 padding, Int2 dilation, int64_t groups) {
    if (bias.defined())
        check_same_device({&input, &weight, &bias}, "conv2d");
    else
        check_same_device({&input, &weight}, "conv2d");
    EMBER_CHECK(input.dim() == 3 || input.dim() == 4,
                "conv2d: expected input [N, C, H, W] or [C, H, W], got ", describe(input));
    if (input.dim() == 3)
        return views::squeeze(
            conv2d(views::unsqueeze(input, 0), weight, bias, stride, padding, dilation, groups), 0);
    EMBER_CHECK(weight.dim() == 4, "conv2d: expected weight [O, C/groups, kH, kW], got ",
                describe(weight));
    check_floating(input, "conv2d");
    EMBER_CHECK(
        weight.dtype() == input.dtype() && (!bias.defined() || bias.dtype() == input.dtype()),
        "conv2d: input ", describe(input), ", weight ", describe(weight), " and bias ",
        describe(bias), " must have one dtype");
    const Conv2dShape s = conv2d_shape(input, weight, stride, padding, dilation, groups, "conv2d");
    EMBER_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == s.o),
                "conv2d: expected bias [", s.o, "] for weight ", describe(weight), ", got ",
                describe(bias));
    const int64_t n = s.n, o = s.o;
    const DType dt = input.dtype();
    // The result takes the input's memory format. A channels-last input is
    // read as it lies where the backend has a channels-last kernel
    // (kernels/*/policy.h); elsewhere the conv runs in NCHW and its result
    // is converted. The plan may also ask for channels-last operands from an
    // NCHW input (the CPU's bf16 kernels): the copies in and out are its cost.
    const MemoryFormat format = input.suggest_memory_format();
    const bool last = format == MemoryFormat::channels_last;
    const ConvPlan plan = backend_choice(
        "conv2d", input.device(), [&] { return cpu::conv2d_plan(s, dt, last); },
        [&](auto) { return cuda::conv2d_plan(dt, last); });
    const DType ct = plan.compute;
    const bool native = plan.channels_last;
    const MemoryFormat computed = native ? MemoryFormat::channels_last : MemoryFormat::contiguous;
    Tensor out = empty({n, o, s.oh, s.ow}, like(input, ct), computed);
    if (out.numel() > 0) {
        const Tensor x = native ? contiguous(input, computed) : contiguous_in(input, ct);
        // cuDNN's NHWC filter is the weight's channels-last memory; the CPU packs OIHW itself.
        const Tensor wt = plan.filter_last ? filter_nhwc(weight) : contiguous_in(weight, ct);
        const Tensor b = contiguous_in(bias, ct);
        const void* bp = b.defined() ? b.data_ptr() : nullptr;
        dispatch(
            {"conv2d", input.device(), {&out, &x, &wt, &b}, s.flops()},
            [&] {
                if (native)
                    cpu::conv2d_channels_last(s, ct, x.data_ptr(), wt.data_ptr(), bp,
                                              out.data_ptr());
                else
                    cpu::conv2d(s, ct, x.data_ptr(), wt.data_ptr(), bp, out.data_ptr());
            },
            [&](auto stream) {
                if (native)
                    cuda::conv2d_channels_last(s, ct, x.data_ptr(), wt.data_ptr(), bp,
                                               out.data_ptr(), stream);
                else
                    cuda::conv2d(s, ct, x.data_ptr(), wt.data_ptr(), bp, out.data_ptr(), stream);
            });
    }
    if (ct != dt) out = cast(out, dt);
    return contiguous(out, format);
}

Conv2dGrads conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                            Int2 stride, Int2 padding, Int2 dilation, int64_t groups,
                            std::array<bool, 3> need) {
    const char* op = "conv2d_backward";
    check_same_device({&grad_output, &input, &weight}, op);
    EMBER_CHECK(input.dim() == 3 || input.dim() == 4, op,
                ": expected input [N, C, H, W] or [C, H, W], got ", describe(input));
    EMBER_CHECK(weight.dim() == 4, op, ": expected weight [O, C/groups, kH, kW], got ",
                describe(weight));
    check_floating(input, op);
    EMBER_CHECK(grad_output.dtype() == input.dtype() && weight.dtype() == input.dtype(), op,
                ": grad_output ", describe(grad_output), ", input ", describe(input),
                " and weight ", describe(weight), " must have one dtype");
    // An unbatched input is a batch of one; its grad_output has no batch dim either.
    const bool unbatched = input.dim() == 3;
    const Tensor x = unbatched ? views::unsqueeze(input, 0) : input;
    const Conv2dShape s = conv2d_shape(x, weight, stride, padding, dilation, groups, op);
    Shape want = {s.n, s.o, s.oh, s.ow};
    if (unbatched) want.erase(want.begin());
    EMBER_CHECK(grad_output.shape() == want, op, ": grad_output ", describe(grad_output),
                " does not match the conv2d output shape ", shape_str(want), " of input ",
                describe(input), " and weight ", describe(weight));
    const Tensor dy = unbatched ? views::unsqueeze(grad_output, 0) : grad_output;

    const DType dt = input.dtype();
    // grad_input takes the input's memory format. Channels-last operands are
    // read as they lie where the backend has channels-last kernels for the
    // asked-for gradients; elsewhere the pass runs in NCHW.
    const MemoryFormat format = x.suggest_memory_format();
    const bool last = format == MemoryFormat::channels_last;
    const ConvPlan plan = backend_choice(
        op, x.device(), [&] { return cpu::conv2d_backward_plan(s, dt, last, need[0], need[1]); },
        [&](auto) { return cuda::conv2d_plan(dt, last); });
    const DType ct = plan.compute;
    const bool native = plan.channels_last;
    const MemoryFormat computed = native ? MemoryFormat::channels_last : MemoryFormat::contiguous;
    // cuDNN's NHWC filter is the weight's channels-last memory (grad_weight's too).
    const bool filter_last = plan.filter_last;
    Conv2dGrads g;
    if (need[0]) g.input = empty(x.shape(), like(x, ct), computed);
    if (need[1])
        g.weight = empty(weight.shape(), like(weight, ct),
                         filter_last ? computed : MemoryFormat::contiguous);
    if (need[2]) g.bias = empty({s.o}, like(weight, ct));
    auto work = [](const Tensor& t) { return t.defined() && t.numel() > 0; };
    if (work(g.input) || work(g.weight) || work(g.bias)) {
        // Only what the asked-for gradients read: the weight for grad_input,
        // the input for grad_weight.
        auto operand = [&](const Tensor& t) {
            return native ? contiguous(t, computed) : contiguous_in(t, ct);
        };
        const Tensor y = operand(dy), xin = need[1] ? operand(x) : Tensor();
        const Tensor w = !need[0]      ? Tensor()
                         : filter_last ? filter_nhwc(weight)
                                       : contiguous_in(weight, ct);
        auto ptr = [](const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; };
        dispatch(
            {op,
             x.device(),
             {&g.input, &g.weight, &g.bias, &y, &xin, &w},
             double(int(need[0]) + int(need[1])) * s.flops()},
            [&] {
                if (native)
                    cpu::conv2d_backward_channels_last(s, ct, y.data_ptr(), ptr(xin), ptr(w),
                                                       ptr(g.input), ptr(g.weight), ptr(g.bias));
                else
                    cpu::conv2d_backward(s, ct, y.data_ptr(), ptr(xin), ptr(w), ptr(g.input),
                                         ptr(g.weight), ptr(g.bias));
            },
            [&](auto stream) {
                if (native)
                    cuda::conv2d_backward_channels_last(s, ct, y.data_ptr(), ptr(xin), ptr(w),
                                                        ptr(g.input), ptr(g.weight), ptr(g.bias),
                                                        stream);
                else
                    cuda::conv2d_backward(s, ct, y.data_ptr(), ptr(xin), ptr(w), ptr(g.input),
                                          ptr(g.weight), ptr(g.bias), stream);
            });
    }
    for (Tensor* t : {&g.input, &g.weight, &g.bias})
        if (t->defined() && ct != dt) *t = cast(*t, dt);
    if (g.input.defined()) g.input = contiguous(g.input, format);
    if (g.weight.defined()) g.weight = contiguous(g.weight);  // parameters' gradients: row-major
    if (unbatched && g.input.defined()) g.input = views::squeeze(g.input, 0);
    return g;
}

}  // namespace ember::kernels

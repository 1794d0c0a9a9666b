// Front for conv2d: argument checks naming shapes, dtypes and devices, the
// output size, f16/bf16 through f32, contiguous operands for the kernel, and
// a switch on the device.
#include "kernels/conv.h"

#include "kernels/copy.h"
#include "kernels/cpu/conv.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

std::string pair_str(Int2 p) { return shape_str({p[0], p[1]}); }

// t as a contiguous tensor of dtype ct (undefined stays undefined).
Tensor dense(const Tensor& t, DType ct) {
    if (!t.defined()) return t;
    return t.dtype() == ct ? t.contiguous() : cast(t, ct);
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
        return conv2d(input.unsqueeze(0), weight, bias, stride, padding, dilation, groups)
            .squeeze(0);
    EMBER_CHECK(weight.dim() == 4, "conv2d: expected weight [O, C/groups, kH, kW], got ",
                describe(weight));
    check_floating(input, "conv2d");
    EMBER_CHECK(
        weight.dtype() == input.dtype() && (!bias.defined() || bias.dtype() == input.dtype()),
        "conv2d: input ", describe(input), ", weight ", describe(weight), " and bias ",
        describe(bias), " must have one dtype");
    EMBER_CHECK(
        stride[0] >= 1 && stride[1] >= 1 && padding[0] >= 0 && padding[1] >= 0 &&
            dilation[0] >= 1 && dilation[1] >= 1 && groups >= 1,
        "conv2d: expected stride >= 1, padding >= 0, dilation >= 1 and groups >= 1, got stride ",
        pair_str(stride), ", padding ", pair_str(padding), ", dilation ", pair_str(dilation),
        ", groups ", groups);
    // Bounds that keep every size product below 2^62: no overflow anywhere after this.
    constexpr int64_t kMax = int64_t(1) << 30;
    EMBER_CHECK(stride[0] <= kMax && stride[1] <= kMax && padding[0] <= kMax &&
                    padding[1] <= kMax && dilation[0] <= kMax && dilation[1] <= kMax &&
                    input.size(-1) <= kMax && input.size(-2) <= kMax && weight.size(2) <= kMax &&
                    weight.size(3) <= kMax,
                "conv2d: stride ", pair_str(stride), ", padding ", pair_str(padding),
                ", dilation ", pair_str(dilation), " or the sizes of ", describe(input), " and ",
                describe(weight), " exceed 2^30");

    const int64_t n = input.size(0), c = input.size(1), h = input.size(2), w = input.size(3);
    const int64_t o = weight.size(0), kh = weight.size(2), kw = weight.size(3);
    EMBER_CHECK(c % groups == 0, "conv2d: the ", c, " channels of input ", describe(input),
                " are not divisible by groups = ", groups);
    EMBER_CHECK(o % groups == 0, "conv2d: the ", o, " output channels of weight ", describe(weight),
                " are not divisible by groups = ", groups);
    EMBER_CHECK(weight.size(1) * groups == c, "conv2d: weight ", describe(weight),
                " with groups = ", groups, " expects ", weight.size(1) * groups,
                " input channels, got input ", describe(input));
    EMBER_CHECK(kh >= 1 && kw >= 1, "conv2d: empty kernel in weight ", describe(weight));
    EMBER_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == o),
                "conv2d: expected bias [", o, "] for weight ", describe(weight), ", got ",
                describe(bias));
    const int64_t eh = dilation[0] * (kh - 1) + 1, ew = dilation[1] * (kw - 1) + 1;
    const int64_t ph = h + 2 * padding[0], pw = w + 2 * padding[1];
    EMBER_CHECK(ph >= eh && pw >= ew, "conv2d: padded input size ", ph, "x", pw, " of input ",
                describe(input), " is smaller than the dilated kernel ", eh, "x", ew, " of weight ",
                describe(weight));
    const cpu::Conv2dShape s{n,
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

    const DType dt = input.dtype();
    const DType ct = dt == DType::f16 || dt == DType::bf16 ? DType::f32 : dt;
    Tensor out = empty({n, o, s.oh, s.ow}, like(input, ct));
    if (out.numel() > 0) {
        const Tensor x = dense(input, ct), wt = dense(weight, ct), b = dense(bias, ct);
        switch (input.device().type) {
            case DeviceType::cpu:
                cpu::conv2d(s, ct, x.data_ptr(), wt.data_ptr(),
                            b.defined() ? b.data_ptr() : nullptr, out.data_ptr());
                break;
            case DeviceType::cuda:
                // cuDNN goes here: cudnnConvolutionForward with the algorithm
                // picked by cudnnFindConvolutionForwardAlgorithmEx and cached
                // per shape in the device context.
                unsupported_device("conv2d", input.device());
        }
    }
    return ct == dt ? out : cast(out, dt);
}

}  // namespace ember::kernels

// What the convolution kernels take (kernels/conv.h is the front): one
// conv2d's sizes and a backend's plan for it. No Tensor: both backends
// include this.
#pragma once

#include <cstdint>

#include "../core/dtype.h"

namespace ember::kernels {

/// Sizes of one conv2d, as both backends take them: input [n, c, h, w],
/// weight [o, c / groups, kh, kw], output [n, o, oh, ow]; stride (sh, sw),
/// zero padding (ph, pw), dilation (dh, dw).
struct Conv2dShape {
    int64_t n, c, h, w;
    int64_t o, kh, kw;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t groups;
    int64_t oh, ow;

    /// Multiply-adds of the forward, times two.
    double flops() const { return 2.0 * double(n * o * oh * ow) * double(c / groups * kh * kw); }
};

/// What a backend takes for one convolution (kernels/cpu/policy.h,
/// kernels/cuda/policy.h): the dtype it computes in, whether it reads
/// channels-last operands as they lie, and whether its filter is then the
/// weight's channels-last memory.
struct ConvPlan {
    DType compute = DType::f32;
    bool channels_last = false;
    bool filter_last = false;
};

}  // namespace ember::kernels

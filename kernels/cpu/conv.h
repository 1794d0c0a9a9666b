// CPU conv2d forward (declarations); the kernel is in kernels/cpu/conv.cpp.
// Raw contiguous NCHW buffers and a size struct, no Tensor.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace ember::kernels::cpu {

/// Sizes of one conv2d: input [n, c, h, w], weight [o, c / groups, kh, kw],
/// output [n, o, oh, ow]; stride (sh, sw), zero padding (ph, pw), dilation (dh, dw).
struct Conv2dShape {
    int64_t n, c, h, w;
    int64_t o, kh, kw;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t groups;
    int64_t oh, ow;
};

/// out = conv2d(input, weight) + bias on contiguous buffers of `dtype` (f32
/// or f64); bias [o] may be null. Overwrites every element of out.
void conv2d(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
            const void* bias, void* out);

}  // namespace ember::kernels::cpu

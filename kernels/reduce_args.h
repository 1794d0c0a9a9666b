// The layout every reduction and softmax kernel takes (kernels/reduce.h is
// the front). No Tensor: both backends include this.
#pragma once

#include <cstdint>

namespace ember::kernels {

/// The layout every reduction and softmax kernel takes: a dense input
/// [outer, size, inner] reduced over `size` into a dense output [outer,
/// inner]. The Views passed with it are dense buffers in that order; only
/// their data pointer and dtype are read.
struct ReduceShape {
    int64_t outer = 1;
    int64_t size = 1;
    int64_t inner = 1;
};

}  // namespace ember::kernels

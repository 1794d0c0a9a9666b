// The summation order both backends' reductions share (Note [Pairwise
// summation] in kernels/cpu/reduce.h; kernels/cuda/reduce_plan.h): the one
// definition of the leaf sizes and lane count, so the CUDA kernels and the
// CPU ones cannot drift apart. Plain constants, no Tensor.
#pragma once

#include <cstdint>

namespace ember::kernels {

/// Lanes a leaf of a contiguous row is summed in (lane l takes elements
/// l, l + 16, ...), combined as a tree: 1 AVX-512 or 2 AVX2 registers of f32.
inline constexpr int kReduceLanes = 16;
/// Elements per leaf of a contiguous row: 16 terms per lane.
inline constexpr int64_t kReduceRowLeaf = 256;
/// Rows per leaf of a column (an inner dimension > 1), summed in order.
inline constexpr int64_t kReduceColLeaf = 8;

static_assert(kReduceRowLeaf % kReduceLanes == 0, "a leaf is whole lanes");
static_assert((kReduceLanes & (kReduceLanes - 1)) == 0, "the lanes combine as a binary tree");

}  // namespace ember::kernels

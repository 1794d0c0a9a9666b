// Dropout driven by the Philox stream: the mask of element i is a function of
// (seed, first block, i) only, so CPU and CUDA give the same mask, and the
// mask is exactly what rand() gives at the same generator state.
#pragma once

#include <cstdint>

#include "../core/tensor.h"

namespace ember::kernels {

/// What dropout_forward returns: the output (x's dtype and shape, contiguous)
/// and the mask (u8, same shape, 1 = kept) the backward needs.
struct DropoutForward {
    Tensor output;
    Tensor mask;
};

/// Element i (row-major) is kept iff U_i >= p, where U_i is element i of the
/// f32 uniform stream of docs/rng.md for (seed, first_block): the value
/// rand(x.shape(), {f32}) gives at that generator state, whatever x's dtype.
/// Kept values are scaled by 1 / (1 − p) (in f32, or f64 for f64 x), dropped
/// ones are 0. p must be in [0, 1). p == 0 is the identity with an all-ones
/// mask (what the rule gives, every U_i being >= 0; the kernel then skips the
/// Philox rounds). x: floating, any strides.
DropoutForward dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t first_block);

/// grad_x = grad_y · mask / (1 − p); grad_y floating, mask u8 of its shape.
Tensor dropout_backward(const Tensor& grad_y, const Tensor& mask, double p);

/// Philox blocks dropout_forward consumes for n elements: ceil(n / 4), for any
/// p (so the stream position after a dropout does not depend on p). The caller
/// reserves them from a Generator and passes the first as first_block.
uint64_t dropout_blocks(int64_t n);

}  // namespace ember::kernels

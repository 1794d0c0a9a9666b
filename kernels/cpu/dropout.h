// CPU dropout kernels (declarations); the loops are in kernels/cpu/dropout.cpp.
// Views in, no Tensor.
#pragma once

#include <cstdint>

#include "../view.h"

namespace ember::kernels::cpu {

/// out[i] = U_i >= p ? x[i] / (1 − p) : 0 and mask[i] = U_i >= p, U_i the f32
/// uniform stream at (seed, first_block). x and out contiguous of one floating
/// dtype, mask contiguous u8, all of n elements.
void dropout_forward(const View& out, const View& mask, const View& x, double p, uint64_t seed,
                     uint64_t first_block);

/// grad_x[i] = grad_y[i] · mask[i] / (1 − p) (contiguous; grad_x of grad_y's dtype).
void dropout_backward(const View& grad_x, const View& grad_y, const View& mask, double p);

}  // namespace ember::kernels::cpu

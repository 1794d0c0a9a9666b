// CUDA dropout kernels on Views (kernels/cuda/dropout.cu): the same entry
// points as kernels/cpu/dropout.h, plus the stream they are queued on. Plain
// C++: every build sees these declarations.
#pragma once

#include <cstdint>

#include "../../core/cuda_context.h"
#include "../view.h"

namespace ember::kernels::cuda {

void dropout_forward(const View& out, const View& mask, const View& x, double p, uint64_t seed,
                     uint64_t first_block, StreamRef stream);
void dropout_backward(const View& grad_x, const View& grad_y, const View& mask, double p,
                      StreamRef stream);

}  // namespace ember::kernels::cuda

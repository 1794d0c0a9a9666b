// CUDA 2-d pooling kernels on Views (kernels/cuda/pool.cu): the same entry
// points as kernels/cpu/pool.h, plus the stream they are queued on. Plain
// C++: every build sees these declarations.
#pragma once

#include "../../core/cuda_context.h"
#include "../pool_args.h"
#include "../view.h"

namespace ember::kernels::cuda {

void max_pool2d(const View& values, const View& indices, const View& input, const Pool2dWindow& w,
                StreamRef stream);
void avg_pool2d(const View& out, const View& input, const Pool2dWindow& w, bool count_include_pad,
                StreamRef stream);
void adaptive_avg_pool2d(const View& out, const View& input, StreamRef stream);

/// As cpu::max_pool2d_backward, but an index outside [0, H·W) raises the
/// device error flag (named `max_pool2d_backward`, position: the flat
/// position in grad_out) instead of being returned; it is skipped.
void max_pool2d_backward(const View& grad_input, const View& grad_out, const View& indices,
                         StreamRef stream);
void avg_pool2d_backward(const View& grad_input, const View& grad_out, const Pool2dWindow& w,
                         bool count_include_pad, StreamRef stream);
void adaptive_avg_pool2d_backward(const View& grad_input, const View& grad_out, StreamRef stream);

}  // namespace ember::kernels::cuda

// CUDA batch norm and layer norm kernels on Views (kernels/cuda/batch_norm.cu,
// layer_norm.cu): the same entry points as kernels/cpu/norm.h, plus the
// stream they are queued on. The front has checked the arguments and made x and the gradients
// contiguous [N, C, S] (a channels-last x as [N·H·W, C, 1]) or [R, M]. Plain C++: every build sees
// these.
#pragma once

#include "../../core/cuda_context.h"
#include "../norm_args.h"

namespace ember::kernels::cuda {

/// Training forward: batch statistics, running-statistics update, then y.
void batch_norm_forward(const BatchNormArgs& a, StreamRef stream);

/// Eval forward from the running statistics.
void batch_norm_inference(const BatchNormArgs& a, StreamRef stream);

/// Training-mode gradients of batch norm.
void batch_norm_backward(const BatchNormBackwardArgs& a, StreamRef stream);

/// Per row of x [R, M]: out, mean and rstd.
void layer_norm_forward(const LayerNormArgs& a, StreamRef stream);

/// Layer norm gradients from the saved mean and rstd.
void layer_norm_backward(const LayerNormBackwardArgs& a, StreamRef stream);

}  // namespace ember::kernels::cuda

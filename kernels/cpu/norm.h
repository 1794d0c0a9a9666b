// CPU batch norm and layer norm kernels (declarations); the loops are in
// kernels/cpu/norm.cpp. Views in (the argument structs and layouts of
// kernels/norm.h), no Tensor.
#pragma once

#include "../norm_args.h"

namespace ember::kernels::cpu {

/// out = (x − mean)·invstd·w + b with the batch mean and biased variance of
/// each channel (then max(out, 0) when a.relu); writes save_mean and
/// save_invstd and updates the running statistics when present.
void batch_norm_forward(const BatchNormArgs& a);

/// out = (x − running_mean) / sqrt(running_var + eps)·w + b.
void batch_norm_inference(const BatchNormArgs& a);

/// Training-mode gradients of batch norm (of the fused batch norm + ReLU when
/// a.relu_out is present).
void batch_norm_backward(const BatchNormBackwardArgs& a);

/// Per row of x [R, M]: out = (x − mean)·rstd·w + b; writes mean and rstd [R].
void layer_norm_forward(const LayerNormArgs& a);

/// Layer norm gradients from the saved mean and rstd.
void layer_norm_backward(const LayerNormBackwardArgs& a);

}  // namespace ember::kernels::cpu

// The linear layer's products through cuBLASLt with the bias in the GEMM's
// epilogue (kernels/cuda/linear.cpp): the forward adds the bias (and the
// ReLU) while the tile is still in registers, the weight gradient's GEMM
// sums the bias gradient from the operand it already reads. Plain C++: every
// build sees these declarations; the front (kernels/matmul.cpp) calls them
// and runs the plain cuBLAS GEMM and its own bias passes when they return
// false.
#pragma once

#include "../../core/cuda_context.h"
#include "../matmul_args.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// out [M, N] = act(x [M, K] · wᵀ + bias); w is [N, K], bias [N] contiguous
/// or absent (data == nullptr), x and w with unit column stride and any row
/// stride, out contiguous; one dtype, f32 (TF32 when allow_tf32()), f16 or
/// bf16 (f32 accumulation, the bias and the activation applied in f32 and
/// the result rounded once). gelu_tanh with `pre` present also writes the
/// pre-activation there ([M, N], unit column stride, row stride a multiple
/// of 8 and ≥ N: cuBLASLt's rule for its auxiliary output). Returns false, having queued
/// nothing, when cuBLASLt offers no algorithm for these shapes, strides and
/// alignments (or the dtype is f64).
bool linear_forward(const View& out, const View& x, const View& w, const View& bias,
                    LinearActivation act, const View& pre, StreamRef stream);

/// grad_weight [N, K] = gᵀ · x and grad_bias [N] = Σ over the M rows of g,
/// in one GEMM (g [M, N] and x [M, K] with unit column stride; grad_weight
/// and grad_bias contiguous; one dtype as above). Returns false, having
/// queued nothing, where cuBLASLt offers no algorithm.
bool linear_weight_grad(const View& grad_weight, const View& grad_bias, const View& g,
                        const View& x, StreamRef stream);

}  // namespace ember::kernels::cuda

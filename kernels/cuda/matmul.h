// CUDA (batched) GEMM through cuBLAS (kernels/cuda/matmul.cpp): the entry
// point of kernels/cpu/matmul.h plus the stream it is queued on. Plain C++:
// every build sees this declaration.
#pragma once

#include "../../core/cuda_context.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// out[..., M, N] = a[..., M, K] · b[..., K, N], or += when `accumulate`,
/// on device buffers. As cpu::matmul, but f32, f64, f16 and bf16 (f16/bf16
/// read and written as they are, accumulated in f32; f32 in TF32 when
/// allow_tf32()); integers are an Error. a and b describable by
/// cuda::blas_matrix (kernels/cuda/matmul_plan.h: the front copies an operand
/// that is not), out row-major without overlap. K = 0 zeroes a contiguous out
/// (or leaves it alone when accumulating) without calling cuBLAS.
void matmul(const View& out, const View& a, const View& b, bool accumulate, StreamRef stream);

}  // namespace ember::kernels::cuda

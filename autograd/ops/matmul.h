// Differentiable matrix products: semantics as kernels/matmul.h (torch.matmul
// broadcasting, bmm, addmm, linear).
#pragma once

#include "../../core/tensor.h"

namespace ember {

Tensor matmul(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
/// c + a · b, c broadcast to [M, N].
Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b);
/// x · wᵀ + bias (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});
/// relu(linear(x, w, bias)) as one op: on CUDA the bias and the ReLU ride in
/// the GEMM's epilogue (kernels/matmul.h); the backward masks dy by y > 0.
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& bias = {});
/// gelu(linear(x, w, bias)) with GELU's tanh approximation, as one op: on
/// CUDA the bias and the GELU ride in the GEMM's epilogue, which also writes
/// the pre-activation the backward reads.
Tensor linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias = {});

}  // namespace ember

// Matrix products: matmul (torch.matmul semantics), bmm, addmm and linear.
// Each returns a new tensor; the operands may be any views (a transposed
// operand is read in place, only an operand strided in both matrix dims is
// copied). docs/linalg.md lists the dtypes and the threading.
#pragma once

#include <cstdint>
#include <optional>

#include "../core/tensor.h"
#include "matmul_args.h"

namespace ember::kernels {

/// The product of a and b as torch.matmul: 1-d·1-d is a dot product (0-d
/// result); 2-d·2-d a matrix product; a 1-d operand is a row (left) or a
/// column (right) vector whose dim is removed from the result; with a 3-d or
/// larger operand the leading dims are batch dims and broadcast. Both
/// operands have the same dtype: f32, f64, f16/bf16 (computed in f32 and
/// rounded once), i32 or i64 (exact; overflow is not checked). On CUDA:
/// cuBLAS, floating dtypes only; f32 in TF32 when allow_tf32()
/// (core/cuda_context.h); docs/cuda.md, "Matrix products and TF32".
Tensor matmul(const Tensor& a, const Tensor& b);

/// Strict batched product: a [B, M, K] · b [B, K, N] -> [B, M, N] (no broadcasting).
Tensor bmm(const Tensor& a, const Tensor& b);

/// c + a · b for 2-d a [M, K] and b [K, N]; c broadcasts to [M, N] (a bias
/// row [N], a column [M, 1], a full [M, N]). Same dtype for all three.
Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b);

/// The linear layer y = x · wᵀ + bias with x [..., in], w [out, in] and bias
/// [out] or undefined; y is [..., out]. w is read transposed in place.
/// On CUDA with a bias (f32, f16, bf16), one cuBLASLt GEMM adds the bias in
/// its epilogue (kernels/cuda/linear.h); elsewhere the bias is out's
/// starting value and the GEMM accumulates onto it.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});

/// relu(linear(x, w, bias)) in one op: on CUDA the ReLU rides in the same
/// epilogue as the bias (CUBLASLT_EPILOGUE_RELU_BIAS), elsewhere linear then relu.
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& bias = {});

/// gelu(linear(x, w, bias), tanh approximation) in one op, with (when
/// want_pre) the pre-activation its backward needs (gelu_backward's input):
/// on CUDA one cuBLASLt GEMM writes both (CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
/// `pre` is then a view with padded rows) or, without want_pre, the output
/// alone (GELU_BIAS); elsewhere linear then gelu.
struct LinearGelu {
    Tensor out, pre;
};
LinearGelu linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias = {},
                       bool want_pre = true);

/// The linear layer's weight gradient and, when want_bias, its bias gradient
/// from grad [rows, out] and x [rows, in] (the layer's rows stacked):
/// weight = gradᵀ · x [out, in], bias = Σ over the rows of grad [out]. On
/// CUDA (f32, f16, bf16) one cuBLASLt GEMM sums the bias gradient in its
/// epilogue (CUBLASLT_EPILOGUE_BGRADB); elsewhere matmul, then sum. `out`
/// (default: x's dtype) may be f32 for f16/bf16 operands — the gradients of
/// f32 weights autocast lowered: on the CPU bf16's f32 sums as they are, not
/// rounded to bf16 first; elsewhere computed in x's dtype, then cast.
struct LinearWeightGrads {
    Tensor weight, bias;
};
LinearWeightGrads linear_weight_grad(const Tensor& grad, const Tensor& x, bool want_bias,
                                     std::optional<DType> out = std::nullopt);

}  // namespace ember::kernels

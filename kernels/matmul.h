// Matrix products: matmul (torch.matmul semantics), bmm, addmm and linear.
// Each returns a new tensor; the operands may be any views (a transposed
// operand is read in place, only an operand strided in both matrix dims is
// copied). docs/linalg.md lists the dtypes and the threading.
#pragma once

#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace ember::kernels {

/// How a [rows, cols] matrix lies in memory in BLAS terms: row- or
/// column-major with unit inner stride and leading dimension `ld`.
struct MatrixLayout {
    bool row_major = true;
    int64_t ld = 0;  // elements between consecutive rows (row-major) or columns
};

/// The layout of a matrix with element strides (row_stride, col_stride), or
/// nullopt when neither stride is 1 (a "truly strided" operand that must be
/// made contiguous first). A size-1 dim's stride is irrelevant, so a row
/// vector or column vector always maps; stride-0 (broadcast) rows map too.
inline std::optional<MatrixLayout> matrix_layout(int64_t rows, int64_t cols, int64_t row_stride,
                                                 int64_t col_stride) {
    if (cols <= 1 || col_stride == 1)
        return MatrixLayout{true, rows <= 1 ? (cols > 1 ? cols : 1) : row_stride};
    if (rows <= 1 || row_stride == 1) return MatrixLayout{false, col_stride};
    return std::nullopt;
}

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
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = {});

}  // namespace ember::kernels

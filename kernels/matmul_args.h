// What the matrix-product kernels take (kernels/matmul.h is the front): how
// an operand lies in memory, and what a fused linear applies after its bias.
// No Tensor: both backends include this.
#pragma once

#include <cstdint>
#include <optional>

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

/// What a fused linear applies after the bias.
enum class LinearActivation { none, relu, gelu_tanh };

}  // namespace ember::kernels

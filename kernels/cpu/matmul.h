// CPU GEMM on Views: the one matrix-product entry point that matmul, bmm,
// addmm, linear and conv2d (im2col) all reach. Declarations plus the layout
// rule that decides whether an operand maps onto Eigen without a copy.
#pragma once

#include <cstdint>
#include <optional>

#include "kernels/view.h"

namespace ember::kernels::cpu {

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

/// out[..., M, N] = a[..., M, K] · b[..., K, N], or += when `accumulate`.
/// The three views have the same rank >= 2 and the same batch dims (the
/// caller broadcasts with stride-0 dims); a and b are mappable per
/// matrix_layout, out's rows have unit inner stride. Same dtype for all:
/// f32, f64, i32 or i64. K = 0 writes zeros (or leaves out alone when
/// accumulating). Many small matrices run in parallel over the batch with
/// single-threaded Eigen inside; large ones let Eigen thread the GEMM.
void matmul(const View& out, const View& a, const View& b, bool accumulate = false);

}  // namespace ember::kernels::cpu

// How a batched row-major product out[..] (=|+=) a[..] · b[..] maps onto
// cuBLAS's column-major GEMM (kernels/cuda/matmul.cpp), as host functions
// tested on the CPU against a model of cuBLAS's semantics
// (tests/kernels/test_matmul_plan.cpp).
//
// Note [Row-major products on column-major cuBLAS]
// A row-major [R, C] matrix with row stride ld is, byte for byte, the
// column-major [C, R] matrix (its transpose) with the same ld. So out = a · b
// is computed as outᵀ = bᵀ · aᵀ: cuBLAS's first operand comes from b, its
// second from a, its m is our n and its n is our m. An operand that lies
// column-major in row-major terms (a transposed view) is already its own
// transpose in memory and gets CUBLAS_OP_T instead: no copy either way.
// cuBLAS asks ld >= the stored rows (and >= 1) even where a dim of 1 makes ld
// irrelevant, so such an ld is replaced; an operand with overlapping or
// broadcast (stride-0) rows or columns cannot be described at all and is
// made contiguous by the front (blas_matrix returns nullopt for it).
//
// Batch dims fold, innermost first, into one evenly strided batch
// (cublasGemmStridedBatchedEx; a broadcast batch has stride 0), and the
// dims that do not fold become a host loop of calls. A right operand shared
// by the whole batch (x · wᵀ of a linear layer) folds further into one tall
// GEMM when the rows of a and out stack evenly. Sizes are int64: the _64
// entry points of cuBLAS take them, so nothing is split.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

#include "../../core/error.h"
#include "../matmul_fold.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// One operand as cuBLAS takes it: op(X) with X column-major of leading dim `ld`.
struct BlasMatrix {
    bool transpose = false;  // CUBLAS_OP_T
    int64_t ld = 1;
};

/// How the row-major-semantics matrix [rows, cols] with element strides
/// (row_stride, col_stride) is cuBLAS's op(X) = its transpose [cols, rows]
/// (Note [Row-major products on column-major cuBLAS]); nullopt when no ld
/// describes it (overlapping or broadcast rows or columns, negative strides).
inline std::optional<BlasMatrix> blas_matrix(int64_t rows, int64_t cols, int64_t row_stride,
                                             int64_t col_stride) {
    // X stored column-major [stored_rows, stored_cols] with leading dim ld.
    auto fits = [](int64_t stored_rows, int64_t stored_cols, int64_t ld) -> std::optional<int64_t> {
        const int64_t need = std::max<int64_t>(1, stored_rows);
        if (stored_cols <= 1) return need;  // one column: ld is never used
        if (ld >= need) return ld;
        return std::nullopt;
    };
    // Row-major: the transpose [cols, rows] is X itself, op N.
    if (cols <= 1 || col_stride == 1)
        if (auto ld = fits(cols, rows, row_stride)) return BlasMatrix{false, *ld};
    // Column-major: X is [rows, cols] and op(X) = Xᵀ.
    if (rows <= 1 || row_stride == 1)
        if (auto ld = fits(rows, cols, col_stride)) return BlasMatrix{true, *ld};
    return std::nullopt;
}

/// The calls that compute out (=|+=) a · b, in cuBLAS's terms: every call is
/// GEMM(x_op, y_op, m, n, k, X = b + b offset, Y = a + a offset, C = out + c
/// offset) over `batch` matrices `stride_*` elements apart, with beta = 1
/// when accumulating. Offsets and strides are in elements.
struct GemmPlan {
    int64_t m = 0, n = 0, k = 0;  // cuBLAS's: m = out's cols, n = out's rows (per matrix)
    BlasMatrix x, y;              // from b, from a
    int64_t ldc = 1;
    int64_t batch = 1;  // matrices per call
    int64_t stride_x = 0, stride_y = 0, stride_c = 0;
    bool accumulate = false;
    // The batch dims that did not fold: one call per index, outermost first.
    int outer_ndim = 0;
    int64_t outer_shape[kMaxDims] = {};
    int64_t outer_a[kMaxDims] = {}, outer_b[kMaxDims] = {}, outer_c[kMaxDims] = {};

    /// How many cuBLAS calls the plan makes.
    int64_t calls() const {
        int64_t c = 1;
        for (int d = 0; d < outer_ndim; ++d) c *= outer_shape[d];
        return c;
    }
};

/// Element offsets of call i's first matrices in a, b and out.
struct GemmOffsets {
    int64_t a = 0, b = 0, c = 0;
};

inline GemmOffsets call_offsets(const GemmPlan& p, int64_t i) {
    GemmOffsets o;
    for (int d = p.outer_ndim - 1; d >= 0; --d) {
        const int64_t j = i % p.outer_shape[d];
        i /= p.outer_shape[d];
        o.a += j * p.outer_a[d];
        o.b += j * p.outer_b[d];
        o.c += j * p.outer_c[d];
    }
    return o;
}

/// The plan for out[..., M, N] (=|+=) a[..., M, K] · b[..., K, N]: views of
/// one rank >= 2 with the same batch dims (broadcast ones stride 0), a and b
/// describable by blas_matrix, out with unit column stride and no overlap.
/// Expects M, N, K and the batch all > 0 (an empty product or K = 0 never
/// reaches cuBLAS).
inline GemmPlan plan_gemm(const View& out, const View& a, const View& b, bool accumulate) {
    const int nd = out.ndim, nb = nd - 2;
    EMBER_INTERNAL_ASSERT(nd >= 2 && a.ndim == nd && b.ndim == nd);
    const int64_t m = out.shape[nd - 2], n = out.shape[nd - 1], k = a.shape[nd - 1];
    EMBER_INTERNAL_ASSERT(m > 0 && n > 0 && k > 0 && a.shape[nd - 2] == m && b.shape[nd - 2] == k &&
                          b.shape[nd - 1] == n);
    const auto y = blas_matrix(m, k, a.strides[nd - 2], a.strides[nd - 1]);
    const auto x = blas_matrix(k, n, b.strides[nd - 2], b.strides[nd - 1]);
    // out: row-major, so op N of its transpose [n, m], which cuBLAS writes.
    const auto c = blas_matrix(m, n, out.strides[nd - 2], out.strides[nd - 1]);
    EMBER_INTERNAL_CHECK(x && y && c && !c->transpose, "plan_gemm: operand strides a [",
                         a.strides[nd - 2], ", ", a.strides[nd - 1], "], b [", b.strides[nd - 2],
                         ", ", b.strides[nd - 1], "], out [", out.strides[nd - 2], ", ",
                         out.strides[nd - 1], "] do not map onto cuBLAS");

    GemmPlan p;
    p.m = n;
    p.n = m;
    p.k = k;
    p.x = *x;
    p.y = *y;
    p.ldc = c->ld;
    p.accumulate = accumulate;

    // Fold batch dims from the innermost outwards while all three fold alike.
    int first = nb;
    while (first > 0 && folded_stride(out, first - 1, nb) &&
           folded_stride(a, first - 1, nb) && folded_stride(b, first - 1, nb))
        --first;
    for (int d = first; d < nb; ++d) p.batch *= out.shape[d];
    p.stride_c = *folded_stride(out, first, nb);
    p.stride_y = *folded_stride(a, first, nb);
    p.stride_x = *folded_stride(b, first, nb);
    for (int d = 0; d < first; ++d) {
        p.outer_shape[d] = out.shape[d];
        p.outer_a[d] = a.strides[d];
        p.outer_b[d] = b.strides[d];
        p.outer_c[d] = out.strides[d];
    }
    p.outer_ndim = first;

    // One b for the whole batch, and rows of a and out that stack evenly
    // across it: a single [batch * M, K] · [K, N] product.
    // (kernels/matmul_fold.h: the batch dims then fold too, so first == 0.)
    if (const auto t = tall_fold(out, a, b)) {
        const auto fy = blas_matrix(t->rows, k, t->a_row_stride, a.strides[nd - 1]);
        const auto fc = blas_matrix(t->rows, n, t->out_row_stride, out.strides[nd - 1]);
        if (fy && fc && !fc->transpose) {
            p.n = t->rows;
            p.y = *fy;
            p.ldc = fc->ld;
            p.batch = 1;
            p.stride_x = p.stride_y = p.stride_c = 0;
            p.outer_ndim = 0;
        }
    }
    return p;
}

}  // namespace ember::kernels::cuda

// How both backends fold a batched product's dims (kernels/cpu/matmul.cpp,
// kernels/cuda/matmul_plan.h), defined once so that they take the same
// shortcuts: which dims step through memory as one evenly strided run, when
// a right operand is shared by the whole batch, and when the batch then
// stacks into one tall GEMM (x[B, T, C] · w: the linear layer's case). What
// each backend can read in place (matrix_layout, cuda::blas_matrix) stays its
// own. Plain C++ on Views.
#pragma once

#include <cstdint>
#include <optional>

#include "view.h"

namespace ember::kernels {

/// The single stride that steps through dims [first, last) of v as one flat
/// index (innermost fastest), or nullopt when those dims are not evenly
/// strided. Size-1 dims are skipped; no dim of size > 1: stride 0.
inline std::optional<int64_t> folded_stride(const View& v, int first, int last) {
    std::optional<int64_t> stride;
    int64_t next = 0;  // the stride the next outer dim of size > 1 must have
    for (int d = last - 1; d >= first; --d) {
        if (v.shape[d] == 1) continue;
        if (!stride)
            stride = v.strides[d];
        else if (v.strides[d] != next)
            return std::nullopt;
        next = v.strides[d] * v.shape[d];
    }
    return stride ? stride : std::optional<int64_t>(0);
}

/// True when every batch dim (all but the last two) of v with more than one
/// element has stride 0: the same matrix for the whole batch.
inline bool batch_shared(const View& v) {
    for (int d = 0; d < v.ndim - 2; ++d)
        if (v.shape[d] != 1 && v.strides[d] != 0) return false;
    return true;
}

/// Element offset of flat batch index i in v, whose first nb dims are the batch.
inline int64_t batch_offset(const View& v, int nb, int64_t i) {
    int64_t off = 0;
    for (int d = nb - 1; d >= 0; --d) {
        off += (i % v.shape[d]) * v.strides[d];
        i /= v.shape[d];
    }
    return off;
}

/// out[..., M, N] = a[..., M, K] · b[..., K, N] as one [rows, K] · [K, N]
/// product: b shared by a batch of more than one, and the batch dims and
/// rows of a and of out each one evenly strided run of rows.
struct TallFold {
    int64_t rows, a_row_stride, out_row_stride;
};
inline std::optional<TallFold> tall_fold(const View& out, const View& a, const View& b) {
    const int nd = out.ndim;
    int64_t batch = 1;
    for (int d = 0; d < nd - 2; ++d) batch *= out.shape[d];
    if (batch <= 1 || !batch_shared(b)) return std::nullopt;
    const auto ra = folded_stride(a, 0, nd - 1), rc = folded_stride(out, 0, nd - 1);
    if (!ra || !rc) return std::nullopt;
    return TallFold{batch * out.shape[nd - 2], *ra, *rc};
}

}  // namespace ember::kernels

// Offsets of a flat index in up to kMaxDims strided operands, for CUDA
// elementwise kernels: the device-side twin of kernels/cpu/loop.h. Operands
// are passed by value (kernel parameters), dims are coalesced on the host.
#pragma once

#include <cstdint>

#include "kernels/view.h"

namespace ember::kernels::cuda {

template <int N>
struct OffsetCalc {
    int ndim;
    int64_t shape[kMaxDims];
    int64_t strides[N][kMaxDims];  // elements

    /// Offsets (in elements) of flat row-major index i in each operand.
    __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
#pragma unroll
        for (int k = 0; k < N; ++k) off[k] = 0;
        for (int d = ndim - 1; d >= 0; --d) {
            const int64_t q = i / shape[d];
            const int64_t r = i - q * shape[d];
            i = q;
#pragma unroll
            for (int k = 0; k < N; ++k) off[k] += r * strides[k][d];
        }
    }
};

/// Builds the calculator for operands of one shape (drops size-1 dims).
template <int N>
OffsetCalc<N> make_offset_calc(const View* const (&ops)[N]) {
    OffsetCalc<N> c{};
    c.ndim = 0;
    for (int d = 0; d < ops[0]->ndim; ++d) {
        if (ops[0]->shape[d] == 1) continue;
        c.shape[c.ndim] = ops[0]->shape[d];
        for (int k = 0; k < N; ++k) c.strides[k][c.ndim] = ops[k]->strides[d];
        ++c.ndim;
    }
    return c;
}

/// Grid size for a grid-stride loop over n items with `block` threads.
inline unsigned grid_for(int64_t n, int block) {
    const int64_t g = (n + block - 1) / block;
    return unsigned(g < 65535 * 16 ? (g > 0 ? g : 1) : 65535 * 16);
}

}  // namespace ember::kernels::cuda

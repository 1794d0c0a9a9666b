// How the CUDA index kernels (kernels/cuda/index.cu) walk their operands,
// plain C++ so the CPU tests check it (tests/kernels/test_index_plan.cpp):
// dims coalesced for the offset calculator, and scatter_add's lines along dim.
#pragma once

#include <cstdint>

#include "kernels/view.h"

namespace ember::kernels::cuda {

/// The offset (in elements) of row-major position i in v: what the device's
/// OffsetCalc computes, written out for the host.
inline int64_t view_offset(const View& v, int64_t i) {
    int64_t off = 0;
    for (int d = v.ndim - 1; d >= 0; --d) {
        off += (i % v.shape[d]) * v.strides[d];
        i /= v.shape[d];
    }
    return off;
}

/// Rewrites operands of one shape (ops[0]'s) with fewer dims and the same
/// offset for every row-major position: size-1 dims are dropped and a dim
/// is merged into the next inner one where every operand steps across both
/// as across one (stride[d] == stride[d+1]·shape[d+1]). An empty shape stays
/// as it is. Fewer dims: fewer divisions per element in the offset calculator.
template <int N>
void coalesce(View (&ops)[N]) {
    if (ops[0].numel() == 0) return;
    int out = 0;  // dims kept so far, innermost first, in reverse order
    int64_t shape[kMaxDims], strides[N][kMaxDims];
    for (int d = ops[0].ndim - 1; d >= 0; --d) {
        const int64_t size = ops[0].shape[d];
        if (size == 1) continue;
        bool merge = out > 0;
        for (int k = 0; k < N && merge; ++k)
            merge = ops[k].strides[d] == strides[k][out - 1] * shape[out - 1];
        if (merge) {
            shape[out - 1] *= size;
            continue;
        }
        shape[out] = size;
        for (int k = 0; k < N; ++k) strides[k][out] = ops[k].strides[d];
        ++out;
    }
    for (int k = 0; k < N; ++k) {
        ops[k].ndim = out;
        for (int d = 0; d < out; ++d) {
            ops[k].shape[d] = shape[out - 1 - d];
            ops[k].strides[d] = strides[k][out - 1 - d];
        }
    }
}

/// scatter_add's work split: one thread per line along `dim` of index's
/// shape. The views index, self and src are without dim, seen through
/// index's shape and coalesced; line l starts at view_offset(·, l) in each,
/// and its k-th element (k < len) is index[+ k·index_step], added from
/// src[+ k·src_step] into self[+ index value·self_step]. Two lines never
/// share a self element (they differ outside dim), so lines are independent.
struct ScatterLines {
    View index, self, src;
    int64_t lines, len, index_step, self_step, src_step;
};

/// The lines of self[q with q[dim] := index[q]] += src[q], q over index's shape.
inline ScatterLines scatter_lines(const View& self, const View& index, const View& src, int dim) {
    View v[3] = {index, self, src};
    for (View& x : v) {  // drop dim; sizes from index
        int nd = 0;
        for (int d = 0; d < index.ndim; ++d) {
            if (d == dim) continue;
            x.shape[nd] = index.shape[d];
            x.strides[nd++] = x.strides[d];  // nd <= d: reads ahead of the writes
        }
        x.ndim = nd;
    }
    ScatterLines s;
    s.len = index.shape[dim];
    s.index_step = index.strides[dim];
    s.self_step = self.strides[dim];
    s.src_step = src.strides[dim];
    s.lines = v[0].numel();
    coalesce(v);
    s.index = v[0], s.self = v[1], s.src = v[2];
    return s;
}

}  // namespace ember::kernels::cuda

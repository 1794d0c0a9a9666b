// How the CUDA index kernels (kernels/cuda/index.cu, index_sorted.cu) walk
// their operands, plain C++ so the CPU tests check it
// (tests/kernels/test_index_plan.cpp): dims coalesced for the offset
// calculator, scatter_add's lines along dim, when scatter_add sorts a shared
// index instead. The operand without dim and the one scalar add both
// backends fold with are kernels/index_lines.h's.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../index_lines.h"
#include "../math.h"
#include "../view.h"

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
    View v[3] = {drop_dim(index, dim, index), drop_dim(self, dim, index),
                 drop_dim(src, dim, index)};
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

// Note [Sorted scatter_add]
// When every line reads the same index values (index_add, embedding's
// backward: a 1-d index spread over the lines), one thread per line leaves
// the GPU nearly idle: D threads for an embedding [V, D], each walking all L
// tokens. The sorted path (kernels/cuda/index_sorted.cu) instead sorts the L
// (key, position) pairs once by key — stable, so equal keys keep ascending
// positions — and gives each (run of equal keys, line) one thread that folds
// that run's src elements into self's element in position order: for each
// target, the same adds in the same order as the CPU, so the same bits. Bad
// indices get the key `size` (sorted last, skipped). The sort costs a few
// passes over 8·L bytes: worth it only for long lines, and only where the
// one-thread-per-line kernel is short of threads.

/// Lines at or above this have threads enough for the one-per-line kernel.
inline constexpr int64_t kSortedMaxLines = 32768;
/// Shorter lines are not worth a sort.
inline constexpr int64_t kSortedMinLen = 64;

/// True when every line of `s` reads the same index elements: the coalesced
/// index view steps by 0 across lines (or there is one line).
inline bool index_shared(const ScatterLines& s) {
    for (int d = 0; d < s.index.ndim; ++d)
        if (s.index.strides[d] != 0) return false;
    return true;
}

/// Whether scatter_add takes the sorted path for lines `s` into a dim of
/// `size`: the index shared by every line, fewer than kSortedMaxLines lines,
/// at least kSortedMinLen elements per line, and keys (the sentinel `size`
/// included) and positions that fit the sort's 32-bit words.
inline bool use_sorted_scatter(const ScatterLines& s, int64_t size) {
    return index_shared(s) && s.lines > 0 && s.lines < kSortedMaxLines && s.len >= kSortedMinLen &&
           s.len <= std::numeric_limits<int32_t>::max() && size >= 0 &&
           size <= int64_t(std::numeric_limits<uint32_t>::max());
}

/// The sum kernel's launch (index_sorted.cu): blocks of kSortedBlock
/// threads, 2^line_shift of them along lines (the lines rounded up to a power
/// of two, at most the block) and the rest along sorted positions k. Block
/// (x, y), thread t takes line y·2^line_shift + (t mod 2^line_shift) and
/// positions x·per_block + t / 2^line_shift, stepping by grid_x·per_block:
/// no division per position, and a warp reads neighbouring lines of one k.
inline constexpr int kSortedBlock = 256;
inline constexpr int64_t kSortedMaxGridX = int64_t(1) << 20;

struct SortedSumLaunch {
    int line_shift;
    int64_t per_block, grid_x, grid_y;
};

inline SortedSumLaunch sorted_sum_launch(int64_t lines, int64_t len,
                                         int64_t max_grid_x = kSortedMaxGridX) {
    SortedSumLaunch p;
    p.line_shift = 0;
    while ((int64_t(1) << p.line_shift) < lines && (2 << p.line_shift) <= kSortedBlock)
        ++p.line_shift;
    const int64_t along = int64_t(1) << p.line_shift;
    p.per_block = kSortedBlock / along;
    p.grid_y = (lines + along - 1) / along;
    p.grid_x = std::max<int64_t>(1, std::min((len + p.per_block - 1) / p.per_block, max_grid_x));
    return p;
}

/// The sort key of index value i in a dim of `size`: i itself, or `size`
/// for a bad one, so it sorts after every valid key and is skipped.
EMBER_HD inline uint32_t sorted_key(int64_t i, int64_t size) {
    return uint32_t(i >= 0 && i < size ? i : size);
}

/// The radix sort's end bit: enough bits for every key up to `size` (at least one).
inline int sorted_end_bit(int64_t size) {
    const int bits = int(std::bit_width(uint64_t(size)));
    return bits > 0 ? bits : 1;
}

}  // namespace ember::kernels::cuda

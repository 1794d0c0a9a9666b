// How the CUDA reductions (kernels/cuda/reduce.cu) cut a dense [outer, size,
// inner] buffer into work for warps, threads, blocks and chunks, and the order
// their partial results combine in. Plain C++ with EMBER_HD helpers, so the
// kernels and the CPU tests (tests/kernels/test_reduce_plan.cpp) walk the same
// mapping and fold in the same order.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/macros.h"
#include "../reduce_args.h"
#include "../reduce_order.h"

namespace ember::kernels::cuda {

// Note [Reduction order]
// The CUDA reductions combine in exactly the order of the CPU's
// (Note [Pairwise summation] in kernels/cpu/reduce.h), so sums and means are
// bit-identical to the CPU's and every launch is deterministic. That order is
// a complete binary tree over the *leaves* of an output's terms, padded with
// the identity up to a power of two (combining with the identity is exact:
// x + 0 = x, as no partial sum is ever -0):
//  - inner == 1: a leaf is kReduceRowLeaf consecutive elements summed in
//    kReduceLanes lanes (lane l takes elements l, l + 16, ... in order), the
//    lanes combined as a tree (lane l with l + 8, then + 4, + 2, + 1);
//  - inner > 1: a leaf is kReduceColLeaf consecutive rows of one column,
//    summed in order.
// The CPU's tree splits n leaves after the largest power of two below n: the
// same tree. So any cut of the leaves into aligned power-of-two groups (a
// warp's or thread's sequence, the y threads of a block, the chunks of a split
// row and the combine threads over them) computes subtrees of it. A thread
// folds a sequence of equal subtrees with a binary counter (TreeStack).

// kReduceRowLeaf, kReduceLanes and kReduceColLeaf: kernels/reduce_order.h,
// the CPU's own.
inline constexpr int kReduceBlock = 256;        // threads of a rows or columns block
inline constexpr int kReduceCombineBlock = 256; // threads folding one output's chunks
inline constexpr int64_t kReduceMinRowChunk = 16;  // leaves (4096 elements) a warp takes at least
inline constexpr int64_t kReduceMinColPart = 4;    // leaves (32 rows) a thread takes at least
inline constexpr int64_t kReduceMaxGrid = int64_t(1) << 20;  // blocks; kernels stride beyond
inline constexpr int64_t kReduceMaxGridY = 65535;
// TreeStack levels: up to 2^40 subtrees, past any tensor a device holds
// (reduce() checks that an output has fewer than 2^40 leaves).
inline constexpr int kReduceStackLevels = 40;

EMBER_HD inline int64_t reduce_ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }
/// The smallest power of two >= n (1 for n <= 1).
EMBER_HD inline int64_t reduce_pow2_ceil(int64_t n) {
    int64_t p = 1;
    while (p < n) p *= 2;
    return p;
}

struct ReducePlan {
    bool rows = true;       ///< inner == 1: a warp per (row, chunk); else a thread per (column, part)
    bool two_rows = false;  ///< rows of one leaf: a half-warp per row, two rows a warp
    int64_t items = 0;      ///< outputs: outer * inner
    int64_t size = 0;       ///< terms per output
    int64_t inner = 1;
    int64_t leaves = 1;        ///< leaves per output (at least 1; an empty one folds nothing)
    int64_t chunk_leaves = 1;  ///< leaves per chunk: a power of two (rows: >= 2)
    int64_t chunks = 1;        ///< chunks per output; > 1: partials, then a combine launch
    int64_t part_leaves = 1;   ///< columns: leaves per thread, a power of two
    int block_x = kReduceBlock, block_y = 1;  ///< block_x * block_y == kReduceBlock
    int64_t grid_x = 1, grid_y = 1;
    int64_t work = 0;  ///< rows: warp work items (outputs * chunks, or pairs of rows)
};

/// The plan for reducing the middle dim of s (outer, inner >= 1; size >= 0)
/// on a device of `sm_count` multiprocessors. Rows or columns too few to
/// fill the device are cut into chunks along size.
inline ReducePlan plan_reduce(ReduceShape s, int sm_count) {
    ReducePlan p;
    p.items = s.outer * s.inner;
    p.size = s.size;
    p.inner = s.inner;
    p.rows = s.inner == 1;
    const int64_t warps = int64_t(std::max(sm_count, 1)) * 64;  // resident at 2048 threads per SM
    if (p.rows) {
        p.leaves = std::max<int64_t>(1, reduce_ceil_div(s.size, kReduceRowLeaf));
        p.chunk_leaves = std::max<int64_t>(2, reduce_pow2_ceil(p.leaves));
        if (p.leaves == 1) {
            p.two_rows = true;
            p.work = reduce_ceil_div(p.items, 2);
        } else {
            if (p.items < warps) {
                const int64_t want = reduce_ceil_div(warps, p.items);  // chunks per row
                const int64_t c = reduce_pow2_ceil(reduce_ceil_div(p.leaves, want));
                p.chunk_leaves = std::min(p.chunk_leaves, std::max(kReduceMinRowChunk, c));
            }
            p.chunks = reduce_ceil_div(p.leaves, p.chunk_leaves);
            p.work = p.items * p.chunks;
        }
        p.grid_x = std::min(reduce_ceil_div(p.work, kReduceBlock / 32), kReduceMaxGrid);
        return p;
    }
    p.leaves = std::max<int64_t>(1, reduce_ceil_div(s.size, kReduceColLeaf));
    p.part_leaves = reduce_pow2_ceil(p.leaves);
    const int64_t parts_wanted = reduce_ceil_div(warps * 32, p.items);
    if (parts_wanted > 1)
        p.part_leaves = std::min(
            p.part_leaves,
            std::max(kReduceMinColPart, reduce_pow2_ceil(reduce_ceil_div(p.leaves, parts_wanted))));
    for (;;) {
        const int64_t parts = reduce_ceil_div(p.leaves, p.part_leaves);
        p.block_y = int(std::min<int64_t>(8, reduce_pow2_ceil(parts)));
        p.chunk_leaves = p.part_leaves * p.block_y;
        p.chunks = reduce_ceil_div(p.leaves, p.chunk_leaves);
        if (p.chunks <= kReduceMaxGridY) break;
        p.part_leaves *= 2;
    }
    p.block_x = kReduceBlock / p.block_y;
    p.grid_x = std::min(reduce_ceil_div(p.items, p.block_x), kReduceMaxGrid);
    p.grid_y = p.chunks;
    return p;
}

/// A half-open range [begin, end) of leaves, elements or rows.
struct ReduceRange {
    int64_t begin = 0, end = 0;
};

/// Rows (not two_rows): the row and the leaves of warp work item w.
struct RowItem {
    int64_t row;
    ReduceRange leaves;
};
EMBER_HD inline RowItem row_item(const ReducePlan& p, int64_t w) {
    const int64_t row = w / p.chunks, c = w - row * p.chunks;
    const int64_t b = c * p.chunk_leaves;
    return {row, {b, b + p.chunk_leaves < p.leaves ? b + p.chunk_leaves : p.leaves}};
}

/// Rows: the elements of leaf `leaf` of a row; lane l of its half-warp takes
/// begin + l, begin + l + 16, ... below end.
EMBER_HD inline ReduceRange row_leaf(const ReducePlan& p, int64_t leaf) {
    const int64_t b = leaf * kReduceRowLeaf;
    return {b, b + kReduceRowLeaf < p.size ? b + kReduceRowLeaf : p.size};
}

/// Columns: the leaves thread row y of a block in chunk `chunk` folds (empty
/// past the end).
EMBER_HD inline ReduceRange col_part(const ReducePlan& p, int64_t chunk, int y) {
    const int64_t b = (chunk * p.block_y + y) * p.part_leaves;
    const int64_t e = b + p.part_leaves < p.leaves ? b + p.part_leaves : p.leaves;
    return {b < e ? b : e, e};
}

/// Columns: the rows of leaf `leaf`.
EMBER_HD inline ReduceRange col_leaf(const ReducePlan& p, int64_t leaf) {
    const int64_t b = leaf * kReduceColLeaf;
    return {b, b + kReduceColLeaf < p.size ? b + kReduceColLeaf : p.size};
}

/// The combine launch: the chunk partials thread t of an output's block
/// folds (kReduceCombineBlock threads, aligned power-of-two groups).
EMBER_HD inline ReduceRange combine_range(const ReducePlan& p, int t) {
    const int64_t g = reduce_pow2_ceil(reduce_ceil_div(p.chunks, kReduceCombineBlock));
    const int64_t b = t * g < p.chunks ? t * g : p.chunks;
    return {b, b + g < p.chunks ? b + g : p.chunks};
}

/// Folds a sequence of equal-sized subtrees (Note [Reduction order]) as a
/// binary counter: level l holds a subtree of 2^l of them. result() is the
/// complete tree over the sequence padded with op.init().
template <class A>
struct TreeStack {
    A level[kReduceStackLevels];
    int64_t count = 0;

    template <class Op>
    EMBER_HD void push(A v, const Op& op) {
        int l = 0;
        for (int64_t c = count; c & 1; c >>= 1, ++l) v = op.combine(level[l], v);
        level[l] = v;
        ++count;
    }
    template <class Op>
    EMBER_HD A result(const Op& op) const {
        A r = op.init();
        int l = 0;
        for (int64_t c = count; c != 0; c >>= 1, ++l)
            if (c & 1) r = op.combine(level[l], r);
        return r;
    }
};

}  // namespace ember::kernels::cuda

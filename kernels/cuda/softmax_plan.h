// How the rows of a contiguous [outer, size, inner] buffer map onto CUDA
// blocks and threads, for softmax, log_softmax, their backwards and the fused
// cross-entropy (N rows of C classes: [N, C, 1]). Plain C++ with EMBER_HD
// index helpers, so the kernels and the CPU tests
// (tests/kernels/test_softmax_plan.cpp) walk the same mapping.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/macros.h"
#include "../reduce_args.h"

namespace ember::kernels::cuda {

/// Which threads work on one row (or column).
enum class RowMapping {
    warp_per_row,   ///< inner == 1, size <= kWarpRowMax: a warp per row, values in registers
    block_per_row,  ///< inner == 1, longer rows: a block per row, block-wide reductions
    columns,        ///< inner > 1: a thread per (outer, inner) column, looping over size
};

/// Rows up to this long are held in the registers of one warp (32 lanes x kMaxPerLane).
inline constexpr int kMaxPerLane = 32;
inline constexpr int64_t kWarpRowMax = 32 * kMaxPerLane;
/// Threads of a warp-per-row or columns block.
inline constexpr int kRowBlock = 256;
/// Default cap on the grid: the kernels stride over their items, so a huge
/// outer dim needs no more blocks than this (well inside grid.x's 2^31 - 1).
inline constexpr int64_t kMaxRowBlocks = int64_t(1) << 20;

struct SoftmaxPlan {
    RowMapping mapping = RowMapping::warp_per_row;
    ReduceShape shape;
    int block = kRowBlock;  ///< threads per block: a multiple of 32, at most 1024
    int64_t grid = 0;       ///< blocks (0 when there are no items: launch nothing)
    int per_lane = 1;       ///< warp_per_row: values per lane, 32 * per_lane >= size
    int64_t items = 0;      ///< rows (outer) for the row mappings; outer * tiles for columns
    int64_t tiles = 1;      ///< columns: blocks of `block` columns per outer slice
};

/// Values per lane for a warp-per-row launch: 4, 16 or 32 (the instantiated
/// kernels), the smallest that holds `size`.
inline int per_lane_for(int64_t size) { return size <= 128 ? 4 : size <= 512 ? 16 : kMaxPerLane; }

/// Threads per block for a block-per-row launch: 4..16 elements per thread,
/// at least 256 and at most 1024 threads.
inline int row_block_for(int64_t size) {
    return size <= 16 * 256 ? 256 : size <= 16 * 512 ? 512 : 1024;
}

/// The launch for softmax over the middle dim of s (every dim >= 1).
inline SoftmaxPlan softmax_plan(ReduceShape s, int64_t max_blocks = kMaxRowBlocks) {
    SoftmaxPlan p;
    p.shape = s;
    if (s.outer <= 0 || s.size <= 0 || s.inner <= 0) return p;  // nothing to launch
    int64_t per_block = 1;                                      // items a block takes per step
    if (s.inner > 1) {
        p.mapping = RowMapping::columns;
        // Small inner: fewer idle threads (a multiple of 32, at least one warp).
        p.block = int(std::min<int64_t>(kRowBlock, (s.inner + 31) / 32 * 32));
        p.tiles = (s.inner + p.block - 1) / p.block;
        p.items = s.outer * p.tiles;
    } else if (s.size <= kWarpRowMax) {
        p.mapping = RowMapping::warp_per_row;
        p.block = kRowBlock;
        p.per_lane = per_lane_for(s.size);
        p.items = s.outer;
        per_block = kRowBlock / 32;
    } else {
        p.mapping = RowMapping::block_per_row;
        p.block = row_block_for(s.size);
        p.items = s.outer;
    }
    p.grid = std::min((p.items + per_block - 1) / per_block, std::max<int64_t>(max_blocks, 1));
    return p;
}

/// Items one grid step covers: the stride of the kernels' loop over items.
EMBER_HD inline int64_t item_stride(const SoftmaxPlan& p) {
    return p.mapping == RowMapping::warp_per_row ? p.grid * (p.block / 32) : p.grid;
}

/// The first item of thread `thread` of block `block_idx` (a warp's lanes
/// share it; so do a block's threads in the other mappings).
EMBER_HD inline int64_t item_begin(const SoftmaxPlan& p, int64_t block_idx, int thread) {
    return p.mapping == RowMapping::warp_per_row ? block_idx * (p.block / 32) + thread / 32
                                                 : block_idx;
}

/// columns: offset of element (o, 0, j) of the column that `thread` takes in
/// `item`, or -1 when the tile's last threads have no column.
EMBER_HD inline int64_t column_base(const SoftmaxPlan& p, int64_t item, int thread) {
    const int64_t o = item / p.tiles, j = (item - o * p.tiles) * p.block + thread;
    return j < p.shape.inner ? o * p.shape.size * p.shape.inner + j : -1;
}

}  // namespace ember::kernels::cuda

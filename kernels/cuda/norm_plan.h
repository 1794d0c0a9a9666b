// Launch plans of the CUDA normalization kernels (kernels/cuda/batch_norm.cu,
// layer_norm.cu): which block reduces which values of a channel, how the
// elementwise passes find an element's channel, which rows a warp or block
// owns, and how the layer-norm column sums split the rows. Plain C++ (no CUDA headers), so the
// CPU tests check every plan: tests/kernels/test_norm_plan.cpp.
// Every plan depends on the shape alone (never on the device), so a result's
// bits depend on the shape alone too.
#pragma once

#include <cstdint>

#include "../../core/macros.h"

namespace ember::kernels::cuda {

inline constexpr int kNormThreads = 256;               // threads of a reduction block
inline constexpr int64_t kNormTargetBlocks = 1024;     // a few waves on an H100/H200
inline constexpr int64_t kNormMinPerThread = 4;        // values per thread before splitting
inline constexpr int64_t kNormMaxGrid = 2147483647;    // grid.x limit
inline constexpr int64_t kNormMaxRowGrid = 1 << 20;    // row kernels grid-stride past this
inline constexpr int64_t kWarpRowMax = 1024;           // longer rows get a block each
inline constexpr int kColTile = 32;                    // columns per column-sum block
inline constexpr int kColRows = 8;                     // row lanes per column-sum block
inline constexpr int64_t kMinRowsPerPart = 32;         // rows per column-sum partial, at least
inline constexpr int64_t kMaxPartialValues = 1 << 24;  // column partials kept, at most (or M)

EMBER_HD inline int64_t norm_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
EMBER_HD inline int64_t norm_min(int64_t a, int64_t b) { return a < b ? a : b; }
EMBER_HD inline int64_t norm_max(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- Batch norm: per-channel reductions over a contiguous [N, C, S] ----

/// Channel c's values are numbered j = n·S + s, j in [0, N·S). Logical block
/// b (of C·splits) reduces channel b / splits over the chunk
/// [chunk·k, min(N·S, chunk·(k + 1))), k = b % splits; thread t of it takes
/// j = begin + t, begin + t + threads, ... With splits > 1 each block writes
/// a partial and a second pass combines a channel's partials in order of k.
struct ChannelPlan {
    int64_t N = 0, C = 0, S = 0;
    int64_t splits = 1;   ///< blocks per channel
    int64_t chunk = 0;    ///< values per block (the last chunk of a channel may be shorter)
    int64_t blocks = 0;   ///< logical blocks, C·splits
    int64_t grid = 0;     ///< launched blocks (they grid-stride over the logical ones)
    int threads = kNormThreads;
    int64_t step_n = 0, step_s = 0;  ///< a `threads` step in j as (n, s): threads / S, threads % S
};

/// Splits a channel across blocks only when C alone cannot fill the device,
/// and never below threads·kNormMinPerThread values per block.
inline ChannelPlan plan_channels(int64_t N, int64_t C, int64_t S, int threads = kNormThreads) {
    ChannelPlan p;
    p.N = N, p.C = C, p.S = S, p.threads = threads;
    const int64_t n = N * S;  // N·C·S elements exist, so this fits
    if (n > 0 && C > 0) {
        const int64_t want = norm_ceil_div(kNormTargetBlocks, C);
        const int64_t most = norm_max(1, n / (int64_t(threads) * kNormMinPerThread));
        p.splits = norm_max(1, norm_min(want, most));
        p.chunk = norm_ceil_div(n, p.splits);
        p.splits = norm_ceil_div(n, p.chunk);  // no empty chunk
    }
    p.blocks = C * p.splits;
    p.grid = norm_max(1, norm_min(p.blocks, kNormMaxGrid));
    if (S > 0) p.step_n = threads / S, p.step_s = threads % S;
    return p;
}

EMBER_HD inline int64_t chunk_begin(const ChannelPlan& p, int64_t k) { return k * p.chunk; }
EMBER_HD inline int64_t chunk_end(const ChannelPlan& p, int64_t k) {
    return norm_min(p.N * p.S, (k + 1) * p.chunk);
}

/// Value j of a channel as (n, s), stepped `threads` values at a time
/// without a division (step_s < S, so one carry suffices).
struct PlaneCursor {
    int64_t n = 0, s = 0;
    EMBER_HD static PlaneCursor at(const ChannelPlan& p, int64_t j) {
        return {j / p.S, j % p.S};
    }
    EMBER_HD void advance(const ChannelPlan& p) {
        n += p.step_n;
        s += p.step_s;
        if (s >= p.S) s -= p.S, ++n;
    }
    /// The flat index in [N, C, S] of this value of channel c.
    EMBER_HD int64_t offset(const ChannelPlan& p, int64_t c) const { return (n * p.C + c) * p.S + s; }
};

/// The channel and in-plane position of flat element i of [N, C, S], then
/// stepped one element at a time without a division (the elementwise passes
/// divide once per vector of elements).
struct ChannelWalk {
    int64_t c = 0, s = 0;
    EMBER_HD static ChannelWalk at(int64_t i, int64_t C, int64_t S) {
        const int64_t plane = i / S;
        return {plane % C, i - plane * S};
    }
    EMBER_HD void next(int64_t C, int64_t S) {
        if (++s == S) {
            s = 0;
            if (++c == C) c = 0;
        }
    }
};

// ---- Layer norm: rows of a contiguous [R, M] ----

/// A warp per row (rows_per_block of them in a block) for rows up to
/// kWarpRowMax values, else a block per row. Group g of block b takes rows
/// b·rows_per_block + g, then steps by grid·rows_per_block.
struct RowPlan {
    bool warp_per_row = true;
    int threads = 256;
    int64_t rows_per_block = 8;
    int64_t grid = 1;
};

inline RowPlan plan_rows(int64_t R, int64_t M) {
    RowPlan p;
    p.warp_per_row = M <= kWarpRowMax;
    p.threads = p.warp_per_row ? 256 : M <= 2048 ? 128 : M <= 8192 ? 256 : 512;
    p.rows_per_block = p.warp_per_row ? p.threads / 32 : 1;
    p.grid = norm_max(1, norm_min(norm_ceil_div(R, p.rows_per_block), kNormMaxRowGrid));
    return p;
}

EMBER_HD inline int64_t first_row(const RowPlan& p, int64_t block, int64_t group) {
    return block * p.rows_per_block + group;
}
EMBER_HD inline int64_t row_stride(const RowPlan& p) { return p.grid * p.rows_per_block; }

/// Layer norm's weight and bias gradients, sums down the R rows of each
/// column: block (x, y) of kColTile × kColRows threads sums the columns of
/// tile x over the rows [y·rows_per_part, min(R, (y + 1)·rows_per_part)) —
/// thread (tx, ty) every kColRows-th row from ty, then the row lanes in order
/// of ty — into partial y; a second pass adds the partials in order of y.
struct ColumnPlan {
    int64_t R = 0, M = 0;
    int64_t col_tiles = 0, parts = 1, rows_per_part = 0;
    int64_t grid_x = 1, grid_y = 1;  ///< grid.x grid-strides over the tiles
};

inline ColumnPlan plan_columns(int64_t R, int64_t M) {
    ColumnPlan p;
    p.R = R, p.M = M;
    p.col_tiles = norm_ceil_div(M, kColTile);
    if (R > 0 && M > 0) {
        int64_t parts = norm_ceil_div(kNormTargetBlocks, p.col_tiles);
        parts = norm_min(parts, norm_ceil_div(R, kMinRowsPerPart));
        parts = norm_min(parts, norm_max(1, kMaxPartialValues / M));
        parts = norm_max(1, norm_min(parts, 65535));
        p.rows_per_part = norm_ceil_div(R, parts);
        p.parts = norm_ceil_div(R, p.rows_per_part);  // no empty part
    }
    p.grid_x = norm_max(1, norm_min(p.col_tiles, kNormMaxGrid));
    p.grid_y = p.parts;
    return p;
}

}  // namespace ember::kernels::cuda

// How fused attention maps onto CUDA blocks: which kernel runs (tensor-core
// tiles, a warp per row, or the decode split), the tiles, the grid, the
// shared memory, which (query tile, key tile) pairs a block visits under the
// causal mask, and how a decode splits the cache. Plain C++ with EMBER_HD
// helpers, so the kernels (kernels/cuda/attention*.cu) and the CPU tests
// (tests/kernels/test_attention_plan.cpp) walk the same mapping.
//
// Note [Attention tiles]
// The tensor-core kernels (f16/bf16, D = Dv in {32, 64, 128}) work on tiles
// of kTileRows query rows × kTileKeys keys with kWarps warps, a warp owning
// 16 rows (one m16n8k16 row block). The forward and the dQ kernel take a
// query tile per block and walk its key tiles in order; the dK/dV kernel
// takes a key tile per block and walks steps of kStepRows query rows. Under
// the causal mask (row i sees keys j <= i, top-left aligned as PyTorch's
// is_causal) a pair of tiles with no visible (row, key) is never visited —
// skipped, not masked — and only the tiles crossing the diagonal or a tail
// apply the mask per element. Blocks are ordered heaviest first (the causal
// tiles with the most key tiles), so the last wave is short.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../../core/dtype.h"
#include "../../core/macros.h"

namespace ember::kernels::cuda {

/// Which kernel computes a call.
enum class AttentionPath {
    tensor_core,  ///< f16/bf16, D = Dv in {32, 64, 128}: m16n8k16 tiles, f32 accumulation
    warp_rows,    ///< any floating dtype, D, Dv <= kMaxRowDim: a warp per query row (or key)
    decode,       ///< forward with Tq <= kDecodeRows: a split of the keys per block, combined
    composite,    ///< none fits (D > kMaxRowDim): kernels/attention_composite.cpp
};

inline constexpr int kTileRows = 64;   ///< query rows of a forward / dQ tile
inline constexpr int kTileKeys = 64;   ///< keys of a tile
inline constexpr int kStepRows = 32;   ///< query rows per step of the dK/dV kernel
inline constexpr int kWarps = 4;       ///< warps of a tensor-core block (16 rows or keys each)
inline constexpr int kSmemPad = 8;     ///< elements of padding per shared-memory row
inline constexpr int kRowWarps = 4;    ///< warps (rows) of a warp_rows block
inline constexpr int kMaxRowDim = 256; ///< D and Dv a warp_rows or decode warp holds (8 per lane)
inline constexpr int kDecodeRows = 4;  ///< query rows at most for the decode kernel
inline constexpr int64_t kDecodeMinKeys = 128;  ///< keys per split at least
inline constexpr int kDecodeWarps = 4;

/// The sizes of one call: bh = B·H heads, H to split it, rows and keys.
struct AttentionShape {
    int64_t bh = 0, heads = 1, tq = 0, tk = 0, d = 0, dv = 0;
    bool causal = false;
};

EMBER_HD inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// Keys row i sees: min(Tk, i + 1) under the causal mask, else Tk.
EMBER_HD inline int64_t visible_keys(const AttentionShape& s, int64_t row) {
    return s.causal ? std::min(s.tk, row + 1) : s.tk;
}

/// The launch of a forward or backward.
struct AttentionPlan {
    AttentionPath path = AttentionPath::composite;
    AttentionShape shape;
    int threads = 0;  ///< per block
    // tensor_core forward and dQ; warp_rows: rows of kRowWarps.
    int64_t row_tiles = 0;  ///< query tiles per head
    int64_t grid = 0;       ///< blocks of the forward (or the dQ kernel); 0: nothing to launch
    size_t smem = 0;        ///< dynamic shared memory per block, bytes
    // backward's dK/dV kernel: key tiles (tensor_core) or key groups (warp_rows).
    int64_t key_tiles = 0;
    int64_t grid_kv = 0;
    size_t smem_kv = 0;
    // decode: the keys in `splits` ranges of split_len (the last shorter).
    int64_t splits = 1, split_len = 0;
};

/// True when the tensor-core kernels take this dtype and head dims.
inline bool tensor_core_fits(DType dt, int64_t d, int64_t dv) {
    return (dt == DType::f16 || dt == DType::bf16) && d == dv && (d == 32 || d == 64 || d == 128);
}

/// Shared memory of a tensor-core block: `rows` of width d + kSmemPad, 2 bytes
/// each, plus `floats` f32 values.
inline size_t tile_smem(int64_t rows, int64_t d, int64_t floats) {
    return size_t(rows * (d + kSmemPad) * 2 + floats * 4);
}

/// The forward of `s` in dtype dt on a device of `sm_count` multiprocessors.
inline AttentionPlan attention_forward_plan(const AttentionShape& s, DType dt, int sm_count) {
    AttentionPlan p;
    p.shape = s;
    if (s.bh <= 0 || s.tq <= 0 || s.tk <= 0) return p;
    if (s.d > kMaxRowDim || s.dv > kMaxRowDim) return p;  // composite
    if (s.tq <= kDecodeRows) {
        p.path = AttentionPath::decode;
        p.threads = 32 * kDecodeWarps;
        // Enough blocks for two per multiprocessor, each at least kDecodeMinKeys keys.
        const int64_t want = ceil_div(2 * int64_t(std::max(sm_count, 1)), s.bh);
        const int64_t most = std::max<int64_t>(1, s.tk / kDecodeMinKeys);
        p.splits = std::max<int64_t>(1, std::min(want, most));
        p.split_len = ceil_div(ceil_div(s.tk, p.splits), 32) * 32;  // whole warps of keys
        p.splits = ceil_div(s.tk, p.split_len);                     // none empty
        p.grid = s.bh * p.splits;
        return p;
    }
    if (tensor_core_fits(dt, s.d, s.dv)) {
        p.path = AttentionPath::tensor_core;
        p.threads = 32 * kWarps;
        p.row_tiles = ceil_div(s.tq, kTileRows);
        p.grid = s.bh * p.row_tiles;
        p.smem = tile_smem(2 * kTileKeys, s.d, 0);  // a K and a V tile
        return p;
    }
    p.path = AttentionPath::warp_rows;
    p.threads = 32 * kRowWarps;
    p.row_tiles = ceil_div(s.tq, kRowWarps);
    p.grid = s.bh * p.row_tiles;
    return p;
}

/// The backward of `s`: the dQ kernel (grid, smem) and the dK/dV kernel
/// (grid_kv, smem_kv). No decode path: any Tq takes the tiles.
inline AttentionPlan attention_backward_plan(const AttentionShape& s, DType dt) {
    AttentionPlan p;
    p.shape = s;
    if (s.bh <= 0 || s.tq <= 0 || s.tk <= 0) return p;
    if (s.d > kMaxRowDim || s.dv > kMaxRowDim) return p;
    if (tensor_core_fits(dt, s.d, s.dv)) {
        p.path = AttentionPath::tensor_core;
        p.threads = 32 * kWarps;
        p.row_tiles = ceil_div(s.tq, kTileRows);
        p.grid = s.bh * p.row_tiles;
        // Q and dO tiles, K and V tiles, the rows' lse and D.
        p.smem = tile_smem(2 * kTileRows + 2 * kTileKeys, s.d, 0);
        p.key_tiles = ceil_div(s.tk, kTileKeys);
        p.grid_kv = s.bh * p.key_tiles;
        p.smem_kv = tile_smem(2 * kTileKeys + 2 * kStepRows, s.d, 2 * kStepRows);
        return p;
    }
    p.path = AttentionPath::warp_rows;
    p.threads = 32 * kRowWarps;
    p.row_tiles = ceil_div(s.tq, kRowWarps);
    p.grid = s.bh * p.row_tiles;
    p.key_tiles = ceil_div(s.tk, kRowWarps);
    p.grid_kv = s.bh * p.key_tiles;
    return p;
}

/// Block `block` of a grid over `tiles` tiles of each of bh heads: its head
/// and tile. Heaviest first: under the causal mask the last query tiles
/// (forward, dQ; `reverse`) or the first key tiles (dK/dV) see the most.
struct BlockTile {
    int64_t bh, tile;
};
EMBER_HD inline BlockTile block_tile(int64_t block, int64_t bh, int64_t tiles, bool reverse) {
    const int64_t rank = block / bh;
    return {block % bh, reverse ? tiles - 1 - rank : rank};
}

/// Key tiles query tile `rt` visits, from 0 (rows of height `rows`, tiles of
/// kTileKeys): those holding a key some row of the tile sees.
EMBER_HD inline int64_t key_tiles_of(const AttentionShape& s, int64_t rt, int64_t rows) {
    const int64_t last = std::min(s.tq, (rt + 1) * rows) - 1;
    return ceil_div(visible_keys(s, last), kTileKeys);
}

/// The first query step (of kStepRows rows) key tile `kt` is seen by; the
/// steps from it to the end visit it. Under the causal mask row i sees key
/// j iff j <= i: the first row is the tile's first key; when no row sees it,
/// the number of steps (none visited).
EMBER_HD inline int64_t first_step_of(const AttentionShape& s, int64_t kt) {
    if (!s.causal) return 0;
    const int64_t first_row = kt * kTileKeys;
    return first_row >= s.tq ? ceil_div(s.tq, kStepRows) : first_row / kStepRows;
}

/// Whether the pair (rows [r0, r0 + nr), keys [k0, k0 + kTileKeys)) needs a
/// per-element mask: a key past Tk, a row past Tq, or a key above the
/// diagonal for some row.
EMBER_HD inline bool tile_masked(const AttentionShape& s, int64_t r0, int64_t nr, int64_t k0) {
    if (k0 + kTileKeys > s.tk || r0 + nr > s.tq) return true;
    return s.causal && k0 + kTileKeys - 1 > r0;
}

/// Keys [begin, end) of split `split` of a decode.
struct KeyRange {
    int64_t begin, end;
};
EMBER_HD inline KeyRange decode_keys(const AttentionPlan& p, int64_t split) {
    return {split * p.split_len, std::min(p.shape.tk, (split + 1) * p.split_len)};
}

// ---- m16n8k16 fragments ------------------------------------------------------------
// Which element of a tile each lane holds in the operands of
// mma.sync.m16n8k16 (f16/bf16 in, f32 accumulate), from the PTX ISA's
// fragment layouts. g = lane / 4 (the group), t = lane % 4.

/// Row and column of element `i` (0..3) of the f32 accumulator C, 16 × 8.
EMBER_HD inline void c_coords(int lane, int i, int& row, int& col) {
    row = lane / 4 + (i >= 2 ? 8 : 0);
    col = (lane % 4) * 2 + (i & 1);
}
/// Row and column of element `i` (0..7) of the A operand, 16 × 16 (row-major).
EMBER_HD inline void a_coords(int lane, int i, int& row, int& col) {
    row = lane / 4 + ((i / 2) % 2 == 1 ? 8 : 0);
    col = (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0);
}
/// k (row) and n (column) of element `i` (0..3) of the B operand, 16 × 8.
EMBER_HD inline void b_coords(int lane, int i, int& k, int& n) {
    k = (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0);
    n = lane / 4;
}

}  // namespace ember::kernels::cuda

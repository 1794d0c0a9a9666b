// How ember's GEMMs (kernels/cpu/gemm.cpp, gemm_bf16.cpp) split their work
// among threads. Internal to kernels/cpu/.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace ember::kernels::cpu {

/// Work items: a block of rows times a group of column panels. The rows'
/// tiles are shared out evenly over the blocks (sizes differ by one tile at
/// most), the blocks are a multiple of the threads, so that every thread has
/// the same work. Which thread computes a tile changes nothing in its sums.
struct GemmBlocks {
    bool threaded;
    int64_t m, mr;      // rows, rows per register tile
    int64_t tiles;      // row tiles: ⌈m / mr⌉
    int64_t blocks;     // row blocks
    int64_t max_rows;   // the most rows a block has
    int64_t groups;     // column-panel groups
    int64_t per_group;  // panels per group

    struct Rows {
        int64_t first, count;
    };
    /// Block b's rows.
    Rows rows(int64_t b) const {
        const int64_t first = b * tiles / blocks * mr;
        return {first, std::min(m, (b + 1) * tiles / blocks * mr) - first};
    }
};

/// The split of an m-row product over `panels` column panels, blocks of at
/// most `mc` rows (a multiple of `mr`); threaded when not inside a parallel
/// region, with more than one thread, above 2 MFLOP.
inline GemmBlocks gemm_blocks(int64_t m, int64_t panels, double flops, int64_t mr, int64_t mc) {
    const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1 && flops > 2e6;
    const int64_t threads = threaded ? omp_get_max_threads() : 1;
    const int64_t tiles = (m + mr - 1) / mr, per_block = mc / mr;
    const int64_t blocks =
        std::min(tiles, threads * ((tiles + threads * per_block - 1) / (threads * per_block)));
    const int64_t groups =
        std::min(panels, std::max<int64_t>(1, (4 * threads + blocks - 1) / blocks));
    return {.threaded = threaded,
            .m = m,
            .mr = mr,
            .tiles = tiles,
            .blocks = blocks,
            .max_rows = (tiles + blocks - 1) / blocks * mr,
            .groups = groups,
            .per_group = (panels + groups - 1) / groups};
}

}  // namespace ember::kernels::cpu

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

/// One work item of gemm_schedule: k-block [k0, k0 + kc), its rows, and its
/// panels [p0, p1).
struct GemmItem {
    int64_t k0, kc;
    GemmBlocks::Rows rows;
    int64_t group, p0, p1;
};

/// The GEMMs' schedule: k-block by k-block (`k_block` deep) in turn, b's
/// `panels` packed first — pack_b(k0, kc, p), split over the threads — then
/// every work item, handed out as the threads come free: item(scratch, it),
/// with `scratch` the calling thread's own buffers, made once by
/// make_scratch(). Which thread runs an item changes no sum.
template <class MakeScratch, class PackB, class Item>
void gemm_schedule(const GemmBlocks& wb, int64_t k, int64_t k_block, int64_t panels,
                   MakeScratch make_scratch, PackB pack_b, Item item) {
#pragma omp parallel if (wb.threaded)
    {
        auto scratch = make_scratch();
        for (int64_t k0 = 0; k0 < k; k0 += k_block) {
            const int64_t kc = std::min(k_block, k - k0);
#pragma omp for schedule(static)
            for (int64_t p = 0; p < panels; ++p) pack_b(k0, kc, p);
#pragma omp for schedule(dynamic)
            for (int64_t i = 0; i < wb.blocks * wb.groups; ++i) {
                const int64_t g = i % wb.groups;
                item(scratch, GemmItem{k0, kc, wb.rows(i / wb.groups), g, g * wb.per_group,
                                       std::min(panels, (g + 1) * wb.per_group)});
            }
        }
    }
}

}  // namespace ember::kernels::cpu

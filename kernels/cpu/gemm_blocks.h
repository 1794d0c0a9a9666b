// How ember's GEMMs (kernels/cpu/gemm.cpp, gemm_bf16.cpp) split their work
// among threads. Internal to kernels/cpu/.
//
// Each thread owns a part of c — a range of the rows times a range of the
// 64-column panels — and packs the panels of b it reads itself, into its own
// buffer: nothing one thread writes is read by another, and no thread waits
// for another until the product is done. (A split in which the threads pack
// b's panels together and then share them runs up to 20 % slower on a VM
// whose two cores sit on different caches: every panel crosses between them.)
// Which thread computes a tile changes nothing in its sums.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace ember::kernels::cpu {

/// A range [first, first + count).
struct GemmRange {
    int64_t first, count;
};

/// The split of an m-row product over `panels` column panels: row_parts ×
/// col_parts parts, one per thread; within a part, blocks of at most `mc`
/// rows (whole register tiles of `mr` rows) and groups of at most `group`
/// panels (the packed panels a group's blocks reuse stay in L2).
struct GemmSplit {
    bool threaded;
    int64_t m, mr;       // rows, rows per register tile
    int64_t tiles;       // row tiles: ⌈m / mr⌉
    int64_t panels;      // column panels
    int64_t row_parts, col_parts;
    int64_t mc;          // rows per block, at most
    int64_t group;       // panels per group, at most
    int64_t max_rows;    // the most rows a block can have

    /// Row part r's rows: the tiles shared out evenly (counts differ by one
    /// tile at most).
    GemmRange rows(int64_t r) const {
        const int64_t first = r * tiles / row_parts * mr;
        return {first, std::min(m, (r + 1) * tiles / row_parts * mr) - first};
    }
    /// Column part c's panels, shared out evenly.
    GemmRange cols(int64_t c) const {
        const int64_t first = c * panels / col_parts;
        return {first, (c + 1) * panels / col_parts - first};
    }
};

/// The split of an m-row product (`flops` in all) over `panels` panels of b:
/// threaded when not inside a parallel region, with more than one thread,
/// above 2 MFLOP. Of the ways to cut it into row parts × column parts, at
/// most one per thread, the one whose busiest thread has the least to do:
/// its register tiles (a panel counting as whole), plus the panels of b it
/// packs (half a tile each: every thread packs the panels of its column
/// part) and, unless `a_direct`, the rows of a it packs (a quarter of a tile
/// per tile of rows, once per group of panels); of equal ones, the fewest
/// parts.
inline GemmSplit gemm_split(int64_t m, int64_t panels, double flops, int64_t mr, int64_t mc,
                            int64_t group, bool a_direct) {
    const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1 && flops > 2e6;
    const int64_t threads = threaded ? omp_get_max_threads() : 1;
    const int64_t tiles = (m + mr - 1) / mr;
    int64_t row_parts = 1, col_parts = 1;
    double best = -1;
    for (int64_t rp = 1; rp <= std::min(threads, tiles); ++rp)
        for (int64_t cp = 1; cp <= std::min(threads / rp, panels); ++cp) {
            const int64_t t = (tiles + rp - 1) / rp, p = (panels + cp - 1) / cp;
            const int64_t groups = (p + group - 1) / group;
            const double cost = double(t * p) + 0.5 * double(p) +
                                (a_direct ? 0.0 : 0.25 * double(t * groups));
            if (best < 0 || cost < best || (cost == best && rp * cp < row_parts * col_parts)) {
                best = cost;
                row_parts = rp;
                col_parts = cp;
            }
        }
    const int64_t part_tiles = (tiles + row_parts - 1) / row_parts;
    const int64_t part_panels = (panels + col_parts - 1) / col_parts;
    return {.threaded = row_parts * col_parts > 1,
            .m = m,
            .mr = mr,
            .tiles = tiles,
            .panels = panels,
            .row_parts = row_parts,
            .col_parts = col_parts,
            .mc = mc,
            .group = std::min(group, part_panels),
            .max_rows = std::min(mc, part_tiles * mr)};
}

/// One work item of gemm_schedule: k-block [k0, k0 + kc), a block of rows,
/// and a group of panels [p0, p1) packed in the thread's own buffer in that
/// order; `first_group` is the item that holds panel 0 (where a's row sums
/// are taken, once per row).
struct GemmItem {
    int64_t k0, kc;
    GemmRange rows;
    bool first_group;
    int64_t p0, p1;
};

/// The GEMMs' schedule: each thread takes its part (more than one if the
/// team is smaller than planned), makes its buffers once — make_scratch() —
/// and then, k-block by k-block (`k_block` deep) in turn, for each group of
/// its panels [p0, p1): packs them — pack_b(scratch, k0, kc, p0, p1), panel p
/// at place p − p0 of the thread's buffer — and runs item(scratch, it) on
/// each block of its rows. Every element of c is written by one thread, its
/// k-blocks in order.
template <class MakeScratch, class PackB, class Item>
void gemm_schedule(const GemmSplit& s, int64_t k, int64_t k_block, MakeScratch make_scratch,
                   PackB pack_b, Item item) {
    const int64_t parts = s.row_parts * s.col_parts;
#pragma omp parallel num_threads(int(parts)) if (s.threaded)
    {
        auto scratch = make_scratch();
        const int64_t team = omp_get_num_threads();
        for (int64_t part = omp_get_thread_num(); part < parts; part += team) {
            const GemmRange rows = s.rows(part / s.col_parts), cols = s.cols(part % s.col_parts);
            const int64_t part_tiles = (rows.count + s.mr - 1) / s.mr;
            const int64_t blocks = std::max<int64_t>(1, (part_tiles * s.mr + s.mc - 1) / s.mc);
            for (int64_t k0 = 0; k0 < k; k0 += k_block) {
                const int64_t kc = std::min(k_block, k - k0);
                for (int64_t p0 = cols.first; p0 < cols.first + cols.count; p0 += s.group) {
                    const int64_t p1 = std::min(cols.first + cols.count, p0 + s.group);
                    pack_b(scratch, k0, kc, p0, p1);
                    for (int64_t b = 0; b < blocks; ++b) {
                        const int64_t first = rows.first + b * part_tiles / blocks * s.mr;
                        const int64_t last =
                            std::min(rows.first + rows.count,
                                     rows.first + (b + 1) * part_tiles / blocks * s.mr);
                        if (last > first)
                            item(scratch, GemmItem{k0, kc, {first, last - first}, p0 == 0, p0, p1});
                    }
                }
            }
        }
    }
}

}  // namespace ember::kernels::cpu

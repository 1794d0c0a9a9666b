// The CUDA normalization launch plans (kernels/cuda/norm_plan.h), checked on
// the CPU by walking every block, thread and step the kernels would: each
// element of every channel, row and column reached exactly once, by the
// block of its channel; sizes 1 and 2, odd sizes, the split and unsplit
// channel paths; and the index arithmetic at 2^31+ elements.
#include <catch2/catch.hpp>

#include <cstdint>
#include <vector>

#include "kernels/cuda/norm_plan.h"

using namespace ember::kernels::cuda;

namespace {

// Walks channel_reduce_kernel's loops; returns how often each flat index of
// [N, C, S] was read, failing if a block reads outside its channel.
std::vector<int> walk_channels(const ChannelPlan& p) {
    std::vector<int> hits(size_t(p.N * p.C * p.S), 0);
    for (int64_t blk = 0; blk < p.blocks; ++blk) {
        const int64_t c = blk / p.splits, k = blk % p.splits;
        for (int t = 0; t < p.threads; ++t) {
            int64_t j = chunk_begin(p, k) + t;
            PlaneCursor at = PlaneCursor::at(p, j);
            for (; j < chunk_end(p, k); j += p.threads, at.advance(p)) {
                const int64_t off = at.offset(p, c);
                REQUIRE(off >= 0);
                REQUIRE(off < p.N * p.C * p.S);
                REQUIRE((off / p.S) % p.C == c);
                ++hits[size_t(off)];
            }
        }
    }
    return hits;
}

bool all_once(const std::vector<int>& hits) {
    for (int h : hits)
        if (h != 1) return false;
    return true;
}

}  // namespace

TEST_CASE("norm plan: every channel value is reduced exactly once, by its channel's blocks",
          "[norm][plan]") {
    struct Shape3 {
        int64_t N, C, S;
    };
    const Shape3 shapes[] = {{1, 1, 2},   {2, 1, 1},     {2, 3, 1},      {1, 5, 7},
                             {3, 4, 33},  {7, 2, 255},   {5, 3, 257},    {2048, 40, 1},
                             {64, 16, 784}, {128, 16, 784}, {1, 1, 100003}, {1000, 1, 3}};
    for (const Shape3& s : shapes)
        for (int threads : {32, 64, 256}) {
            INFO("N " << s.N << " C " << s.C << " S " << s.S << " threads " << threads);
            const ChannelPlan p = plan_channels(s.N, s.C, s.S, threads);
            const int64_t n = s.N * s.S;
            CHECK(p.splits >= 1);
            CHECK(p.blocks == s.C * p.splits);
            CHECK(p.grid >= 1);
            CHECK(p.grid <= kNormMaxGrid);
            CHECK(p.chunk * p.splits >= n);
            CHECK(p.chunk * (p.splits - 1) < n);  // no empty block
            if (p.splits > 1) CHECK(p.chunk >= int64_t(threads) * kNormMinPerThread);
            CHECK(all_once(walk_channels(p)));
        }
}

TEST_CASE("norm plan: channels split only when few channels have many values", "[norm][plan]") {
    CHECK(plan_channels(2, 3, 1).splits == 1);           // N·S = 2
    CHECK(plan_channels(64, 2048, 49).splits == 1);      // channels fill the device
    CHECK(plan_channels(64, 16, 784).splits > 1);        // the test's C = 16 case splits
    CHECK(plan_channels(128, 16, 28 * 28).splits > 1);
    const ChannelPlan p = plan_channels(128, 16, 28 * 28);
    CHECK(p.blocks <= 2 * kNormTargetBlocks);
}

TEST_CASE("norm plan: the plane cursor steps like a division", "[norm][plan]") {
    for (int64_t S : {int64_t(1), int64_t(3), int64_t(31), int64_t(32), int64_t(33), int64_t(256),
                      int64_t(257), int64_t(100000)})
        for (int threads : {32, 256}) {
            const ChannelPlan p = plan_channels(1000, 3, S, threads);
            for (int64_t j0 : {int64_t(0), int64_t(1), S - 1, 7 * S + 5}) {
                PlaneCursor at = PlaneCursor::at(p, j0);
                for (int64_t j = j0; j < j0 + 50 * threads; j += threads, at.advance(p)) {
                    INFO("S " << S << " threads " << threads << " j " << j);
                    REQUIRE(at.n == j / S);
                    REQUIRE(at.s == j % S);
                }
            }
        }
}

TEST_CASE("norm plan: 64-bit channel indices past 2^31 elements", "[norm][plan]") {
    // 2^34 elements in 4 channels: every chunk boundary and offset in int64.
    const int64_t N = int64_t(1) << 20, C = 4, S = int64_t(1) << 12;
    const ChannelPlan p = plan_channels(N, C, S);
    CHECK(p.splits > 1);
    CHECK(chunk_end(p, p.splits - 1) == N * S);
    CHECK(chunk_begin(p, p.splits - 1) < N * S);
    CHECK(PlaneCursor::at(p, N * S - 1).offset(p, C - 1) == N * C * S - 1);
    for (int64_t j : {int64_t(0), (int64_t(1) << 31) - 3, (int64_t(1) << 33) + 12345, N * S - 600}) {
        PlaneCursor at = PlaneCursor::at(p, j);
        at.advance(p);
        const PlaneCursor want = PlaneCursor::at(p, j + p.threads);
        CHECK(at.n == want.n);
        CHECK(at.s == want.s);
    }
    // More channels than a grid holds: the blocks grid-stride.
    const ChannelPlan wide = plan_channels(1, int64_t(3) << 30, 2);
    CHECK(wide.splits == 1);
    CHECK(wide.blocks == int64_t(3) << 30);
    CHECK(wide.grid == kNormMaxGrid);
}

TEST_CASE("norm plan: the channel walk of the elementwise pass", "[norm][plan]") {
    for (int64_t C : {1, 2, 5})
        for (int64_t S : {1, 3, 8}) {
            const int64_t n = 4 * C * S;
            for (int64_t i0 = 0; i0 < n; i0 += 3) {  // any vector start
                ChannelWalk w = ChannelWalk::at(i0, C, S);
                for (int64_t i = i0; i < n; ++i, w.next(C, S)) {
                    INFO("C " << C << " S " << S << " i " << i);
                    REQUIRE(w.c == (i / S) % C);
                    REQUIRE(w.s == i % S);
                }
            }
        }
    const int64_t C = 3, S = (int64_t(1) << 31) + 1, i = 5 * S + 7;  // past 2^31
    const ChannelWalk w = ChannelWalk::at(i, C, S);
    CHECK(w.c == 2);
    CHECK(w.s == 7);
}

TEST_CASE("norm plan: every layer-norm row is owned by exactly one warp or block",
          "[norm][plan]") {
    for (int64_t M : {1, 7, 1000, 1024, 1025, 5000, 100000})
        for (int64_t R : {1, 2, 7, 9, 1000, 3000001}) {
            INFO("R " << R << " M " << M);
            const RowPlan p = plan_rows(R, M);
            CHECK(p.warp_per_row == (M <= kWarpRowMax));
            CHECK(p.threads % 32 == 0);
            CHECK(p.rows_per_block == (p.warp_per_row ? p.threads / 32 : 1));
            CHECK(p.grid >= 1);
            CHECK(p.grid <= kNormMaxRowGrid);
            std::vector<int> hits(size_t(R), 0);
            for (int64_t b = 0; b < p.grid; ++b)
                for (int64_t g = 0; g < p.rows_per_block; ++g)
                    for (int64_t r = first_row(p, b, g); r < R; r += row_stride(p)) ++hits[size_t(r)];
            CHECK(all_once(hits));
        }
    // Past 2^31 rows: the grid is capped and the rows grid-stride in int64.
    const int64_t R = (int64_t(1) << 31) + 3;
    const RowPlan p = plan_rows(R, 4);
    CHECK(p.grid == kNormMaxRowGrid);
    CHECK(first_row(p, p.grid - 1, p.rows_per_block - 1) == row_stride(p) - 1);
    CHECK(row_stride(p) * (R / row_stride(p) + 1) > R);
}

TEST_CASE("norm plan: layer-norm column sums cover every (row, column) once", "[norm][plan]") {
    struct RM {
        int64_t R, M;
    };
    for (const RM& s : {RM{1, 1}, RM{2, 1}, RM{1, 7}, RM{7, 1000}, RM{1000, 7}, RM{33, 33},
                        RM{300, 5000}, RM{100000, 32}, RM{5000, 1}}) {
        INFO("R " << s.R << " M " << s.M);
        const ColumnPlan p = plan_columns(s.R, s.M);
        CHECK(p.parts >= 1);
        CHECK(p.parts <= 65535);
        CHECK(p.grid_y == p.parts);
        CHECK(p.rows_per_part * p.parts >= s.R);
        CHECK(p.rows_per_part * (p.parts - 1) < s.R);  // no empty part
        CHECK(p.parts * s.M <= (s.M > kMaxPartialValues ? s.M : kMaxPartialValues));
        std::vector<int> hits(size_t(s.R * s.M), 0);
        for (int64_t y = 0; y < p.grid_y; ++y)
            for (int64_t bx = 0; bx < p.grid_x; ++bx)
                for (int64_t t = bx; t < p.col_tiles; t += p.grid_x)
                    for (int ty = 0; ty < kColRows; ++ty)
                        for (int tx = 0; tx < kColTile; ++tx) {
                            const int64_t j = t * kColTile + tx;
                            if (j >= s.M) continue;
                            const int64_t r0 = y * p.rows_per_part;
                            const int64_t r1 = r0 + p.rows_per_part < s.R ? r0 + p.rows_per_part : s.R;
                            for (int64_t r = r0 + ty; r < r1; r += kColRows) ++hits[size_t(r * s.M + j)];
                        }
        CHECK(all_once(hits));
    }
    // Many rows, few columns: the rows split, within grid.y's limit.
    const ColumnPlan tall = plan_columns((int64_t(1) << 31) + 7, 3);
    CHECK(tall.parts > 1);
    CHECK(tall.parts <= 65535);
    CHECK(tall.rows_per_part * tall.parts >= (int64_t(1) << 31) + 7);
    // Very wide rows: one partial, the tiles grid-stride if needed.
    const ColumnPlan wide = plan_columns(4, int64_t(1) << 36);
    CHECK(wide.parts == 1);
    CHECK(wide.grid_x == kNormMaxGrid);
    CHECK(wide.col_tiles == (int64_t(1) << 36) / kColTile);
}

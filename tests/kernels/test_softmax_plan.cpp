// The CUDA softmax / cross-entropy launch plan (kernels/cuda/softmax_plan.h),
// checked on the CPU: every thread the kernels launch is walked through the
// same index helpers, and every element must be touched exactly once and
// every row reduced by exactly one warp or block; sizes 0 and 1, odd sizes,
// each mapping's boundaries, capped grids, and indices past 2^31.
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "kernels/cuda/softmax_plan.h"

using namespace ember::kernels;
using namespace ember::kernels::cuda;

namespace {

// Counts how often the kernels of plan p touch each element of the buffer
// and how often each row or column tile is taken by a reducing group.
struct Walk {
    std::vector<int> elements, items;
};

Walk walk(const SoftmaxPlan& p) {
    const ReduceShape s = p.shape;
    Walk w{std::vector<int>(size_t(s.outer * s.size * s.inner)), std::vector<int>(size_t(p.items))};
    for (int64_t b = 0; b < p.grid; ++b)
        for (int t = 0; t < p.block; ++t)
            for (int64_t item = item_begin(p, b, t); item < p.items; item += item_stride(p)) {
                switch (p.mapping) {
                    case RowMapping::warp_per_row:
                        if (t % 32 == 0) ++w.items[size_t(item)];
                        for (int k = 0; k < p.per_lane; ++k)  // the kernels' register loop
                            if (t % 32 + 32 * k < s.size)
                                ++w.elements[size_t(item * s.size + t % 32 + 32 * k)];
                        break;
                    case RowMapping::block_per_row:
                        if (t == 0) ++w.items[size_t(item)];
                        for (int64_t c = t; c < s.size; c += p.block)
                            ++w.elements[size_t(item * s.size + c)];
                        break;
                    case RowMapping::columns: {
                        if (t == 0) ++w.items[size_t(item)];
                        const int64_t base = column_base(p, item, t);
                        if (base < 0) break;
                        for (int64_t r = 0; r < s.size; ++r)
                            ++w.elements[size_t(base + r * s.inner)];
                        break;
                    }
                }
            }
    return w;
}

void check_launch_shape(const SoftmaxPlan& p, int64_t max_blocks) {
    CHECK(p.block % 32 == 0);
    CHECK(p.block >= 32);
    CHECK(p.block <= 1024);
    CHECK(p.grid >= 1);
    CHECK(p.grid <= max_blocks);
    CHECK(p.grid <= 2147483647);
    if (p.mapping == RowMapping::warp_per_row) {
        // Only these are instantiated (visit_per_lane in the .cu files).
        CHECK((p.per_lane == 4 || p.per_lane == 16 || p.per_lane == kMaxPerLane));
        CHECK(32 * p.per_lane >= p.shape.size);
        CHECK(p.block == kRowBlock);
    }
    if (p.mapping == RowMapping::block_per_row) CHECK(p.block >= 256);
}

}  // namespace

TEST_CASE("softmax plan: every element once, every row by one group", "[softmax][plan]") {
    // clang-format off
    const std::vector<ReduceShape> shapes = {
        {1, 1, 1},    {1, 2, 1},     {4, 1, 1},     {5, 7, 1},     {2, 31, 1},   {2, 32, 1},
        {2, 33, 1},   {3, 128, 1},   {3, 129, 1},   {2, 512, 1},   {2, 513, 1},  {9, 1024, 1},
        {3, 1025, 1}, {2, 4096, 1},  {2, 4097, 1},  {2, 8193, 1},  {2, 20000, 1}, {1, 50000, 1},
        {1000, 3, 1}, {17, 300, 1},  {9, 3, 2},     {2, 5, 31},    {2, 3, 32},   {3, 4, 33},
        {2, 7, 257},  {1, 11, 520},  {70, 1, 600},  {1, 1, 2},     {5, 1, 3},    {1, 300, 1000},
    };
    // clang-format on
    for (const ReduceShape& s : shapes)
        for (int64_t max_blocks : {kMaxRowBlocks, int64_t(1), int64_t(3), int64_t(7)}) {
            INFO("[" << s.outer << ", " << s.size << ", " << s.inner << "], max_blocks "
                     << max_blocks);
            const SoftmaxPlan p = softmax_plan(s, max_blocks);
            INFO("mapping " << int(p.mapping) << ", grid " << p.grid << ", block " << p.block);
            CHECK(p.mapping == (s.inner > 1             ? RowMapping::columns
                                : s.size <= kWarpRowMax ? RowMapping::warp_per_row
                                                        : RowMapping::block_per_row));
            check_launch_shape(p, max_blocks);
            const Walk w = walk(p);
            int64_t wrong = 0;
            for (int n : w.elements) wrong += n != 1;
            CHECK(wrong == 0);
            wrong = 0;
            for (int n : w.items) wrong += n != 1;
            CHECK(wrong == 0);
            CHECK(p.items == (s.inner > 1 ? s.outer * p.tiles : s.outer));
        }
}

TEST_CASE("softmax plan: no launch for an empty buffer", "[softmax][plan]") {
    for (const ReduceShape& s :
         {ReduceShape{0, 5, 1}, ReduceShape{3, 0, 1}, ReduceShape{3, 5, 0}, ReduceShape{0, 0, 0}})
        CHECK(softmax_plan(s).grid == 0);
}

TEST_CASE("softmax plan: row and column indices past 2^31", "[softmax][plan]") {
    SECTION("3e9 short rows: warps stride over rows, the last one is reached") {
        const ReduceShape s{3'000'000'000, 2, 1};
        const SoftmaxPlan p = softmax_plan(s);
        REQUIRE(p.mapping == RowMapping::warp_per_row);
        check_launch_shape(p, kMaxRowBlocks);
        CHECK(p.grid == kMaxRowBlocks);
        const int64_t warps = p.block / 32, stride = item_stride(p);
        CHECK(stride == p.grid * warps);
        for (int64_t row : {int64_t(0), int64_t(2'147'483'648), s.outer - 1}) {
            const int64_t step = row / stride, r = row % stride;
            const int64_t b = r / warps, lane0 = (r % warps) * 32;
            REQUIRE(b < p.grid);
            CHECK(item_begin(p, b, int(lane0)) + step * stride == row);
            CHECK(item_begin(p, b, int(lane0) + 31) + step * stride == row);
        }
    }
    SECTION("2^21 + 3 long rows: blocks stride over rows") {
        const ReduceShape s{(int64_t(1) << 21) + 3, 5000, 1};
        const SoftmaxPlan p = softmax_plan(s);
        REQUIRE(p.mapping == RowMapping::block_per_row);
        check_launch_shape(p, kMaxRowBlocks);
        const int64_t last = s.outer - 1, stride = item_stride(p);
        CHECK(item_begin(p, last % p.grid, 17) + (last / p.grid) * stride == last);
        CHECK(last * s.size > (int64_t(1) << 33));  // the kernels' row offset, in int64
    }
    SECTION("columns of a buffer of 9.4e9 elements") {
        const ReduceShape s{5, int64_t(1) << 28, 7};
        const SoftmaxPlan p = softmax_plan(s);
        REQUIRE(p.mapping == RowMapping::columns);
        check_launch_shape(p, kMaxRowBlocks);
        CHECK(p.block == 32);
        CHECK(p.tiles == 1);
        CHECK(column_base(p, 4, 6) == 4 * s.size * s.inner + 6);
        CHECK(column_base(p, 4, 7) == -1);
    }
    SECTION("an inner dim past 2^31: column tiles") {
        const ReduceShape s{3, 2, (int64_t(1) << 31) + 5};
        const SoftmaxPlan p = softmax_plan(s);
        REQUIRE(p.mapping == RowMapping::columns);
        check_launch_shape(p, kMaxRowBlocks);
        CHECK(p.tiles == (s.inner + 255) / 256);
        CHECK(p.items == 3 * p.tiles);
        const int64_t last = p.items - 1;  // outer 2; the last tile holds the last 5 columns
        const int64_t first_col = (p.tiles - 1) * 256;
        CHECK(column_base(p, last, 0) == 2 * s.size * s.inner + first_col);
        CHECK(column_base(p, last, int(s.inner - 1 - first_col)) ==
              2 * s.size * s.inner + s.inner - 1);
        CHECK(column_base(p, last, int(s.inner - first_col)) == -1);
        // The grid is capped; blocks stride over the tiles.
        CHECK(p.grid == kMaxRowBlocks);
        CHECK(item_begin(p, last % p.grid, 0) + (last / p.grid) * item_stride(p) == last);
    }
}

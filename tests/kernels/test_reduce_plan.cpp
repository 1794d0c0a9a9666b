// The CUDA reduction plan (kernels/cuda/reduce_plan.h), checked on the CPU:
// every warp, thread and chunk the kernels launch is walked through the same
// index helpers, and each element of each output must be read exactly once
// and each chunk partial written and folded exactly once (sizes 0 and 1, odd
// sizes, split rows and columns, capped grids, shapes past 2^31 elements).
// A host model of the kernels' combine order, run over the plan, must give
// the CPU's f32 sums bit for bit (Note [Reduction order]).
#include <catch2/catch.hpp>

#include <bit>
#include <cstdint>
#include <vector>

#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce_plan.h"
#include "kernels/reduce.h"
#include "ops/oracle.h"

using namespace ember;
using namespace ember::kernels;
using namespace ember::kernels::cuda;

namespace {

const int kSms[] = {1, 4, 132};
constexpr int kWarpsPerBlock = kReduceBlock / 32;

// How often the kernels of plan p read each element of each output, write
// each partial, and fold each partial.
struct Walk {
    std::vector<int> elements, stored, partials, folded;
};

Walk walk(const ReducePlan& p, ReduceShape s) {
    Walk w{std::vector<int>(size_t(s.outer * s.size * s.inner)), std::vector<int>(size_t(p.items)),
           std::vector<int>(size_t(p.items * p.chunks)), std::vector<int>(size_t(p.items * p.chunks))};
    auto read = [&](int64_t k, int64_t i) {  // term i of output k
        const int64_t o = k / p.inner, j = k % p.inner;
        ++w.elements[size_t((o * p.size + i) * p.inner + j)];
    };
    auto done = [&](int64_t k, int64_t partial) {  // the rows or cols kernel's result
        if (p.chunks == 1)
            ++w.stored[size_t(k)];
        else
            ++w.partials[size_t(partial)];
    };
    if (p.rows) {
        const int64_t stride = p.grid_x * kWarpsPerBlock;
        for (int64_t first = 0; first < stride; ++first)
            for (int64_t wi = first; wi < p.work; wi += stride)
                for (int lane = 0; lane < 32; ++lane) {
                    const int half = lane / kReduceLanes, lane16 = lane % kReduceLanes;
                    if (p.two_rows) {
                        const int64_t row = 2 * wi + half;
                        if (row >= p.items) continue;
                        for (int64_t i = lane16; i < p.size; i += kReduceLanes) read(row, i);
                        if (lane16 == 0) ++w.stored[size_t(row)];
                        continue;
                    }
                    const RowItem it = row_item(p, wi);
                    REQUIRE(it.leaves.begin % 2 == 0);  // pairs of leaves stay in the chunk
                    for (int64_t pair = it.leaves.begin; pair < it.leaves.end; pair += 2) {
                        const int64_t leaf = pair + half;
                        if (leaf >= it.leaves.end) continue;
                        const ReduceRange e = row_leaf(p, leaf);
                        for (int64_t i = e.begin + lane16; i < e.end; i += kReduceLanes) read(it.row, i);
                    }
                    if (lane == 0) done(it.row, wi);
                }
    } else {
        for (int64_t chunk = 0; chunk < p.grid_y; ++chunk)
            for (int64_t bx = 0; bx < p.grid_x; ++bx)
                for (int64_t b = bx; b * p.block_x < p.items; b += p.grid_x)
                    for (int y = 0; y < p.block_y; ++y)
                        for (int x = 0; x < p.block_x; ++x) {
                            const int64_t k = b * p.block_x + x;
                            if (k >= p.items) continue;
                            const ReduceRange leaves = col_part(p, chunk, y);
                            for (int64_t leaf = leaves.begin; leaf < leaves.end; ++leaf) {
                                const ReduceRange r = col_leaf(p, leaf);
                                for (int64_t i = r.begin; i < r.end; ++i) read(k, i);
                            }
                            if (y == 0) done(k, k * p.chunks + chunk);
                        }
    }
    if (p.chunks > 1)
        for (int64_t k = 0; k < p.items; ++k)
            for (int t = 0; t < kReduceCombineBlock; ++t) {
                const ReduceRange r = combine_range(p, t);
                for (int64_t c = r.begin; c < r.end; ++c) ++w.folded[size_t(k * p.chunks + c)];
                if (t == 0) ++w.stored[size_t(k)];
            }
    return w;
}

bool all_ones(const std::vector<int>& v) {
    for (int c : v)
        if (c != 1) return false;
    return true;
}

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Limits every plan keeps, whatever the shape.
void check_limits(const ReducePlan& p, ReduceShape s) {
    INFO("shape [" << s.outer << ", " << s.size << ", " << s.inner << "]");
    REQUIRE(p.items == s.outer * s.inner);
    REQUIRE(p.grid_x >= 1);
    REQUIRE(p.grid_x <= kReduceMaxGrid);
    REQUIRE(p.grid_y >= 1);
    REQUIRE(p.grid_y <= kReduceMaxGridY);
    REQUIRE(p.block_x * p.block_y == kReduceBlock);
    REQUIRE(is_pow2(p.block_y));
    REQUIRE(is_pow2(p.chunk_leaves));
    REQUIRE(p.leaves < (int64_t(1) << kReduceStackLevels));
    // The chunks tile the leaves: none empty, none missing.
    REQUIRE(p.chunks * p.chunk_leaves >= p.leaves);
    REQUIRE((p.chunks - 1) * p.chunk_leaves < p.leaves);
    const int64_t leaf = p.rows ? kReduceRowLeaf : kReduceColLeaf;
    REQUIRE(p.leaves * leaf >= s.size);
    REQUIRE((p.rows ? row_leaf(p, p.leaves - 1) : col_leaf(p, p.leaves - 1)).end == s.size);
    REQUIRE(combine_range(p, kReduceCombineBlock - 1).end == p.chunks);
    if (p.rows) {
        REQUIRE(p.chunk_leaves >= 2);
        if (p.two_rows) {
            REQUIRE(s.size <= kReduceRowLeaf);
            REQUIRE(2 * p.work >= p.items);
        } else {
            REQUIRE(p.work == p.items * p.chunks);
            const RowItem last = row_item(p, p.work - 1);
            REQUIRE(last.row == p.items - 1);
            REQUIRE(last.leaves.end == p.leaves);
        }
    } else {
        REQUIRE(is_pow2(p.part_leaves));
        REQUIRE(p.chunk_leaves == p.part_leaves * p.block_y);
        REQUIRE(p.grid_y == p.chunks);
        REQUIRE(p.grid_x * p.block_x >= std::min(p.items, kReduceMaxGrid * p.block_x));
        REQUIRE(col_part(p, p.chunks - 1, p.block_y - 1).end == p.leaves);
    }
}

// ---- The kernels' combine order, on the host ----

struct HostSum {
    float init() const { return 0.0f; }
    float combine(float a, float b) const { return a + b; }
};

// A warp's shfl_down: lane l reads lane l + off, or itself past the warp.
std::vector<float> shfl_down(const std::vector<float>& v, int off) {
    std::vector<float> r(32);
    for (int l = 0; l < 32; ++l) r[size_t(l)] = l + off < 32 ? v[size_t(l + off)] : v[size_t(l)];
    return r;
}

// One output of the rows kernel (or its partial), as the warp computes it.
float model_row_item(const ReducePlan& p, const float* row, ReduceRange leaves) {
    const HostSum op;
    TreeStack<float> stack;
    for (int64_t pair = leaves.begin; pair < leaves.end; pair += 2) {
        std::vector<float> v(32, 0.0f);
        for (int lane = 0; lane < 32; ++lane) {
            const int64_t leaf = pair + lane / kReduceLanes;
            if (leaf >= leaves.end) continue;
            const ReduceRange e = row_leaf(p, leaf);
            for (int64_t i = e.begin + lane % kReduceLanes; i < e.end; i += kReduceLanes)
                v[size_t(lane)] = op.combine(v[size_t(lane)], row[i]);
        }
        for (int off = kReduceLanes / 2; off > 0; off /= 2) {
            const std::vector<float> o = shfl_down(v, off);
            for (int l = 0; l < 32; ++l) v[size_t(l)] = op.combine(v[size_t(l)], o[size_t(l)]);
        }
        stack.push(op.combine(v[0], v[16]), op);
    }
    return stack.result(op);
}

float model_combine(const ReducePlan& p, const float* part) {
    const HostSum op;
    std::vector<float> warps;
    for (int w = 0; w < kReduceCombineBlock / 32; ++w) {
        std::vector<float> v(32);
        for (int lane = 0; lane < 32; ++lane) {
            TreeStack<float> stack;
            const ReduceRange r = combine_range(p, w * 32 + lane);
            for (int64_t c = r.begin; c < r.end; ++c) stack.push(part[c], op);
            v[size_t(lane)] = stack.result(op);
        }
        for (int off = 1; off < 32; off *= 2) {
            const std::vector<float> o = shfl_down(v, off);
            for (int l = 0; l < 32; ++l) v[size_t(l)] = op.combine(v[size_t(l)], o[size_t(l)]);
        }
        warps.push_back(v[0]);
    }
    for (size_t s = 1; s < warps.size(); s *= 2)
        for (size_t i = 0; i + s < warps.size(); i += 2 * s) warps[i] = op.combine(warps[i], warps[i + s]);
    return warps[0];
}

// The sums the CUDA kernels compute under plan p.
std::vector<float> model_sum(const ReducePlan& p, ReduceShape s, const std::vector<float>& x) {
    const HostSum op;
    std::vector<float> out(size_t(p.items)), part(size_t(p.items * p.chunks));
    if (p.rows && p.two_rows) {
        for (int64_t k = 0; k < p.items; ++k) {
            const float* row = x.data() + k * s.size;
            std::vector<float> v(16, 0.0f);
            for (int64_t i = 0; i < s.size; ++i) v[size_t(i % 16)] = op.combine(v[size_t(i % 16)], row[i]);
            for (int w = 8; w > 0; w /= 2)
                for (int l = 0; l < w; ++l) v[size_t(l)] = op.combine(v[size_t(l)], v[size_t(l + w)]);
            out[size_t(k)] = v[0];
        }
        return out;
    }
    if (p.rows) {
        for (int64_t wi = 0; wi < p.work; ++wi) {
            const RowItem it = row_item(p, wi);
            const float r = model_row_item(p, x.data() + it.row * s.size, it.leaves);
            (p.chunks == 1 ? out[size_t(it.row)] : part[size_t(wi)]) = r;
        }
    } else {
        for (int64_t chunk = 0; chunk < p.chunks; ++chunk)
            for (int64_t k = 0; k < p.items; ++k) {
                const int64_t o = k / s.inner, j = k % s.inner;
                std::vector<float> tile(size_t(p.block_y));
                for (int y = 0; y < p.block_y; ++y) {
                    TreeStack<float> stack;
                    const ReduceRange leaves = col_part(p, chunk, y);
                    for (int64_t leaf = leaves.begin; leaf < leaves.end; ++leaf) {
                        const ReduceRange r = col_leaf(p, leaf);
                        float v = op.init();
                        for (int64_t i = r.begin; i < r.end; ++i)
                            v = op.combine(v, x[size_t((o * s.size + i) * s.inner + j)]);
                        stack.push(v, op);
                    }
                    tile[size_t(y)] = stack.result(op);
                }
                for (int st = 1; st < p.block_y; st *= 2)
                    for (int y = 0; y + st < p.block_y; y += 2 * st)
                        tile[size_t(y)] = op.combine(tile[size_t(y)], tile[size_t(y + st)]);
                (p.chunks == 1 ? out[size_t(k)] : part[size_t(k * p.chunks + chunk)]) = tile[0];
            }
    }
    if (p.chunks > 1)
        for (int64_t k = 0; k < p.items; ++k)
            out[size_t(k)] = model_combine(p, part.data() + k * p.chunks);
    return out;
}

}  // namespace

TEST_CASE("reduce plan: every element read once, every output stored once", "[plan][reduce]") {
    // clang-format off
    const std::vector<ReduceShape> shapes = {
        {1, 1, 1}, {1, 0, 1}, {3, 0, 1}, {2, 0, 3}, {7, 1, 1}, {1, 7, 1}, {5, 1, 3}, {4, 256, 1},
        {3, 257, 1}, {1, 511, 1}, {2, 513, 1}, {5, 4097, 1}, {3, 70000, 1}, {1, 150000, 1},
        {9, 17, 1}, {4, 5, 3}, {3, 8, 7}, {1, 1100, 520}, {40, 30, 50}, {1, 40, 2500},
        {2, 9, 2}, {1, 70001, 3}, {1, 100000, 1}, {300, 257, 1}, {1, 300, 257}};
    // clang-format on
    for (int sms : kSms)
        for (const ReduceShape& s : shapes) {
            INFO("sms " << sms << ", shape [" << s.outer << ", " << s.size << ", " << s.inner << "]");
            const ReducePlan p = plan_reduce(s, sms);
            check_limits(p, s);
            const Walk w = walk(p, s);
            CHECK(all_ones(w.elements));
            CHECK(all_ones(w.stored));
            if (p.chunks > 1) {
                CHECK(all_ones(w.partials));
                CHECK(all_ones(w.folded));
            }
        }
}

TEST_CASE("reduce plan: few long rows and few long columns are split", "[plan][reduce]") {
    const ReducePlan rows = plan_reduce({3, int64_t(1) << 21, 1}, 132);
    CHECK(rows.rows);
    CHECK(rows.chunks > 1);
    CHECK(rows.work >= 132 * 4);  // enough warps for the device
    const ReducePlan cols = plan_reduce({1, 100000, 3}, 132);
    CHECK_FALSE(cols.rows);
    CHECK(cols.chunks > 1);
    // Many outputs: no split, no second launch.
    CHECK(plan_reduce({1 << 20, 512, 1}, 132).chunks == 1);
    CHECK(plan_reduce({1 << 12, 64, 1 << 8}, 132).chunks == 1);
    const ReducePlan short_rows = plan_reduce({1 << 20, 7, 1}, 132);
    CHECK(short_rows.two_rows);
    CHECK(short_rows.work == 1 << 19);
}

TEST_CASE("reduce plan: shapes past 2^31 elements keep int64 indices and grid limits",
          "[plan][reduce]") {
    const int64_t big = (int64_t(1) << 31) + 5;
    const std::vector<ReduceShape> shapes = {
        {3, int64_t(1) << 33, 1}, {1, int64_t(1) << 38, 1}, {big, 7, 1},     {big, 300, 1},
        {1, int64_t(1) << 34, 3}, {big, 3, 2},              {2, big, 5},     {1, 2, big},
        {int64_t(1) << 20, 3, int64_t(1) << 12}};
    for (int sms : kSms)
        for (const ReduceShape& s : shapes) {
            const ReducePlan p = plan_reduce(s, sms);
            check_limits(p, s);
            if (p.rows && !p.two_rows) {
                // Leaf ranges of the chunks tile each row (checked on the first and last row).
                for (int64_t row : {int64_t(0), p.items - 1}) {
                    int64_t next = 0;
                    for (int64_t c = 0; c < p.chunks; ++c) {
                        const RowItem it = row_item(p, row * p.chunks + c);
                        REQUIRE(it.row == row);
                        REQUIRE(it.leaves.begin == next);
                        next = it.leaves.end;
                    }
                    REQUIRE(next == p.leaves);
                }
            } else if (!p.rows) {
                int64_t next = 0;
                for (int64_t c = 0; c < p.chunks; ++c)
                    for (int y = 0; y < p.block_y; ++y) {
                        const ReduceRange r = col_part(p, c, y);
                        REQUIRE(r.begin == std::min(next, p.leaves));
                        next = r.end;
                    }
                REQUIRE(next == p.leaves);
            }
        }
}

TEST_CASE("reduce plan: TreeStack folds like the CPU's pairwise tree_combine", "[plan][reduce]") {
    const cpu::SumOp<float> cpu_op;
    const HostSum op;
    for (int64_t n = 1; n <= 300; ++n) {
        const std::vector<float> v = test::random_tensor({n}, DType::f32, uint64_t(n)).to_vector<float>();
        TreeStack<float> stack;
        for (float x : v) stack.push(x, op);
        INFO("n " << n);
        REQUIRE(std::bit_cast<uint32_t>(stack.result(op)) ==
                std::bit_cast<uint32_t>(cpu::tree_combine(v.data(), n, cpu_op)));
    }
}

TEST_CASE("reduce plan: the kernels' combine order gives the CPU's f32 sums bit for bit",
          "[plan][reduce]") {
    // clang-format off
    const std::vector<ReduceShape> shapes = {
        {1, 1, 1}, {7, 1, 1}, {1, 7, 1}, {4, 256, 1}, {3, 257, 1}, {2, 513, 1}, {5, 4097, 1},
        {3, 70000, 1}, {1, 150001, 1}, {300, 257, 1}, {4, 5, 3}, {3, 8, 7}, {1, 1100, 520},
        {40, 30, 50}, {1, 300, 257}, {2, 70001, 3}, {1, 40, 2500}, {1, (1 << 21) + 77, 1}};
    // clang-format on
    uint64_t seed = 0;
    for (const ReduceShape& s : shapes) {
        const Tensor x = test::random_tensor({s.outer, s.size, s.inner}, DType::f32, ++seed);
        const std::vector<float> xv = x.to_vector<float>();
        const std::vector<float> want = kernels::sum(x, {1}).to_vector<float>();
        for (int sms : kSms) {
            INFO("sms " << sms << ", shape [" << s.outer << ", " << s.size << ", " << s.inner << "]");
            const ReducePlan p = plan_reduce(s, sms);
            const std::vector<float> got = model_sum(p, s, xv);
            REQUIRE(got.size() == want.size());
            int64_t mismatches = 0;
            for (size_t i = 0; i < got.size(); ++i)
                mismatches += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]);
            CHECK(mismatches == 0);
        }
    }
}

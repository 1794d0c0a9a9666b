// The fused CUDA attention's plan (kernels/cuda/attention_plan.h), on the CPU:
// the m16n8k16 fragment layouts the kernels load by, which kernel a call
// takes, every (query tile, key tile) pair with a visible entry visited
// exactly once and no other (causal tiles skipped, not masked), the tiles
// that need a per-element mask, the backward's steps, the decode's splits,
// T = 1, tails and T past 2^16; and the summation-order model of the
// tensor-core kernels (tests/support/attention_model.h) against an f64
// reference and against the CPU kernel: the expected difference between the
// fused CUDA result and the CPU's.
#include <catch2/catch.hpp>

#include <cmath>
#include <set>
#include <vector>

#include "support/attention_model.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention_plan.h"
#include "support/support.h"

using namespace ember;
using namespace ember::kernels::cuda;

namespace {

AttentionShape shape(int64_t bh, int64_t tq, int64_t tk, int64_t d, bool causal) {
    AttentionShape s;
    s.bh = bh;
    s.heads = 1;
    s.tq = tq;
    s.tk = tk;
    s.d = s.dv = d;
    s.causal = causal;
    return s;
}

// Whether rows [r0, r1) and keys [k0, k1) hold a (row, key) the mask keeps,
// by brute force.
bool any_visible(const AttentionShape& s, int64_t r0, int64_t r1, int64_t k0, int64_t k1) {
    for (int64_t r = r0; r < std::min(r1, s.tq); ++r)
        for (int64_t k = k0; k < std::min(k1, s.tk); ++k)
            if (!s.causal || k <= r) return true;
    return false;
}

}  // namespace

TEST_CASE("attention plan: the m16n8k16 fragments cover their tiles once", "[attention][plan]") {
    // The PTX ISA's layouts, written out here on their own: group g = lane/4,
    // t = lane%4; A element i at row g (+8 for i in {2,3,6,7}), column
    // 2t + i%2 (+8 for i >= 4); B element i at k = 2t + i%2 (+8 for i >= 2),
    // n = g; C element i at row g (+8 for i >= 2), column 2t + i%2.
    std::set<std::pair<int, int>> a, b, c;
    for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4, t = lane % 4;
        for (int i = 0; i < 8; ++i) {
            int row, col;
            a_coords(lane, i, row, col);
            CHECK(row == g + ((i == 2 || i == 3 || i == 6 || i == 7) ? 8 : 0));
            CHECK(col == 2 * t + i % 2 + (i >= 4 ? 8 : 0));
            a.insert({row, col});
        }
        for (int i = 0; i < 4; ++i) {
            int k, n;
            b_coords(lane, i, k, n);
            CHECK(k == 2 * t + i % 2 + (i >= 2 ? 8 : 0));
            CHECK(n == g);
            b.insert({k, n});
            int row, col;
            c_coords(lane, i, row, col);
            CHECK(row == g + (i >= 2 ? 8 : 0));
            CHECK(col == 2 * t + i % 2);
            c.insert({row, col});
        }
    }
    CHECK(a.size() == 256);  // 32 lanes × 8 distinct elements of 16 × 16
    CHECK(b.size() == 128);
    CHECK(c.size() == 128);
    // P stays in registers: the C of n-tiles 2kk and 2kk + 1, packed in
    // pairs (mma::pack_a), is the A of k-chunk kk, element by element.
    for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 8; ++i) {
            int ar, ac, cr, cc;
            a_coords(lane, i, ar, ac);
            c_coords(lane, i % 4, cr, cc);
            CHECK(ar == cr);
            CHECK(ac == cc + (i >= 4 ? 8 : 0));
        }
}

TEST_CASE("attention plan: which kernel takes a call", "[attention][plan]") {
    const AttentionShape s = shape(4, 300, 300, 64, true);
    CHECK(attention_forward_plan(s, DType::bf16, 132).path == AttentionPath::tensor_core);
    CHECK(attention_forward_plan(s, DType::f16, 132).path == AttentionPath::tensor_core);
    CHECK(attention_forward_plan(s, DType::f32, 132).path == AttentionPath::warp_rows);
    CHECK(attention_forward_plan(s, DType::f64, 132).path == AttentionPath::warp_rows);
    CHECK(attention_forward_plan(shape(4, 300, 300, 48, true), DType::bf16, 132).path ==
          AttentionPath::warp_rows);  // D off the tensor-core set
    AttentionShape dv = s;
    dv.dv = 32;  // Dv != D
    CHECK(attention_forward_plan(dv, DType::bf16, 132).path == AttentionPath::warp_rows);
    CHECK(attention_forward_plan(shape(4, 300, 300, 257, false), DType::f32, 132).path ==
          AttentionPath::composite);
    for (int64_t tq : {1, 4})  // a token against the cache
        CHECK(attention_forward_plan(shape(4, tq, 300, 64, false), DType::bf16, 132).path ==
              AttentionPath::decode);
    CHECK(attention_forward_plan(shape(4, 5, 300, 64, false), DType::bf16, 132).path ==
          AttentionPath::tensor_core);
    // The backward has no decode path: T = 1 takes the tiles.
    CHECK(attention_backward_plan(shape(4, 1, 300, 64, false), DType::bf16).path ==
          AttentionPath::tensor_core);
    CHECK(attention_backward_plan(shape(4, 1, 300, 64, false), DType::f32).path ==
          AttentionPath::warp_rows);
    CHECK(attention_forward_plan(shape(0, 5, 5, 64, false), DType::bf16, 132).grid == 0);
    // Shared memory of the tensor-core blocks: within the H100/H200 opt-in 227 KB.
    const AttentionPlan f = attention_forward_plan(shape(1, 64, 64, 128, false), DType::bf16, 132);
    CHECK(f.smem == size_t(2 * kTileKeys * (128 + kSmemPad) * 2));
    const AttentionPlan b = attention_backward_plan(shape(1, 64, 64, 128, false), DType::bf16);
    CHECK(b.smem <= 227 * 1024);
    CHECK(b.smem_kv <= 227 * 1024);
}

TEST_CASE("attention plan: every visible tile pair once, the rest skipped", "[attention][plan]") {
    struct C {
        int64_t tq, tk;
        bool causal;
    };
    for (const C& c : {C{1, 1, false}, C{1, 1, true}, C{64, 64, true}, C{65, 65, true},
                       C{130, 70, true}, C{70, 200, true}, C{200, 70, false}, C{1, 300, true},
                       C{300, 1, true}, C{127, 129, false}}) {
        INFO("Tq " << c.tq << " Tk " << c.tk << (c.causal ? " causal" : ""));
        const AttentionShape s = shape(3, c.tq, c.tk, 64, c.causal);
        const AttentionPlan p = attention_forward_plan(s, DType::bf16, 132);
        const int64_t key_tiles = ceil_div(c.tk, kTileKeys);
        std::vector<int> visits(size_t(s.bh * p.row_tiles * key_tiles), 0);
        std::set<std::pair<int64_t, int64_t>> blocks;
        if (p.path == AttentionPath::tensor_core) {
            for (int64_t blk = 0; blk < p.grid; ++blk) {
                const BlockTile bt = block_tile(blk, s.bh, p.row_tiles, s.causal);
                REQUIRE(bt.bh < s.bh);
                REQUIRE(bt.tile < p.row_tiles);
                blocks.insert({bt.bh, bt.tile});
                const int64_t n = key_tiles_of(s, bt.tile, kTileRows);
                REQUIRE(n <= key_tiles);
                for (int64_t kt = 0; kt < n; ++kt)
                    ++visits[size_t((bt.bh * p.row_tiles + bt.tile) * key_tiles + kt)];
            }
            CHECK(int64_t(blocks.size()) == p.grid);  // each (head, tile) one block
            for (int64_t bh = 0; bh < s.bh; ++bh)
                for (int64_t rt = 0; rt < p.row_tiles; ++rt)
                    for (int64_t kt = 0; kt < key_tiles; ++kt) {
                        const int64_t r0 = rt * kTileRows, k0 = kt * kTileKeys;
                        const bool needed = any_visible(s, r0, r0 + kTileRows, k0, k0 + kTileKeys);
                        INFO("tile " << rt << ", key tile " << kt);
                        CHECK(visits[size_t((bh * p.row_tiles + rt) * key_tiles + kt)] ==
                              (needed ? 1 : 0));
                        // A tile without the mask holds only visible entries; each warp's 16 rows.
                        for (int64_t w0 = r0; w0 < r0 + kTileRows; w0 += 16)
                            if (!tile_masked(s, w0, 16, k0)) {
                                for (int64_t r = w0; r < w0 + 16; ++r)
                                    for (int64_t k = k0; k < k0 + kTileKeys; ++k)
                                        REQUIRE((r < s.tq && k < s.tk && (!s.causal || k <= r)));
                            }
                    }
        } else {
            CHECK(p.path == AttentionPath::decode);  // Tq = 1: the split's test below
        }
        // The backward's dK/dV steps: key tile kt from first_step_of to the end.
        const AttentionPlan b = attention_backward_plan(s, DType::bf16);
        REQUIRE(b.key_tiles == key_tiles);
        const int64_t steps = ceil_div(c.tq, kStepRows);
        for (int64_t kt = 0; kt < key_tiles; ++kt) {
            const int64_t first = first_step_of(s, kt);
            REQUIRE(first >= 0);
            REQUIRE(first <= steps);
            for (int64_t st = 0; st < steps; ++st) {
                const int64_t q0 = st * kStepRows, k0 = kt * kTileKeys;
                INFO("key tile " << kt << ", step " << st);
                CHECK((st >= first) == any_visible(s, q0, q0 + kStepRows, k0, k0 + kTileKeys));
            }
        }
        // Heaviest first under the causal mask: block 0 has the most key tiles.
        if (c.causal && p.path == AttentionPath::tensor_core && p.row_tiles > 1)
            CHECK(key_tiles_of(s, block_tile(0, s.bh, p.row_tiles, true).tile, kTileRows) >=
                  key_tiles_of(s, block_tile(p.grid - 1, s.bh, p.row_tiles, true).tile, kTileRows));
    }
}

TEST_CASE("attention plan: T past 2^16", "[attention][plan]") {
    const int64_t t = (int64_t(1) << 16) + 5;
    const AttentionShape s = shape(16 * 16, t, t, 128, true);
    const AttentionPlan p = attention_forward_plan(s, DType::bf16, 132);
    REQUIRE(p.path == AttentionPath::tensor_core);
    CHECK(p.row_tiles == ceil_div(t, kTileRows));
    CHECK(p.grid == s.bh * p.row_tiles);
    CHECK(p.grid < (int64_t(1) << 31));  // grid.x's limit
    // The last tile (5 rows) visits every key tile up to its last row.
    CHECK(key_tiles_of(s, p.row_tiles - 1, kTileRows) == ceil_div(t, kTileKeys));
    CHECK(key_tiles_of(s, 0, kTileRows) == 1);
    CHECK(tile_masked(s, (p.row_tiles - 1) * kTileRows, 16, 0));  // rows past Tq
    CHECK(!tile_masked(s, 1024, 16, 0));
    // Element offsets past 2^31 within one head: in 64-bit.
    CHECK(int64_t(t) * 128 * 16 * 16 > (int64_t(1) << 31));
    const AttentionPlan b = attention_backward_plan(s, DType::bf16);
    CHECK(first_step_of(s, b.key_tiles - 1) == ((b.key_tiles - 1) * kTileKeys) / kStepRows);
}

TEST_CASE("attention plan: decode splits the keys", "[attention][plan]") {
    for (int64_t tk : {1, 31, 32, 127, 128, 129, 1000, 4096, 70000})
        for (int64_t bh : {1, 8, 512})
            for (int sms : {1, 132}) {
                INFO("Tk " << tk << " bh " << bh << " SMs " << sms);
                const AttentionShape s = shape(bh, 1, tk, 64, false);
                const AttentionPlan p = attention_forward_plan(s, DType::bf16, sms);
                REQUIRE(p.path == AttentionPath::decode);
                REQUIRE(p.splits >= 1);
                CHECK(p.split_len % 32 == 0);
                CHECK(p.grid == bh * p.splits);
                int64_t next = 0;
                for (int64_t sp = 0; sp < p.splits; ++sp) {
                    const KeyRange r = decode_keys(p, sp);
                    CHECK(r.begin == next);
                    CHECK(r.end > r.begin);  // none empty
                    next = r.end;
                }
                CHECK(next == tk);
                // Few heads and a long cache: splits fill the machine, each
                // at least kDecodeMinKeys keys (but one split when short).
                if (tk >= kDecodeMinKeys * 2 && bh * 2 < sms) CHECK(p.splits > 1);
                if (p.splits > 1) CHECK(p.split_len >= kDecodeMinKeys);
            }
}

TEST_CASE("attention model: the tensor-core order against f64 and the CPU kernel",
          "[attention][plan]") {
    for (bool causal : {false, true})
        for (double dropout : {0.0, 0.2}) {
            const int64_t b = 1, h = 2, tq = 75, tk = 140, d = 64;
            INFO((causal ? "causal" : "full") << " dropout " << dropout);
            const Tensor q = test::random_tensor({b, h, tq, d}, DType::bf16, 1),
                         k = test::random_tensor({b, h, tk, d}, DType::bf16, 2),
                         v = test::random_tensor({b, h, tk, d}, DType::bf16, 3),
                         g = test::random_tensor({b, h, tq, d}, DType::bf16, 4);
            kernels::AttentionArgs a;
            a.causal = causal;
            a.scale = 1.0 / std::sqrt(double(d));
            a.dropout_p = dropout;
            a.seed = 11;
            a.first_block = 3;
            const test::AttnModelIn in = test::model_input(q, k, v, g, a);
            test::AttnModelOut m = test::attention_tc_model_forward(in);
            // f64 reference on the same (rounded) inputs.
            const Tensor ref = kernels::attention_forward_composite(
                                   q.to(DType::f64), k.to(DType::f64), v.to(DType::f64), a)
                                   .out.contiguous();
            const std::vector<double> want = ref.to_vector<double>();
            double vmax = 0, worst_ref = 0, worst_cpu = 0;
            for (float x : in.v) vmax = std::max(vmax, double(std::abs(x)));
            const std::vector<float> cpu = test::model_floats(kernels::attention_forward(q, k, v, a).out);
            for (size_t i = 0; i < want.size(); ++i) {
                worst_ref = std::max(worst_ref, std::abs(double(m.out[i]) - want[i]));
                worst_cpu = std::max(worst_cpu, std::abs(double(m.out[i]) - cpu[i]));
            }
            // P rounded to bf16 (relative 2^-8 each, so at most 2^-8 of the
            // weighted mean of |v| — times 1/(1 − p) under dropout); f32 sums.
            const double keep = 1.0 / (1.0 - dropout);
            CHECK(worst_ref <= std::ldexp(1.0, -8) * keep * vmax);
            // ... and the rounding is there: the model is not the f64 result.
            CHECK(worst_ref > std::ldexp(1.0, -14) * vmax);
            // The expected difference between the fused CUDA kernel and the
            // CPU's (which keeps P in f32 and rounds out to bf16 once): P's
            // rounding plus half an ulp of bf16 of the output.
            CHECK(worst_cpu <= std::ldexp(1.0, -8) * keep * vmax + std::ldexp(1.0, -8) * vmax);
            // The lse has no rounded operand in it but the inputs: f32 sums only.
            const std::vector<float> lse_cpu = test::model_floats(kernels::attention_forward(q, k, v, a).lse);
            for (size_t i = 0; i < lse_cpu.size(); ++i)
                REQUIRE(std::abs(m.lse[i] - lse_cpu[i]) <= 1e-5 * (1 + std::abs(lse_cpu[i])));
            // Backward: dS and P rounded to bf16 before their products.
            std::vector<float> out_rounded(m.out.size());
            for (size_t i = 0; i < m.out.size(); ++i) out_rounded[i] = test::round_operand(m.out[i], true);
            test::attention_tc_model_backward(in, out_rounded, m.lse, m);
            const Tensor q64 = q.to(DType::f64), k64 = k.to(DType::f64), v64 = v.to(DType::f64);
            const kernels::AttentionForward f64 = kernels::attention_forward(q64, k64, v64, a);
            const kernels::AttentionGrads gr =
                kernels::attention_backward(g.to(DType::f64), q64, k64, v64, f64.out, f64.lse, a);
            const auto worst_rel = [](const std::vector<float>& got, const Tensor& want_t) {
                const std::vector<double> w = want_t.contiguous().to_vector<double>();
                double scale = 0, err = 0;
                for (double x : w) scale = std::max(scale, std::abs(x));
                for (size_t i = 0; i < w.size(); ++i) err = std::max(err, std::abs(got[i] - w[i]));
                return err / scale;
            };
            // Relative to the gradient's largest entry: a few bf16 roundings.
            CHECK(worst_rel(m.dq, gr.q) < 0.02);
            CHECK(worst_rel(m.dk, gr.k) < 0.02);
            CHECK(worst_rel(m.dv, gr.v) < 0.02);
        }
}

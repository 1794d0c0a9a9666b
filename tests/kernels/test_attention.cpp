// Attention kernels: the fused CPU kernel and the composite path against a
// naive f64 reference (forward, lse and every gradient), causal and not,
// sequence lengths off the tile size, T = 1, Tq != Tk, head dims 16 to 128,
// strided inputs, f16/bf16, dropout by the stream's rule, thread-count bit
// identity, memory O(T·D), and the errors.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/attention.h"
#include "kernels/random_math.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

struct Case {
    int64_t b, h, tq, tk, d, dv;
    bool causal;
    double dropout = 0;
};

// The naive f64 reference: S, P, out and lse per row; gradients from the
// full P. The dropout mask by AttentionArgs' rule, computed here on its own.
struct Reference {
    std::vector<double> out, lse, dq, dk, dv;
};

Reference reference(const Case& c, const std::vector<double>& q, const std::vector<double>& kk,
                    const std::vector<double>& v, const std::vector<double>& g,
                    const kernels::AttentionArgs& a) {
    Reference r;
    r.out.assign(size_t(c.b * c.h * c.tq * c.dv), 0);
    r.lse.assign(size_t(c.b * c.h * c.tq), 0);
    r.dq.assign(q.size(), 0);
    r.dk.assign(kk.size(), 0);
    r.dv.assign(v.size(), 0);
    for (int64_t bh = 0; bh < c.b * c.h; ++bh) {
        const double* Q = q.data() + bh * c.tq * c.d;
        const double* K = kk.data() + bh * c.tk * c.d;
        const double* V = v.data() + bh * c.tk * c.dv;
        const double* G = g.data() + bh * c.tq * c.dv;
        for (int64_t i = 0; i < c.tq; ++i) {
            std::vector<double> s(size_t(c.tk)), p(size_t(c.tk)), keep(size_t(c.tk), 1.0);
            double mx = -INFINITY;
            for (int64_t j = 0; j < c.tk; ++j) {
                double dot = 0;
                for (int64_t t = 0; t < c.d; ++t) dot += Q[i * c.d + t] * K[j * c.d + t];
                s[size_t(j)] = c.causal && j > i ? -INFINITY : a.scale * dot;
                mx = std::max(mx, s[size_t(j)]);
                if (c.dropout > 0) {
                    const int64_t idx = (bh * c.tq + i) * c.tk + j;
                    keep[size_t(j)] = double(math::uniform_at<float>(a.seed, a.first_block,
                                                                     idx)) >= c.dropout
                                          ? 1 / (1 - c.dropout)
                                          : 0.0;
                }
            }
            double sum = 0;
            for (int64_t j = 0; j < c.tk; ++j) sum += std::exp(s[size_t(j)] - mx);
            const double lse = mx + std::log(sum);
            r.lse[size_t(bh * c.tq + i)] = lse;
            for (int64_t j = 0; j < c.tk; ++j) p[size_t(j)] = std::exp(s[size_t(j)] - lse);
            double* O = r.out.data() + (bh * c.tq + i) * c.dv;
            for (int64_t j = 0; j < c.tk; ++j)
                for (int64_t t = 0; t < c.dv; ++t)
                    O[t] += p[size_t(j)] * keep[size_t(j)] * V[j * c.dv + t];
            // dP_j = keep_j · (g_i · V_j); dS_j = P_j (dP_j − Σ_l P_l dP_l).
            std::vector<double> dp(size_t(c.tk));
            double dsum = 0;
            for (int64_t j = 0; j < c.tk; ++j) {
                double dot = 0;
                for (int64_t t = 0; t < c.dv; ++t) dot += G[i * c.dv + t] * V[j * c.dv + t];
                dp[size_t(j)] = keep[size_t(j)] * dot;
                dsum += p[size_t(j)] * dp[size_t(j)];
            }
            for (int64_t j = 0; j < c.tk; ++j) {
                const double ds = p[size_t(j)] * (dp[size_t(j)] - dsum) * a.scale;
                for (int64_t t = 0; t < c.d; ++t) {
                    r.dq[size_t((bh * c.tq + i) * c.d + t)] += ds * K[j * c.d + t];
                    r.dk[size_t((bh * c.tk + j) * c.d + t)] += ds * Q[i * c.d + t];
                }
                for (int64_t t = 0; t < c.dv; ++t)
                    r.dv[size_t((bh * c.tk + j) * c.dv + t)] +=
                        p[size_t(j)] * keep[size_t(j)] * G[i * c.dv + t];
            }
        }
    }
    return r;
}

kernels::AttentionArgs args_of(const Case& c) {
    kernels::AttentionArgs a;
    a.causal = c.causal;
    a.scale = 1.0 / std::sqrt(double(c.d));
    a.dropout_p = c.dropout;
    a.seed = 1234;
    a.first_block = 77;
    return a;
}

struct Inputs {
    Tensor q, k, v, g;
};

Inputs inputs(const Case& c, DType dtype, uint64_t seed) {
    return {random_tensor({c.b, c.h, c.tq, c.d}, dtype, seed, -1.5, 1.5),
            random_tensor({c.b, c.h, c.tk, c.d}, dtype, seed + 1, -1.5, 1.5),
            random_tensor({c.b, c.h, c.tk, c.dv}, dtype, seed + 2, -1.5, 1.5),
            random_tensor({c.b, c.h, c.tq, c.dv}, dtype, seed + 3, -1.0, 1.0)};
}

// Forward and backward of one path against the reference.
template <class Fwd, class Bwd>
void check_path(const Case& c, DType dtype, Fwd fwd, Bwd bwd, double rtol, double atol) {
    const Inputs in = inputs(c, dtype, 11 + uint64_t(c.tq));
    const kernels::AttentionArgs a = args_of(c);
    const Reference ref = reference(c, values(in.q), values(in.k), values(in.v), values(in.g), a);
    const kernels::AttentionForward f = fwd(in.q, in.k, in.v, a);
    REQUIRE(f.out.shape() == Shape({c.b, c.h, c.tq, c.dv}));
    REQUIRE(f.out.dtype() == dtype);
    check_close(f.out, ref.out, rtol, atol);
    check_close(f.lse, ref.lse, rtol, atol);
    const kernels::AttentionGrads gr = bwd(in.g, in.q, in.k, in.v, f.out, f.lse, a);
    REQUIRE(gr.q.shape() == in.q.shape());
    REQUIRE(gr.k.shape() == in.k.shape());
    REQUIRE(gr.v.shape() == in.v.shape());
    check_close(gr.q, ref.dq, rtol, atol);
    check_close(gr.k, ref.dk, rtol, atol);
    check_close(gr.v, ref.dv, rtol, atol);
}

const auto fused_fwd = [](const Tensor& q, const Tensor& kk, const Tensor& v,
                          const kernels::AttentionArgs& a) {
    return kernels::attention_forward(q, kk, v, a);
};
const auto fused_bwd = [](const Tensor& g, const Tensor& q, const Tensor& kk, const Tensor& v,
                          const Tensor& o, const Tensor& l, const kernels::AttentionArgs& a) {
    return kernels::attention_backward(g, q, kk, v, o, l, a);
};
const auto composite_fwd = [](const Tensor& q, const Tensor& kk, const Tensor& v,
                              const kernels::AttentionArgs& a) {
    return kernels::attention_forward_composite(q, kk, v, a);
};
const auto composite_bwd = [](const Tensor& g, const Tensor& q, const Tensor& kk, const Tensor& v,
                              const Tensor& o, const Tensor& l, const kernels::AttentionArgs& a) {
    return kernels::attention_backward_composite(g, q, kk, v, o, l, a);
};

bool same_bytes(const Tensor& a, const Tensor& b) {
    const Tensor x = a.contiguous(), y = b.contiguous();
    return x.shape() == y.shape() &&
           std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel() * x.element_size())) == 0;
}

}  // namespace

TEST_CASE("attention: fused CPU kernel and composite path against an f64 reference",
          "[kernels][attention]") {
    const std::vector<Case> cases = {
        {2, 3, 70, 70, 16, 16, true},     // past one 64-row tile, causal
        {2, 3, 70, 70, 16, 16, false},
        {1, 2, 1, 1, 32, 32, true},       // T = 1
        {1, 2, 1, 45, 32, 32, false},     // one query, many keys (a decode step)
        {1, 1, 130, 5, 64, 48, true},     // Tq > Tk: rows past Tk see every key; Dv != D
        {1, 1, 5, 130, 64, 64, true},     // Tq < Tk, top-left causal alignment
        {1, 2, 129, 129, 128, 128, true},
        {2, 2, 64, 64, 20, 24, false},    // head dims off the vector width
    };
    for (const Case& c : cases) {
        INFO("B " << c.b << " H " << c.h << " Tq " << c.tq << " Tk " << c.tk << " D " << c.d
                  << " Dv " << c.dv << (c.causal ? " causal" : ""));
        check_path(c, DType::f64, fused_fwd, fused_bwd, 1e-11, 1e-12);
        check_path(c, DType::f32, fused_fwd, fused_bwd, 2e-4, 2e-5);
        check_path(c, DType::f64, composite_fwd, composite_bwd, 1e-11, 1e-12);
        check_path(c, DType::f32, composite_fwd, composite_bwd, 2e-4, 2e-5);
    }
}

TEST_CASE("attention: dropout drops the entries the stream says, on both paths",
          "[kernels][attention]") {
    for (const Case& c : {Case{1, 2, 70, 70, 16, 16, true, 0.3}, Case{2, 1, 9, 33, 32, 32, false, 0.5}}) {
        check_path(c, DType::f64, fused_fwd, fused_bwd, 1e-11, 1e-12);
        check_path(c, DType::f64, composite_fwd, composite_bwd, 1e-11, 1e-12);
        // Another seed draws another mask.
        const Inputs in = inputs(c, DType::f64, 5);
        kernels::AttentionArgs a = args_of(c), b = a;
        b.seed += 1;
        CHECK_FALSE(same_bytes(kernels::attention_forward(in.q, in.k, in.v, a).out,
                               kernels::attention_forward(in.q, in.k, in.v, b).out));
        CHECK(same_bytes(kernels::attention_forward(in.q, in.k, in.v, a).out,
                         kernels::attention_forward(in.q, in.k, in.v, a).out));
    }
    CHECK(kernels::attention_dropout_blocks(2, 3, 5, 7) == (2 * 3 * 5 * 7 + 3) / 4);
}

TEST_CASE("attention: strided q, k, v (heads of one packed projection) read as they lie",
          "[kernels][attention]") {
    // qkv [B, T, 3, H, D] as one buffer; q, k, v are [B, H, T, D] views of it.
    const int64_t B = 2, T = 67, H = 3, D = 16;
    const Tensor qkv = random_tensor({B, T, 3, H, D}, DType::f32, 3);
    auto part = [&](int64_t i) { return qkv.select(2, i).permute({0, 2, 1, 3}); };
    const Tensor q = part(0), kk = part(1), v = part(2);
    REQUIRE_FALSE(q.is_contiguous());
    const kernels::AttentionArgs a = args_of({B, H, T, T, D, D, true});
    const kernels::AttentionForward f = kernels::attention_forward(q, kk, v, a);
    const kernels::AttentionForward g =
        kernels::attention_forward(q.contiguous(), kk.contiguous(), v.contiguous(), a);
    CHECK(same_bytes(f.out, g.out));
    CHECK(same_bytes(f.lse, g.lse));
    // The output is [B, Tq, H, Dv] memory: its transpose is contiguous.
    CHECK(f.out.transpose(1, 2).is_contiguous());
    // Gradients written into views of one [B, T, 3, H, D] buffer.
    const Tensor go = random_tensor({B, H, T, D}, DType::f32, 4);
    Tensor dqkv = full({B, T, 3, H, D}, 7.0);
    auto dpart = [&](int64_t i) { return dqkv.select(2, i).permute({0, 2, 1, 3}); };
    const kernels::AttentionGrads into{dpart(0), dpart(1), dpart(2)};
    kernels::attention_backward(go, q, kk, v, f.out, f.lse, a, &into);
    const kernels::AttentionGrads plain =
        kernels::attention_backward(go, q, kk, v, f.out, f.lse, a);
    CHECK(same_bytes(dpart(0), plain.q));
    CHECK(same_bytes(dpart(1), plain.k));
    CHECK(same_bytes(dpart(2), plain.v));
}

TEST_CASE("attention: f16 and bf16 inputs computed in f32", "[kernels][attention]") {
    const Case c{1, 2, 70, 70, 32, 32, true};
    for (DType dt : {DType::f16, DType::bf16}) {
        INFO(dtype_name(dt));
        const Inputs in = inputs(c, dt, 9);
        const kernels::AttentionArgs a = args_of(c);
        // The reference of the rounded inputs, in f64.
        const Reference ref = reference(c, values(in.q), values(in.k), values(in.v), values(in.g), a);
        const kernels::AttentionForward f = kernels::attention_forward(in.q, in.k, in.v, a);
        CHECK(f.out.dtype() == dt);
        CHECK(f.lse.dtype() == DType::f32);
        // One rounding of the output to the dtype (and f32 accumulation).
        const double tol = dt == DType::bf16 ? 8e-3 : 1e-3;
        check_close(f.out, ref.out, tol, tol);
        check_close(f.lse, ref.lse, 1e-5, 1e-5);
        const kernels::AttentionGrads g =
            kernels::attention_backward(in.g, in.q, in.k, in.v, f.out, f.lse, a);
        check_close(g.v, ref.dv, 2 * tol, 2 * tol);
        check_close(g.q, ref.dq, 4 * tol, 4 * tol);
    }
}

TEST_CASE("attention: the fused kernel gives the same bits for any thread count",
          "[kernels][attention]") {
    const Case c{2, 3, 150, 150, 32, 32, true};
    const Inputs in = inputs(c, DType::f32, 21);
    const kernels::AttentionArgs a = args_of(c);
    const int before = omp_get_max_threads();
    std::vector<kernels::AttentionForward> fw;
    std::vector<kernels::AttentionGrads> bw;
    for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        fw.push_back(kernels::attention_forward(in.q, in.k, in.v, a));
        bw.push_back(
            kernels::attention_backward(in.g, in.q, in.k, in.v, fw.back().out, fw.back().lse, a));
    }
    omp_set_num_threads(before);
    for (size_t i = 1; i < fw.size(); ++i) {
        CHECK(same_bytes(fw[i].out, fw[0].out));
        CHECK(same_bytes(fw[i].lse, fw[0].lse));
        CHECK(same_bytes(bw[i].q, bw[0].q));
        CHECK(same_bytes(bw[i].k, bw[0].k));
        CHECK(same_bytes(bw[i].v, bw[0].v));
    }
}

TEST_CASE("attention: a causal T = 4096 forward and backward hold O(T·D) bytes, not O(T²)",
          "[kernels][attention]") {
    const int64_t T = 4096, D = 64;
    const Case c{1, 1, T, T, D, D, true};
    const Inputs in = inputs(c, DType::f32, 31);
    const kernels::AttentionArgs a = args_of(c);
    const size_t operand = size_t(T * D) * sizeof(float);  // 1 MiB
    reset_peak_memory_stats();
    const size_t before = memory_stats().allocated_bytes;
    const kernels::AttentionForward f = kernels::attention_forward(in.q, in.k, in.v, a);
    const kernels::AttentionGrads g =
        kernels::attention_backward(in.g, in.q, in.k, in.v, f.out, f.lse, a);
    const size_t peak = memory_stats().peak_allocated_bytes - before;
    INFO("peak " << peak << " bytes; one [T, D] operand is " << operand);
    // out, lse and three gradients: about 4 operands. One f32 [T, T] matrix is 64 MiB.
    CHECK(peak <= 5 * operand);
    CHECK(peak >= 4 * operand);
    // The composite path materializes the scores: more than T² floats.
    reset_peak_memory_stats();
    const size_t before2 = memory_stats().allocated_bytes;
    kernels::attention_forward_composite(in.q, in.k, in.v, a);
    CHECK(memory_stats().peak_allocated_bytes - before2 > size_t(T * T) * sizeof(float));
    // A sampled row of the fused result against the f64 reference of that row.
    const std::vector<double> lse = values(f.lse);
    CHECK(std::isfinite(lse[size_t(T - 1)]));
    CHECK(g.q.numel() == T * D);
}

TEST_CASE("attention: bad arguments are errors naming the op and the shapes", "[kernels][attention]") {
    const Tensor q = randn({1, 2, 5, 8}), kk = randn({1, 2, 6, 8}), v = randn({1, 2, 6, 4});
    const kernels::AttentionArgs a;
    REQUIRE_THROWS_WITH_MSG(
        kernels::attention_forward(q, randn({1, 2, 6, 7}), v, a),
        "attention_forward: q [1, 2, 5, 8], k [1, 2, 6, 7] and v [1, 2, 6, 4] do not fit");
    REQUIRE_THROWS_WITH_MSG(kernels::attention_forward(randn({2, 5, 8}), kk, v, a),
                            "expected [B, H, T, D] tensors");
    REQUIRE_THROWS_WITH_MSG(kernels::attention_forward(q, kk.to(DType::f64), v, a), "one dtype");
    REQUIRE_THROWS_WITH_MSG(
        kernels::attention_forward(q.to(DType::i64), kk.to(DType::i64), v.to(DType::i64), a),
        "floating");
    kernels::AttentionArgs bad;
    bad.dropout_p = 1.0;
    REQUIRE_THROWS_WITH_MSG(kernels::attention_forward(q, kk, v, bad),
                            "dropout_p must be in [0, 1)");
    bad.dropout_p = std::nan("");
    REQUIRE_THROWS_WITH_MSG(kernels::attention_forward(q, kk, v, bad),
                            "dropout_p must be in [0, 1)");
    const kernels::AttentionForward f = kernels::attention_forward(q, kk, v, a);
    REQUIRE_THROWS_WITH_MSG(
        kernels::attention_backward(randn({1, 2, 5, 5}), q, kk, v, f.out, f.lse, a),
        "attention_backward: grad_out f32 [1, 2, 5, 5]");
    REQUIRE_THROWS_WITH_MSG(kernels::attention_backward(randn({1, 2, 5, 4}), q, kk, v, f.out,
                                                        randn({1, 2, 5}).to(DType::f64), a),
                            "is not the forward's");
}

// ember's f32 GEMM (kernels/cpu/gemm.cpp) against an f64 reference: shapes
// off the 6 × 64 tile and the 512-deep k-blocks, every layout of a and b,
// leading dimensions past the matrix, accumulation, K = 0; the same bits for
// any thread count.
#include <catch2/catch.hpp>

#include <omp.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"

using namespace ember;
using namespace ember::kernels;

namespace {

struct Operand {
    std::vector<float> data;
    MatrixLayout layout;
    int64_t rows, cols;
    float at(int64_t r, int64_t c) const {
        return layout.row_major ? data[size_t(r * layout.ld + c)] : data[size_t(c * layout.ld + r)];
    }
};

// A rows × cols matrix of seeded values in [-1, 1), laid out row- or
// column-major with `pad` unused elements after each row or column.
Operand make(int64_t rows, int64_t cols, bool row_major, int64_t pad, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1, 1);
    Operand o{{}, {row_major, (row_major ? cols : rows) + pad}, rows, cols};
    o.data.resize(size_t(o.layout.ld * (row_major ? rows : cols) + 1));
    for (float& x : o.data) x = u(rng);
    return o;
}

}  // namespace

TEST_CASE("gemm_f32: every layout and edge against an f64 reference", "[kernels][gemm]") {
    std::mt19937 rng(42);
    const int64_t shapes[][3] = {{1, 1, 1},    {5, 63, 7},     {6, 64, 256},  {13, 65, 257},
                                 {97, 130, 300}, {200, 17, 600}, {7, 200, 513}, {64, 129, 1}};
    for (const auto& [m, n, k] : shapes)
        for (int layouts = 0; layouts < 4; ++layouts)
            for (bool accumulate : {false, true}) {
                const bool ra = layouts & 1, rb = layouts & 2;
                INFO("m " << m << " n " << n << " k " << k << " a " << (ra ? "row" : "col")
                          << "-major, b " << (rb ? "row" : "col") << "-major"
                          << (accumulate ? ", accumulating" : ""));
                const Operand a = make(m, k, ra, 3, rng), b = make(k, n, rb, 5, rng);
                const int64_t ldc = n + 2;
                std::vector<float> c(size_t(m * ldc));
                for (float& x : c) x = float(rng() % 7) - 3;
                const std::vector<float> before = c;
                cpu::gemm_f32(m, n, k, a.data.data(), a.layout, b.data.data(), b.layout, c.data(),
                              ldc, accumulate);
                double worst = 0;
                for (int64_t i = 0; i < m; ++i) {
                    for (int64_t j = 0; j < n; ++j) {
                        double want = accumulate ? before[size_t(i * ldc + j)] : 0.0;
                        double mag = std::abs(want);
                        for (int64_t t = 0; t < k; ++t) {
                            want += double(a.at(i, t)) * double(b.at(t, j));
                            mag += std::abs(double(a.at(i, t)) * double(b.at(t, j)));
                        }
                        // f32 accumulation: within K ulps of the sum of magnitudes.
                        const double err = std::abs(double(c[size_t(i * ldc + j)]) - want);
                        REQUIRE(err <= 1e-7 * double(k + 2) * (mag + 1));
                        worst = std::max(worst, err);
                    }
                    for (int64_t j = n; j < ldc; ++j)  // past each row: untouched
                        REQUIRE(c[size_t(i * ldc + j)] == before[size_t(i * ldc + j)]);
                }
            }
}

TEST_CASE("gemm_f32: K = 0 writes zeros, or leaves c alone when accumulating", "[kernels][gemm]") {
    std::vector<float> c(12, 5.0f);
    const float dummy = 0;
    cpu::gemm_f32(3, 4, 0, &dummy, {true, 0}, &dummy, {true, 4}, c.data(), 4, true);
    CHECK(c == std::vector<float>(12, 5.0f));
    cpu::gemm_f32(3, 4, 0, &dummy, {true, 0}, &dummy, {true, 4}, c.data(), 4, false);
    CHECK(c == std::vector<float>(12, 0.0f));
}

TEST_CASE("gemm_f32: the same bits for any thread count", "[kernels][gemm]") {
    std::mt19937 rng(7);
    const Operand a = make(301, 600, true, 0, rng), b = make(600, 190, false, 0, rng);
    std::vector<std::vector<float>> out;
    const int before = omp_get_max_threads();
    for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        std::vector<float> c(301 * 190);
        cpu::gemm_f32(301, 190, 600, a.data.data(), a.layout, b.data.data(), b.layout, c.data(),
                      190, false);
        out.push_back(c);
    }
    omp_set_num_threads(before);
    CHECK(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4) == 0);
    CHECK(std::memcmp(out[0].data(), out[2].data(), out[0].size() * 4) == 0);
}

TEST_CASE("gemm_f32: the epilogue's bias and activations, and a's row sums", "[kernels][gemm]") {
    std::mt19937 rng(11);
    for (const auto& [m, n, k] : {std::array<int64_t, 3>{7, 130, 300}, {2, 300, 40}, {130, 70, 5}})
        for (bool ra : {false, true})
            for (LinearActivation act :
                 {LinearActivation::none, LinearActivation::relu, LinearActivation::gelu_tanh}) {
                INFO("m " << m << " n " << n << " k " << k << (ra ? " row" : " col") << "-major a, act "
                          << int(act));
                const Operand a = make(m, k, ra, 2, rng), b = make(k, n, true, 1, rng);
                std::vector<float> bias(static_cast<size_t>(n)), c(static_cast<size_t>(m * n)),
                    pre(static_cast<size_t>(m * (n + 3)));
                for (float& x : bias) x = float(int(rng() % 9) - 4) / 4;
                std::vector<double> sums(static_cast<size_t>(m), -1.0);
                cpu::GemmEpilogue ep;
                ep.bias = bias.data();
                ep.act = act;
                ep.pre = act == LinearActivation::gelu_tanh ? pre.data() : nullptr;
                ep.ld_pre = n + 3;
                ep.a_row_sums = sums.data();
                cpu::gemm_f32(m, n, k, a.data.data(), a.layout, b.data.data(), b.layout, c.data(), n,
                              false, &ep);
                for (int64_t i = 0; i < m; ++i) {
                    double row = 0;
                    for (int64_t t = 0; t < k; ++t) row += a.at(i, t);
                    REQUIRE(std::abs(sums[size_t(i)] - row) <= 1e-12 * double(k));
                    for (int64_t j = 0; j < n; ++j) {
                        double z = bias[size_t(j)];
                        for (int64_t t = 0; t < k; ++t) z += double(a.at(i, t)) * double(b.at(t, j));
                        const double want = act == LinearActivation::relu ? std::max(z, 0.0)
                                            : act == LinearActivation::gelu_tanh
                                                ? 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)))
                                                : z;
                        REQUIRE(std::abs(double(c[size_t(i * n + j)]) - want) <= 1e-5 * (1 + std::abs(want)) + 1e-7 * double(k));
                        if (ep.pre) REQUIRE(std::abs(double(pre[size_t(i * (n + 3) + j)]) - z) <= 1e-5 * (1 + std::abs(z)));
                    }
                }
            }
}

// ember's bf16 GEMM (kernels/cpu/gemm_bf16.cpp) against an f64 reference of
// the bf16-rounded operands: shapes off the 6 × 64 tile and the 1024-deep
// k-blocks, odd K, every layout and operand dtype, f32 and bf16 results,
// accumulation, the epilogue; the native tile against its emulation; the
// same bits for any thread count.
#include <omp.h>

#include <array>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/settings.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/math.h"

using namespace ember;
using namespace ember::kernels;

namespace {

// A rows × cols matrix of seeded values in [-1, 1), stored as f32 or bf16,
// row- or column-major with `pad` unused elements after each row or column.
struct Matrix {
    std::vector<float> f32;
    std::vector<BFloat16> bf16;
    DType dtype;
    MatrixLayout layout;
    double at(int64_t r, int64_t c) const {  // the value the GEMM multiplies: bf16-rounded
        const size_t i = size_t(layout.row_major ? r * layout.ld + c : c * layout.ld + r);
        return dtype == DType::f32 ? double(float(BFloat16(f32[i]))) : double(float(bf16[i]));
    }
    double given(int64_t r, int64_t c) const {  // the value as stored
        const size_t i = size_t(layout.row_major ? r * layout.ld + c : c * layout.ld + r);
        return dtype == DType::f32 ? double(f32[i]) : double(float(bf16[i]));
    }
    cpu::Bf16Operand operand() const {
        return {dtype == DType::f32 ? static_cast<const void*>(f32.data()) : bf16.data(), dtype,
                layout};
    }
};

Matrix make(int64_t rows, int64_t cols, bool row_major, int64_t pad, DType dt, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1, 1);
    Matrix o{{}, {}, dt, {row_major, (row_major ? cols : rows) + pad}};
    const size_t n = size_t(o.layout.ld * (row_major ? rows : cols) + 1);
    if (dt == DType::f32)
        for (size_t i = 0; i < n; ++i) o.f32.push_back(u(rng));
    else
        for (size_t i = 0; i < n; ++i) o.bf16.push_back(BFloat16(u(rng)));
    return o;
}

// c of m × ldc elements in f32 or bf16, seeded with small integers.
struct Out {
    std::vector<float> f32;
    std::vector<BFloat16> bf16;
    DType dtype;
    Out(DType dt, size_t n, std::mt19937& rng) : dtype(dt) {
        for (size_t i = 0; i < n; ++i) {
            const float v = float(rng() % 7) - 3;
            if (dt == DType::f32)
                f32.push_back(v);
            else
                bf16.push_back(BFloat16(v));
        }
    }
    void* data() { return dtype == DType::f32 ? static_cast<void*>(f32.data()) : bf16.data(); }
    double at(size_t i) const { return dtype == DType::f32 ? f32[i] : double(float(bf16[i])); }
    bool same_bits(const Out& o) const {
        return dtype == DType::f32 ? std::memcmp(f32.data(), o.f32.data(), f32.size() * 4) == 0
                                   : std::memcmp(bf16.data(), o.bf16.data(), bf16.size() * 2) == 0;
    }
};

// Sets how bf16 is multiplied for the scope, restoring it after.
struct Bf16Mode {
    CpuBf16 saved = cpu_bf16();
    explicit Bf16Mode(CpuBf16 mode) { set_cpu_bf16(mode); }
    ~Bf16Mode() { set_cpu_bf16(saved); }
};

std::vector<CpuBf16> modes() {
    if (cpu_has_avx512_bf16()) return {CpuBf16::native, CpuBf16::emulated};
    WARN("this CPU lacks AVX512_BF16: only the emulated tile is tested");
    return {CpuBf16::emulated};
}

}  // namespace

TEST_CASE("gemm_bf16: every layout, dtype and edge against an f64 reference", "[kernels][gemm]") {
    std::mt19937 rng(42);
    // {200, 10, 300} and {64, 3, 33}: narrow, computed transposed; {70, 12,
    // 1100}: narrow past one k-block, computed as it is.
    const int64_t shapes[][3] = {{1, 1, 1},      {5, 63, 7},     {6, 64, 256},   {13, 65, 257},
                                 {97, 130, 300}, {200, 17, 600}, {7, 200, 1025}, {64, 129, 2},
                                 {200, 10, 300}, {64, 3, 33},    {70, 12, 1100}};
    for (CpuBf16 mode : modes()) {
        const Bf16Mode scope(mode);
        for (const auto& [m, n, k] : shapes)
            for (int variant = 0; variant < 32; ++variant) {
                const bool ra = variant & 1, rb = variant & 2, accumulate = variant & 16;
                const DType da = variant & 4 ? DType::bf16 : DType::f32;
                const DType db = variant & 8 ? DType::bf16 : DType::f32;
                for (DType dc : {DType::f32, DType::bf16}) {
                    INFO("m " << m << " n " << n << " k " << k << " a " << (ra ? "row" : "col")
                              << "-major " << dtype_name(da) << ", b " << (rb ? "row" : "col")
                              << "-major " << dtype_name(db) << ", c " << dtype_name(dc)
                              << (accumulate ? ", accumulating" : "") << ", "
                              << (mode == CpuBf16::native ? "native" : "emulated"));
                    const Matrix a = make(m, k, ra, 3, da, rng), b = make(k, n, rb, 5, db, rng);
                    const int64_t ldc = n + 2;
                    Out c(dc, size_t(m * ldc), rng);
                    const Out before = c;
                    cpu::gemm_bf16(m, n, k, a.operand(), b.operand(), c.data(), dc, ldc,
                                   accumulate);
                    for (int64_t i = 0; i < m; ++i) {
                        for (int64_t j = 0; j < n; ++j) {
                            double want = accumulate ? before.at(size_t(i * ldc + j)) : 0.0;
                            double mag = std::abs(want);
                            for (int64_t t = 0; t < k; ++t) {
                                want += a.at(i, t) * b.at(t, j);
                                mag += std::abs(a.at(i, t) * b.at(t, j));
                            }
                            // f32 sums: within K + 2 roundings of the sum of
                            // magnitudes; a bf16 c adds its one rounding.
                            const double err = std::abs(c.at(size_t(i * ldc + j)) - want);
                            const double bound =
                                6e-8 * double(k + 2) * (mag + 1) +
                                (dc == DType::bf16 ? std::ldexp(std::abs(want), -8) : 0);
                            REQUIRE(err <= bound);
                        }
                        for (int64_t j = n; j < ldc; ++j)  // past each row: untouched
                            REQUIRE(c.at(size_t(i * ldc + j)) == before.at(size_t(i * ldc + j)));
                    }
                }
            }
    }
}

TEST_CASE("gemm_bf16: VDPBF16PS and its f32 emulation give the same bits", "[kernels][gemm]") {
    if (!cpu_has_avx512_bf16()) {
        WARN("this CPU lacks AVX512_BF16: nothing to compare the emulation with");
        return;
    }
    std::mt19937 rng(3);
    for (const auto& [m, n, k] : {std::array<int64_t, 3>{37, 150, 1100}, {6, 64, 3}, {100, 9, 77}})
        for (DType dc : {DType::f32, DType::bf16})
            for (bool accumulate : {false, true}) {  // bf16, not accumulating: c from the registers
                INFO("m " << m << " n " << n << " k " << k << " c " << dtype_name(dc)
                          << (accumulate ? ", accumulating" : ""));
                const Matrix a = make(m, k, true, 0, DType::bf16, rng),
                             b = make(k, n, false, 1, DType::f32, rng);
                Out native(dc, size_t(m * n), rng), emulated = native;
                {
                    const Bf16Mode scope(CpuBf16::native);
                    cpu::gemm_bf16(m, n, k, a.operand(), b.operand(), native.data(), dc, n,
                                   accumulate);
                }
                {
                    const Bf16Mode scope(CpuBf16::emulated);
                    cpu::gemm_bf16(m, n, k, a.operand(), b.operand(), emulated.data(), dc, n,
                                   accumulate);
                }
                CHECK(native.same_bits(emulated));
            }
}

TEST_CASE("gemm_bf16: the sums are bf16 products, not f32 ones", "[kernels][gemm]") {
    // a = 1 + 2^-10 is not a bf16 (7 mantissa bits): read as 1.
    const int64_t k = 8;
    const std::vector<float> a(k, 1.0f + 1.0f / 1024), b(k, 1.0f);
    float c = 0;
    cpu::gemm_bf16(1, 1, k, {a.data(), DType::f32, {true, k}}, {b.data(), DType::f32, {true, 1}},
                   &c, DType::f32, 1, false);
    CHECK(c == float(k));
}

TEST_CASE("gemm_bf16: subnormal operands read as zero, NaN and inf propagate", "[kernels][gemm]") {
    for (CpuBf16 mode : modes())
        for (bool row_major : {true, false}) {  // a column-major a packs eight rows at a time
            INFO((mode == CpuBf16::native ? "native" : "emulated")
                 << ", a " << (row_major ? "row" : "column") << "-major");
            const Bf16Mode scope(mode);
            const int64_t m = 16, n = 70, k = 9;
            std::mt19937 rng(5);
            Matrix a = make(m, k, row_major, 0, DType::bf16, rng),
                   b = make(k, n, true, 0, DType::bf16, rng);
            Matrix zeroed = a;
            auto put = [&](int64_t r, int64_t c, BFloat16 v, BFloat16 z) {
                const size_t i = size_t(row_major ? r * a.layout.ld + c : c * a.layout.ld + r);
                a.bf16[i] = v;
                zeroed.bf16[i] = z;
            };
            // Rows 0, 7 and 13: a subnormal and zeros, so that a subnormal
            // product would show in the sum.
            for (int64_t r : {0, 7, 13}) {
                for (int64_t t = 0; t < k; ++t) put(r, t, BFloat16(0.0f), BFloat16(0.0f));
                put(r, 2, BFloat16::from_bits(0x0005), BFloat16(0.0f));
            }
            for (int64_t r : {1, 8}) put(r, 3, BFloat16::from_bits(0x8041), BFloat16(-0.0f));
            put(2, 4, BFloat16(std::nanf("")), BFloat16(std::nanf("")));
            put(3, 0, BFloat16(INFINITY), BFloat16(INFINITY));
            std::vector<float> c(size_t(m * n)), d(size_t(m * n));
            cpu::gemm_bf16(m, n, k, a.operand(), b.operand(), c.data(), DType::f32, n, false);
            cpu::gemm_bf16(m, n, k, zeroed.operand(), b.operand(), d.data(), DType::f32, n, false);
            for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                    const float x = c[size_t(i * n + j)];
                    if (i == 2)
                        CHECK(std::isnan(x));
                    else if (i == 3)
                        CHECK((std::isinf(x) || std::isnan(x)));
                    else
                        CHECK(x == d[size_t(i * n + j)]);
                }
        }
}

TEST_CASE("gemm_bf16: a column-major b's subnormals read as zero, block-transposed or not",
          "[kernels][gemm]") {
    // b [40, 20] column-major, zero but for subnormals: 16 × 16 blocks of its
    // pairs go through transposes, the rest element by element; a subnormal
    // in each part, even and odd k.
    for (CpuBf16 mode : modes()) {
        const Bf16Mode scope(mode);
        const int64_t m = 6, n = 20, k = 40;
        std::vector<BFloat16> a(size_t(m * k), BFloat16(1.0f)), b(size_t(n * k), BFloat16(0.0f));
        for (const auto& [kk, j] : {std::pair<int64_t, int64_t>{3, 5}, {4, 15}, {33, 2}, {7, 18}})
            b[size_t(j * k + kk)] = BFloat16::from_bits(kk % 2 ? 0x0003 : 0x8041);
        std::vector<float> c(size_t(m * n));
        cpu::gemm_bf16(m, n, k, {a.data(), DType::bf16, {true, k}},
                       {b.data(), DType::bf16, {false, k}}, c.data(), DType::f32, n, false);
        for (float x : c) CHECK(x == 0.0f);  // a subnormal product would show: nothing else adds
    }
}

TEST_CASE("gemm_bf16: K = 0 writes zeros, or leaves c alone when accumulating", "[kernels][gemm]") {
    std::vector<BFloat16> c(12, BFloat16(5.0f));
    const float dummy = 0;
    const cpu::Bf16Operand none{&dummy, DType::f32, {true, 0}};
    cpu::gemm_bf16(3, 4, 0, none, none, c.data(), DType::bf16, 4, true);
    for (BFloat16 x : c) CHECK(float(x) == 5.0f);
    cpu::gemm_bf16(3, 4, 0, none, none, c.data(), DType::bf16, 4, false);
    for (BFloat16 x : c) CHECK(float(x) == 0.0f);
}

TEST_CASE("gemm_bf16: the same bits for any thread count", "[kernels][gemm]") {
    std::mt19937 rng(7);
    const Matrix a = make(301, 1100, true, 0, DType::bf16, rng),
                 b = make(1100, 190, false, 0, DType::bf16, rng);
    for (DType dc : {DType::f32, DType::bf16}) {
        std::vector<Out> out;
        const int before = omp_get_max_threads();
        for (int threads : {1, 2, 3}) {
            omp_set_num_threads(threads);
            Out c(dc, 301 * 190, rng);
            cpu::gemm_bf16(301, 190, 1100, a.operand(), b.operand(), c.data(), dc, 190, false);
            out.push_back(c);
        }
        omp_set_num_threads(before);
        CHECK(out[0].same_bits(out[1]));
        CHECK(out[0].same_bits(out[2]));
    }
}

TEST_CASE("gemm_bf16: a weight gradient's product and row sums, the same bits for any thread count",
          "[kernels][gemm]") {
    // gᵀ · x with Σ g by rows, as linear_weight_grad asks: a column-major,
    // an edge panel of 8 columns; 2 and 3 threads split it by rows or by
    // column panels (kernels/cpu/gemm_blocks.h), 1 thread not at all.
    std::mt19937 rng(19);
    const int64_t m = 200, n = 200, k = 256;
    Matrix a = make(m, k, false, 0, DType::bf16, rng);
    const Matrix b = make(k, n, true, 0, DType::bf16, rng);
    // Magnitudes from 2^-30 to 2^30: the f64 sums round, so their order shows.
    for (BFloat16& x : a.bf16) x = BFloat16(std::ldexp(float(x), int(rng() % 61) - 30));
    std::vector<float> bias(static_cast<size_t>(n));
    for (float& x : bias) x = float(int(rng() % 9) - 4) / 4;
    std::vector<Out> out;
    std::vector<std::vector<double>> sums;
    const int before = omp_get_max_threads();
    for (int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        Out c(DType::bf16, size_t(m * n), rng);
        sums.emplace_back(size_t(m), -1.0);
        const cpu::GemmEpilogue ep{.bias = bias.data(),
                                   .act = LinearActivation::relu,
                                   .a_row_sums = sums.back().data()};
        cpu::gemm_bf16(m, n, k, a.operand(), b.operand(), c.data(), DType::bf16, n, false, &ep);
        out.push_back(c);
    }
    omp_set_num_threads(before);
    CHECK(out[0].same_bits(out[1]));
    CHECK(out[0].same_bits(out[2]));
    CHECK(std::memcmp(sums[0].data(), sums[1].data(), size_t(m) * sizeof(double)) == 0);
    CHECK(std::memcmp(sums[0].data(), sums[2].data(), size_t(m) * sizeof(double)) == 0);
    for (int64_t i = 0; i < m; ++i) {  // each row's values, the even k's and the odd k's apart
        double even = 0, odd = 0;
        for (int64_t t = 0; t < k; t += 2) {
            even += a.given(i, t);
            odd += a.given(i, t + 1);
        }
        REQUIRE(sums[0][size_t(i)] == even + odd);
    }
}

TEST_CASE("gemm_bf16: the epilogue gives the plain path's bits, and a's row sums",
          "[kernels][gemm]") {
    std::mt19937 rng(11);
    for (CpuBf16 mode : modes())
        for (const auto& [m, n, k] :
             {std::array<int64_t, 3>{7, 130, 300}, {2, 300, 40}, {130, 70, 600}, {256, 10, 256}})
            for (bool ra : {false, true})
                for (DType dc : {DType::f32, DType::bf16})
                    for (LinearActivation act : {LinearActivation::none, LinearActivation::relu,
                                                 LinearActivation::gelu_tanh}) {
                        INFO("m " << m << " n " << n << " k " << k << (ra ? " row" : " col")
                                  << "-major a, c " << dtype_name(dc) << ", act " << int(act)
                                  << ", " << (mode == CpuBf16::native ? "native" : "emulated"));
                        const Bf16Mode scope(mode);
                        const Matrix a = make(m, k, ra, 2, DType::bf16, rng),
                                     b = make(k, n, false, 1, DType::bf16, rng);
                        std::vector<float> bias(static_cast<size_t>(n));
                        for (float& x : bias) x = float(int(rng() % 9) - 4) / 4;  // exact in bf16
                        // Plain: the bias copied into c, the product accumulated
                        // onto it, the activation of c's values.
                        Out plain(dc, size_t(m * n), rng), fused = plain;
                        for (int64_t i = 0; i < m; ++i)
                            for (int64_t j = 0; j < n; ++j) {
                                const size_t e = size_t(i * n + j);
                                if (dc == DType::f32)
                                    plain.f32[e] = bias[size_t(j)];
                                else
                                    plain.bf16[e] = BFloat16(bias[size_t(j)]);
                            }
                        cpu::gemm_bf16(m, n, k, a.operand(), b.operand(), plain.data(), dc, n,
                                       true);
                        Out pre_plain = plain;
                        for (size_t e = 0; e < size_t(m * n); ++e) {
                            const float v = float(plain.at(e));
                            const float y = act == LinearActivation::relu ? math::Relu{}(v)
                                            : act == LinearActivation::gelu_tanh
                                                ? math::GeluTanh{}(v)
                                                : v;
                            if (dc == DType::f32)
                                plain.f32[e] = y;
                            else
                                plain.bf16[e] = BFloat16(y);
                        }
                        Out pre(dc, size_t(m * (n + 3)), rng);
                        std::vector<double> sums(size_t(m), -1.0);
                        const cpu::GemmEpilogue ep{
                            .bias = bias.data(),
                            .act = act,
                            .pre = act == LinearActivation::gelu_tanh ? pre.data() : nullptr,
                            .ld_pre = n + 3,
                            .a_row_sums = sums.data()};
                        cpu::gemm_bf16(m, n, k, a.operand(), b.operand(), fused.data(), dc, n,
                                       false, &ep);
                        REQUIRE(fused.same_bits(plain));
                        for (int64_t i = 0; i < m; ++i) {
                            double row = 0;
                            for (int64_t t = 0; t < k; ++t) row += a.given(i, t);
                            REQUIRE(std::abs(sums[size_t(i)] - row) <= 1e-12 * double(k));
                            if (ep.pre)
                                for (int64_t j = 0; j < n; ++j)
                                    REQUIRE(pre.at(size_t(i * (n + 3) + j)) ==
                                            pre_plain.at(size_t(i * n + j)));
                        }
                    }
}

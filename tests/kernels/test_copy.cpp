// Casts between every pair of dtypes against an independent f64 reference of
// the documented rules, strided and broadcast copies, and copy errors.
#include "support/support.h"

#include <cmath>
#include <cstring>
#include <limits>

using namespace ember;
using namespace ember::test;

namespace {

const DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                      DType::i32, DType::i64, DType::u8,  DType::boolean};

// The value `x` (exactly representable in `from`) becomes in `to`, computed
// with f64 and the rules of docs/dtypes.md.
double reference_cast(double x, DType to) {
    switch (to) {
        case DType::f64: return x;
        case DType::f32: return double(float(x));
        case DType::f16: return double(half_bits_to_float(float_to_half_bits(float(x))));
        case DType::bf16: return double(bf16_bits_to_float(float_to_bf16_bits(float(x))));
        case DType::boolean: return x != 0 ? 1 : 0;
        default: break;
    }
    double lo, hi;  // integer range
    int bits;
    if (to == DType::i32) lo = -2147483648.0, hi = 2147483647.0, bits = 32;
    else if (to == DType::i64) lo = -9223372036854775808.0, hi = 9223372036854775807.0, bits = 64;
    else lo = 0, hi = 255, bits = 8;
    (void)bits;
    if (std::isnan(x)) return 0;
    const double t = std::trunc(x);
    return std::clamp(t, lo, hi);
}

// Values exercising rounding, negatives, out-of-range and specials.
std::vector<double> probe_values(DType from) {
    std::vector<double> v = {0, 1, -1, 2.5, -2.5, 3.75, 100.3, -100.7, 255, 256, 300, -300,
                             65504, 70000, 1e10, -1e10, 1e-6, 0.1};
    if (is_floating(from)) {
        v.push_back(NAN);
        v.push_back(INFINITY);
        v.push_back(-INFINITY);
    }
    return v;
}

}  // namespace

TEST_CASE("casts between every pair of dtypes follow the documented rules", "[copy][cast]") {
    for (DType from : kAll) {
        // Build the source from f64 values, then read back what `from` actually holds.
        Tensor src;
        std::vector<double> vals = probe_values(from);
        if (is_floating(from)) {
            src = from_vector(vals).to(from);
        } else {
            // Integer sources: values that fit the type (avoid relying on the cast under test).
            std::vector<int64_t> iv = {0, 1, 5, 7, 100, 127, 200, 255};
            if (from == DType::i32 || from == DType::i64) {
                iv.push_back(-1);
                iv.push_back(-300);
                iv.push_back(70000);
            }
            if (from == DType::i64) iv.push_back(int64_t(1) << 40);
            if (from == DType::boolean) iv = {0, 1, 1, 0};
            Tensor i64 = from_vector(iv);
            src = empty({int64_t(iv.size())}, {from});
            for (size_t i = 0; i < iv.size(); ++i) src.set({int64_t(i)}, double(iv[i]));
        }
        const std::vector<double> held = values(src);
        for (DType to : kAll) {
            INFO("cast " << dtype_name(from) << " -> " << dtype_name(to));
            Tensor dst = src.to(to);
            REQUIRE(dst.dtype() == to);
            std::vector<double> want;
            for (double x : held) want.push_back(reference_cast(x, to));
            // Integer wrap for int -> narrower int.
            if (!is_floating(from) && (to == DType::u8 || to == DType::i32)) {
                for (size_t i = 0; i < held.size(); ++i) {
                    const int64_t x = int64_t(held[i]);
                    want[i] = to == DType::u8 ? double(uint8_t(x)) : double(int32_t(x));
                }
            }
            check_close(dst, want, 0, 0);
        }
    }
}

TEST_CASE("copy_ handles strides, broadcasting and dtype changes", "[copy]") {
    Tensor a = random_tensor({3, 4, 5}, DType::f32, 1);
    Tensor p = a.permute({2, 0, 1});
    Tensor dst = empty({5, 3, 4}, {DType::f64});
    dst.copy_(p);
    check_close(dst, p, 0, 0);
    // Copy into a strided destination.
    Tensor big = zeros({5, 8}, {DType::f32});
    Tensor cols = big.slice(1, 0, 8, 2);
    Tensor src = random_tensor({5, 4}, DType::f32, 2);
    cols.copy_(src);
    check_close(cols, src, 0, 0);
    CHECK(big.at({0, 1}) == 0);
    // Broadcast a row into a matrix.
    Tensor row = random_tensor({4}, DType::f16, 3);
    Tensor m = empty({3, 4}, {DType::f32});
    m.copy_(row);
    for (int64_t i = 0; i < 3; ++i) check_close(m.select(0, i), row, 0, 0);
    REQUIRE_THROWS_WITH_MSG(m.copy_(zeros({3, 5})), "cannot be broadcast");
    REQUIRE_THROWS_WITH_MSG(zeros({4}).copy_(zeros({3, 4})), "cannot be broadcast");
}

TEST_CASE("large copies and casts split across threads correctly", "[copy]") {
    Tensor a = random_tensor({1000, 333}, DType::f32, 4);
    Tensor t = a.t().contiguous();
    for (int64_t i = 0; i < 333; i += 37)
        for (int64_t j = 0; j < 1000; j += 101) CHECK(t.at({i, j}) == a.at({j, i}));
    Tensor h = a.to(DType::bf16).to(DType::f32);
    check_close(h, a, 4e-3, 0);
    Tensor c = a.clone();
    CHECK(c.storage() != a.storage());
    check_close(c, a, 0, 0);
}

TEST_CASE("f32 -> f16 on whole tensors equals the scalar conversion bit for bit", "[copy][cast]") {
    // The vector path (F16C where present) must agree with core/half.h on every
    // class of value: random bit patterns cover NaNs (signalling and quiet),
    // infinities, subnormals and ties.
    Generator g(21);
    Tensor bits = randint(0, int64_t(1) << 32, {100003}, {DType::i64}, &g);
    std::vector<int64_t> b = bits.to_vector<int64_t>();
    std::vector<float> f(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
        const uint32_t u = uint32_t(b[i]);
        std::memcpy(&f[i], &u, 4);
    }
    Tensor h = from_vector(f).to(DType::f16);
    const Half* hp = h.data<Half>();
    int bad = 0;
    for (size_t i = 0; i < f.size(); ++i) bad += hp[i].bits != float_to_half_bits(f[i]);
    CHECK(bad == 0);
}

TEST_CASE("transposed copies of every layout match element by element", "[copy]") {
    for (const Shape& s : {Shape{64, 96}, Shape{3, 40, 33}, Shape{33, 2, 70}, Shape{5, 31}}) {
        Tensor a = random_tensor(s, DType::f32, 8);
        Tensor p = a.transpose(0, a.dim() - 1);
        for (DType to : {DType::f32, DType::f64, DType::bf16}) {
            Tensor c = p.to(to).contiguous();
            REQUIRE(c.is_contiguous());
            std::vector<double> want;
            for (int64_t i = 0; i < p.numel(); ++i) want.push_back(p.at(unravel(i, p.shape())));
            check_close(c, want, rtol_for(to), 0);
        }
    }
}

TEST_CASE("copy_ reads overlapping sources as they were before the copy", "[copy]") {
    Tensor m = arange(0, 16, 1, {.dtype = DType::f64}).view({4, 4});
    Tensor want = m.t().contiguous();
    m.copy_(m.t());
    check_close(m, want, 0, 0);
    Tensor x = arange(0, 100000, 1, {.dtype = DType::f64});
    Tensor shifted = x.slice(0, 0, 99999).clone();
    x.slice(0, 1, 100000).copy_(x.slice(0, 0, 99999));
    check_close(x.slice(0, 1, 100000), shifted, 0, 0);
    REQUIRE_THROWS_WITH_MSG(zeros({1, 4}).expand({3, 4}).copy_(ones({3, 4})),
                            "has broadcast (stride 0) dims");
}

TEST_CASE("rand never returns 1 in half precision; randint checks its range", "[rng]") {
    Generator g(3);
    for (DType t : {DType::f16, DType::bf16}) {
        const std::vector<double> v = values(rand({1 << 18}, {t}, &g));
        double mx = 0;
        for (double x : v) mx = std::max(mx, x);
        CHECK(mx < 1.0);
        CHECK(mx > 0.99);
    }
    REQUIRE_THROWS_WITH_MSG(randint(-5, 5, {10}, {DType::u8}), "does not fit dtype u8");
    REQUIRE_THROWS_WITH_MSG(randint(0, 100000, {10}, {DType::f16}), "does not fit dtype f16");
    const std::vector<int64_t> w =
        randint(INT64_MIN, INT64_MAX, {1000}, {DType::i64}, &g).to_vector<int64_t>();
    int negative = 0;
    for (int64_t x : w) negative += x < 0;
    CHECK(negative > 400);
    CHECK(negative < 600);
}

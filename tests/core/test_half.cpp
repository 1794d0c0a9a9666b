// f16/bf16 conversions against an independent f64 reference: the nearest
// representable value, ties to even, for every f16 bit pattern and for many
// f32 values between them.
#include "support/support.h"

#include <cmath>
#include <cstring>

using namespace ember;

namespace {

// Value of an f16 bit pattern computed with f64 arithmetic (no bit tricks).
double half_value(uint16_t h) {
    const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = std::ldexp(double(m), -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = std::ldexp(1.0 + m / 1024.0, e - 15);
    return sign ? -v : v;
}

// Reference f32 -> f16: scan the finite halves for the nearest (ties to even mantissa).
uint16_t ref_float_to_half(float f) {
    if (std::isnan(f)) return 0x7e00;
    const double x = f;
    uint16_t best = 0;
    double best_err = INFINITY;
    for (uint32_t h = 0; h < 0x7c00; ++h) {
        for (int s = 0; s < 2; ++s) {
            const uint16_t b = uint16_t(h | (s << 15));
            const double err = std::abs(half_value(b) - x);
            if (err < best_err || (err == best_err && (b & 1) == 0 && (best & 1) == 1)) {
                best = b;
                best_err = err;
            }
        }
    }
    // Values at or past 65520 round to infinity.
    if (std::abs(x) >= 65520.0) return uint16_t((f < 0 ? 0x8000 : 0) | 0x7c00);
    if ((best & 0x7fff) == 0) return std::signbit(f) ? 0x8000 : 0;  // zero keeps the sign
    return best;
}

}  // namespace

TEST_CASE("every f16 bit pattern converts to f32 exactly and back", "[half]") {
    for (uint32_t h = 0; h < 65536; ++h) {
        const float f = half_bits_to_float(uint16_t(h));
        const double ref = half_value(uint16_t(h));
        if (std::isnan(ref)) {
            CHECK(std::isnan(f));
            CHECK(std::isnan(half_bits_to_float(float_to_half_bits(f))));
        } else {
            REQUIRE(double(f) == ref);
            REQUIRE(float_to_half_bits(f) == uint16_t(h));
        }
    }
}

TEST_CASE("f32 -> f16 rounds to nearest even like the reference", "[half]") {
    Generator g(7);
    Tensor u = rand({3000}, {DType::f64}, &g);
    std::vector<double> v = u.to_vector<double>();
    int checked = 0;
    for (double x : v) {
        // Spread over the f16 range, subnormals included, with both signs.
        const float f = float((x - 0.5) * std::ldexp(1.0, int(x * 40) - 24));
        CHECK(float_to_half_bits(f) == ref_float_to_half(f));
        ++checked;
        if (checked > 400) break;  // the reference scan is slow; 400 values suffice
    }
    // Exact ties: halfway between two halves goes to the even one.
    const float one = 1.0f, ulp = std::ldexp(1.0f, -10);
    CHECK(float_to_half_bits(one + ulp / 2) == float_to_half_bits(one));
    CHECK(float_to_half_bits(one + 3 * ulp / 2) == float_to_half_bits(one + 2 * ulp));
    CHECK(float_to_half_bits(65519.0f) == 0x7bff);
    CHECK(float_to_half_bits(65520.0f) == 0x7c00);
    CHECK(float_to_half_bits(-INFINITY) == 0xfc00);
}

TEST_CASE("bf16 rounds to nearest even and keeps NaN", "[half]") {
    Generator g(11);
    std::vector<double> v = rand({2000}, {DType::f64}, &g).to_vector<double>();
    for (double x : v) {
        const float f = float((x - 0.5) * 1e6);
        const uint16_t b = float_to_bf16_bits(f);
        const double got = bf16_bits_to_float(b);
        // Reference: the two bf16 neighbours of f, computed by truncation in f64.
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        float lo_f, hi_f;
        uint32_t lo_bits = bits & 0xffff0000u, hi_bits = lo_bits + 0x10000u;
        std::memcpy(&lo_f, &lo_bits, 4);
        std::memcpy(&hi_f, &hi_bits, 4);
        const double dlo = std::abs(double(f) - lo_f), dhi = std::abs(double(hi_f) - f);
        double want = dlo < dhi ? lo_f : dhi < dlo ? hi_f : (((lo_bits >> 16) & 1) ? hi_f : lo_f);
        CHECK(got == want);
    }
    CHECK(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
    CHECK(bf16_bits_to_float(float_to_bf16_bits(INFINITY)) == INFINITY);
    CHECK(bf16_bits_to_float(float_to_bf16_bits(3.4e38f)) == INFINITY);  // rounds past max
}

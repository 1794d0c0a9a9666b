// f16 and bf16 storage types. Arithmetic happens in f32; the conversions here
// are plain integer code so that CPU and CUDA round bit-identically
// (round-to-nearest-even, NaN kept NaN with its sign and top payload bits).
#pragma once

#include <cstdint>

#include "macros.h"

namespace ember {

EMBER_HD EMBER_INLINE uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    return __builtin_bit_cast(uint32_t, f);
#endif
}

EMBER_HD EMBER_INLINE float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    return __builtin_bit_cast(float, u);
#endif
}

/// f32 -> IEEE binary16 bits, round to nearest even; overflow gives ±inf.
EMBER_HD EMBER_INLINE uint16_t float_to_half_bits(float f) {
    const uint32_t x = float_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t a = x & 0x7fffffffu;
    if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
    if (a >= 0x47800000u) return uint16_t(sign | 0x7c00u);  // >= 2^16: inf
    if (a < 0x38800000u) {                                    // below 2^-14: subnormal or zero
        if (a < 0x33000000u) return uint16_t(sign);           // below 2^-25: zero
        const uint32_t e = a >> 23;
        const uint32_t m = (a & 0x7fffffu) | 0x800000u;
        const uint32_t shift = 126u - e;  // in [14, 24]
        uint32_t h = m >> shift;
        const uint32_t rem = m & ((1u << shift) - 1u);
        const uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
        return uint16_t(sign | h);
    }
    const uint32_t r = a - (112u << 23);  // rebias exponent 127 -> 15
    uint32_t h = r >> 13;
    const uint32_t rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into inf: correct
    return uint16_t(sign | h);
}

/// IEEE binary16 bits -> f32 (exact). Branch-free (selects only) so that
/// loops over f16 data vectorize: normals and inf/NaN by rebiasing the
/// exponent, subnormals as m * 2^-24 (exact in f32).
EMBER_HD EMBER_INLINE float half_bits_to_float(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t em = h & 0x7fffu;  // exponent and mantissa
    const uint32_t e = h & 0x7c00u;
    // Rebias 15 -> 127; inf/NaN (exponent all ones) rebias twice, keeping the payload.
    const uint32_t normal = (em << 13) + (112u << 23) + uint32_t(e == 0x7c00u) * (112u << 23);
    const uint32_t subnormal = float_bits(float(int32_t(em)) * (1.0f / 16777216.0f));  // m * 2^-24
    const uint32_t is_sub = 0u - uint32_t(e == 0);  // all ones when subnormal or zero
    return bits_float(((subnormal & is_sub) | (normal & ~is_sub)) | sign);
}

/// f32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN.
/// Branch-free, so that loops of it vectorize.
EMBER_HD EMBER_INLINE uint16_t float_to_bf16_bits(float f) {
    const uint32_t x = float_bits(f);
    const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    return uint16_t((x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : rounded);
}

EMBER_HD EMBER_INLINE float bf16_bits_to_float(uint16_t b) { return bits_float(uint32_t(b) << 16); }

/// IEEE half precision, stored as bits; converts explicitly to and from f32.
struct Half {
    uint16_t bits;
    Half() = default;
    EMBER_HD explicit Half(float f) : bits(float_to_half_bits(f)) {}
    EMBER_HD explicit operator float() const { return half_bits_to_float(bits); }
    EMBER_HD static Half from_bits(uint16_t b) {
        Half h;
        h.bits = b;
        return h;
    }
};

/// bfloat16 (8-bit exponent, 7-bit mantissa), stored as bits.
struct BFloat16 {
    uint16_t bits;
    BFloat16() = default;
    EMBER_HD explicit BFloat16(float f) : bits(float_to_bf16_bits(f)) {}
    EMBER_HD explicit operator float() const { return bf16_bits_to_float(bits); }
    EMBER_HD static BFloat16 from_bits(uint16_t b) {
        BFloat16 h;
        h.bits = b;
        return h;
    }
};

}  // namespace ember

// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3",
// SC'11): a counter-based generator. The output block is a pure function of
// (key, counter), so element i of any random op can be computed anywhere (CPU
// thread, CUDA thread) and gets the same bits. The stream layout ember builds
// on it is a documented contract: docs/rng.md.
#pragma once

#include <cstdint>

#include "macros.h"

namespace ember {

struct Philox4 {
    uint32_t x[4];
};

EMBER_HD EMBER_INLINE Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                            uint32_t k0, uint32_t k1) {
    constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
    constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += kW0;
            k1 += kW1;
        }
        const uint64_t p0 = uint64_t(kM0) * c0;
        const uint64_t p1 = uint64_t(kM1) * c2;
        const uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0;
        const uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1;
        c1 = uint32_t(p1);
        c3 = uint32_t(p0);
        c0 = n0;
        c2 = n2;
    }
    return {{c0, c1, c2, c3}};
}

/// Block number `block` of stream `stream` under `seed`: key = seed,
/// counter = (block, stream) as two 64-bit halves, low words first.
EMBER_HD EMBER_INLINE Philox4 philox_block(uint64_t seed, uint64_t block, uint64_t stream = 0) {
    return philox4x32_10(uint32_t(block), uint32_t(block >> 32), uint32_t(stream),
                         uint32_t(stream >> 32), uint32_t(seed), uint32_t(seed >> 32));
}

/// 24 random bits -> f32 uniform in [0, 1).
EMBER_HD EMBER_INLINE float uniform_f32(uint32_t bits) {
    return float(bits >> 8) * (1.0f / 16777216.0f);
}

/// 53 random bits (from two words) -> f64 uniform in [0, 1).
EMBER_HD EMBER_INLINE double uniform_f64(uint32_t lo, uint32_t hi) {
    const uint64_t b = (uint64_t(hi) << 32 | lo) >> 11;
    return double(b) * (1.0 / 9007199254740992.0);
}

/// An integer in [0, range) from 32 bits, by multiply-shift (range <= 2^32).
EMBER_HD EMBER_INLINE uint64_t bounded_u32(uint32_t bits, uint64_t range) {
    return (uint64_t(bits) * range) >> 32;
}

}  // namespace ember

// Element i of each random distribution as a function of (seed, first block, i):
// the stream contract of docs/rng.md, shared by the CPU and CUDA kernels.
#pragma once

#include <cmath>
#include <cstdint>

#include "../core/philox.h"
#include "math.h"

namespace ember::math {

/// Uniform [0, 1) for element i. 32-bit words: 4 elements per block (f32 uses
/// 24 bits, f16 11, bf16 8: exactly representable, never 1); f64: 2 per block.
template <class T>
EMBER_HD EMBER_INLINE Acc<T> uniform_at(uint64_t seed, uint64_t first, int64_t i) {
    if constexpr (std::is_same_v<T, double>) {
        const Philox4 b = philox_block(seed, first + uint64_t(i) / 2);
        const int w = int(i % 2) * 2;
        return uniform_f64(b.x[w], b.x[w + 1]);
    } else if constexpr (std::is_same_v<T, Half>) {
        // As many bits as f16 holds exactly below 1 (11), so rounding can never give 1.
        const Philox4 b = philox_block(seed, first + uint64_t(i) / 4);
        return float(b.x[i % 4] >> 21) * (1.0f / 2048.0f);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
        const Philox4 b = philox_block(seed, first + uint64_t(i) / 4);  // 8 bits for bf16
        return float(b.x[i % 4] >> 24) * (1.0f / 256.0f);
    } else {
        const Philox4 b = philox_block(seed, first + uint64_t(i) / 4);
        return uniform_f32(b.x[i % 4]);
    }
}

/// Standard normal for element i: elements 2j and 2j+1 are the cosine and sine
/// halves of one Box-Muller pair drawn from block first + j.
template <class T>
EMBER_HD EMBER_INLINE Acc<T> normal_at(uint64_t seed, uint64_t first, int64_t i) {
    using A = Acc<T>;
    const Philox4 b = philox_block(seed, first + uint64_t(i) / 2);
    A u1, u2;
    if constexpr (std::is_same_v<T, double>) {
        u1 = 1.0 - uniform_f64(b.x[0], b.x[1]);  // (0, 1]: log is finite
        u2 = uniform_f64(b.x[2], b.x[3]);
    } else {
        u1 = 1.0f - uniform_f32(b.x[0]);
        u2 = uniform_f32(b.x[1]);
    }
    const A r = std::sqrt(A(-2) * std::log(u1));
    const A theta = A(6.283185307179586476925286766559) * u2;
    return (i % 2 == 0) ? r * std::cos(theta) : r * std::sin(theta);
}

/// An integer in [0, range) for element i: 4 per block when range <= 2^32,
/// else 2 per block (64 bits each, reduced modulo range).
EMBER_HD EMBER_INLINE uint64_t randint_at(uint64_t seed, uint64_t first, int64_t i,
                                          uint64_t range) {
    if (range <= (uint64_t(1) << 32)) {
        const Philox4 b = philox_block(seed, first + uint64_t(i) / 4);
        return bounded_u32(b.x[i % 4], range);
    }
    const Philox4 b = philox_block(seed, first + uint64_t(i) / 2);
    const int w = int(i % 2) * 2;
    return (uint64_t(b.x[w + 1]) << 32 | b.x[w]) % range;
}

/// Dropout's rule, one definition for both backends and every caller of
/// the stream (dropout, attention's probabilities): element i is kept iff
/// its f32 uniform u (uniform_at<float>) is >= p, and a kept value is scaled
/// by 1/(1 − p) in Acc<T> and rounded once, a dropped one is 0. The backward
/// applies the same to the gradient with the saved mask.
EMBER_HD EMBER_INLINE bool dropout_keep(float u, double p) { return double(u) >= p; }

template <class T>
struct DropoutScale {
    Acc<T> scale;  ///< 1 / (1 − p)
    EMBER_HD EMBER_INLINE T operator()(T x, uint8_t keep) const {
        return keep ? cast<T>(cast<Acc<T>>(x) * scale) : cast<T>(Acc<T>(0));
    }
};

}  // namespace ember::math

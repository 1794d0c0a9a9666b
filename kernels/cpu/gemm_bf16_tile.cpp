// The bf16 GEMM's 6 × 64 register tiles: VDPBF16PS, and its emulation by f32
// FMAs in the same order.
//
// Math:    t[r][j] = Σ_q (a_odd·b_odd then a_even·b_even) over the tile's
//          k pairs, f32 sums from zero, each addition rounded.
// Tile:    6 rows × 4 vectors of 16 columns = 24 f32 accumulators; per k
//          pair, 4 vector loads of b (2 bf16 per lane), 6 broadcasts of a's
//          32-bit pairs, 24 VDPBF16PS = 1536 FLOPs (the f32 tile's 768 per k).
// Cost:    the native tile is bound by the dot-product unit: per pair, 256
//          bytes of b from L1/L2 for 1536 FLOPs. Its rate depends on the
//          data (power, then clock): constant operands run ~20 % faster than
//          random ones on a Zen 4, so the peak is measured on random ones. The emulation splits
//          each pair into two f32 vectors (shift, mask) and does two FMAs: half the native rate,
//          about f32's.
// Test: tests/kernels/test_gemm_bf16.cpp; benchmark: bench/matmul.cpp.
#include "kernels/cpu/gemm_bf16_tile.h"

#include <immintrin.h>

#include <cstring>

#include "core/half.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

using fvec = float __attribute__((vector_size(64)));
using uvec = uint32_t __attribute__((vector_size(64)));

float low_half(uint32_t w) {  // the even k's bf16 as f32
    const uint32_t u = w << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
float high_half(uint32_t w) {  // the odd k's
    const uint32_t u = w & 0xffff0000u;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

}  // namespace

__attribute__((target("avx512f,avx512bf16"))) void bf16_tile_native(int64_t pairs,
                                                                    const uint32_t* ap, int64_t rs,
                                                                    int64_t ks, const uint32_t* bp,
                                                                    const TileOut& out) {
    __m512 s[kBf16Mr][4];
    for (auto& row : s)
        for (__m512& v : row) v = _mm512_setzero_ps();
    for (int64_t q = 0; q < pairs; ++q) {
        const uint32_t* b = bp + q * kBf16Nr;
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b),
                       b1 = (__m512bh)_mm512_loadu_si512(b + 16),
                       b2 = (__m512bh)_mm512_loadu_si512(b + 32),
                       b3 = (__m512bh)_mm512_loadu_si512(b + 48);
#pragma GCC unroll 6
        for (int64_t r = 0; r < kBf16Mr; ++r) {
            const __m512bh x = (__m512bh)_mm512_set1_epi32(int(ap[r * rs + q * ks]));
            s[r][0] = _mm512_dpbf16_ps(s[r][0], x, b0);
            s[r][1] = _mm512_dpbf16_ps(s[r][1], x, b1);
            s[r][2] = _mm512_dpbf16_ps(s[r][2], x, b2);
            s[r][3] = _mm512_dpbf16_ps(s[r][3], x, b3);
        }
    }
    if (!out.c) {
        for (int64_t r = 0; r < kBf16Mr; ++r)
            for (int v = 0; v < 4; ++v) _mm512_storeu_ps(out.t + r * kBf16Nr + 16 * v, s[r][v]);
        return;
    }
    // Straight into bf16 c. ReLU as math::Relu: zero where x < 0 (false for
    // NaN and −0, which pass); before or after the rounding, the same bits
    // (rounding keeps the sign and the order).
    const __m512 zero = _mm512_setzero_ps();
    for (int64_t r = 0; r < kBf16Mr; ++r)
        for (int v = 0; v < 4; ++v) {
            __m512 x = s[r][v];
            if (out.bias) x = _mm512_add_ps(_mm512_loadu_ps(out.bias + 16 * v), x);
            if (out.relu)
                x = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, zero);
            const __m256bh y = _mm512_cvtneps_pbh(x);  // nearest even; NaN made quiet
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.c + r * out.ldc + 16 * v),
                                (__m256i)y);
        }
}

void bf16_tile_emulated(int64_t pairs, const uint32_t* ap, int64_t rs, int64_t ks,
                        const uint32_t* bp, const TileOut& out) {
    fvec s[kBf16Mr][4] = {};
    for (int64_t q = 0; q < pairs; ++q) {
        fvec even[4], odd[4];
        for (int v = 0; v < 4; ++v) {
            uvec w;
            std::memcpy(&w, bp + q * kBf16Nr + 16 * v, sizeof w);
            even[v] = (fvec)(w << 16);  // vector casts reinterpret the bits
            odd[v] = (fvec)(w & 0xffff0000u);
        }
        for (int64_t r = 0; r < kBf16Mr; ++r) {
            const uint32_t x = ap[r * rs + q * ks];
            const float xe = low_half(x), xo = high_half(x);
            for (int v = 0; v < 4; ++v) {
                // Each product is exact in f32 (8 × 8 significant bits), so a
                // product then an add rounds as VDPBF16PS's fused step does.
                s[r][v] = s[r][v] + xo * odd[v];
                s[r][v] = s[r][v] + xe * even[v];
            }
        }
    }
    for (int64_t r = 0; r < kBf16Mr; ++r)
        for (int v = 0; v < 4; ++v) {
            if (!out.c) {
                std::memcpy(out.t + r * kBf16Nr + 16 * v, &s[r][v], sizeof(fvec));
                continue;
            }
            for (int j = 0; j < 16; ++j) {
                float x = s[r][v][j];
                if (out.bias) x = out.bias[16 * v + j] + x;
                if (out.relu) x = math::Relu{}(x);
                out.c[r * out.ldc + 16 * v + j] = float_to_bf16_bits(x);
            }
        }
}

double bf16_peak_loop(int64_t iterations, const uint16_t* values, int64_t count, float* sink) {
    constexpr int64_t kPairs = 64;  // b 16 KB, a 1.5 KB: L1
    alignas(64) uint32_t a[kBf16Mr * kPairs], b[kPairs * kBf16Nr];
    alignas(64) float t[kBf16Mr * kBf16Nr];
    int64_t next = 0;
    auto value = [&] {
        const uint32_t v = values[next];
        next = (next + 1) % count;
        return v;
    };
    for (uint32_t& w : a) w = value() | value() << 16;
    for (uint32_t& w : b) w = value() | value() << 16;
    float s = 0;
    TileOut out;
    out.t = t;
    for (int64_t i = 0; i < iterations; ++i) {
        bf16_tile_native(kPairs, a, 1, kBf16Mr, b, out);
        s += t[i % (kBf16Mr * kBf16Nr)];
    }
    *sink = s;
    return 2.0 * double(kBf16Mr * kBf16Nr) * double(2 * kPairs) * double(iterations);
}

}  // namespace ember::kernels::cpu

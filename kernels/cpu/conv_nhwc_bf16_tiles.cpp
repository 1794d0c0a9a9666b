// The bf16 channels-last convolutions' register tiles
// (kernels/cpu/conv_nhwc_bf16_tiles.h).
//
// Tiles: R·V ≤ 28 f32 accumulators (24 for grad_weight); per pair step V
//        vector loads of packed words and R·V VDPBF16PS, each broadcasting
//        its 32-bit pair from memory: 64 FLOPs per instruction, twice an f32
//        FMA's.
// Emulation: each word split into two f32 vectors (shift, mask), two FMAs
//        in VDPBF16PS's order — the odd half's product, then the even
//        half's, each addition rounded; the products are exact, so the bits
//        match for normal numbers. Half the native rate, about f32's.
// Target: every tile is compiled for AVX-512F with AVX512_BF16 (the native
//        dot step must inline into it); the emulated tiles contain no bf16
//        instruction (GCC emits them only for the intrinsics), so they run on
//        any AVX-512F CPU, which is what nhwc_bf16::fits asks for.
// Test: tests/kernels/test_conv_nhwc_bf16.cpp (every tile shape through the
//        passes; native against emulated).
#include "kernels/cpu/conv_nhwc_bf16_tiles.h"

#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>

#include "kernels/cpu/conv_nhwc_plan.h"

namespace ember::kernels::cpu::nhwc_bf16 {

namespace {

using nhwc::kLanes;
using nhwc::kMaxR;

using fvec = float __attribute__((vector_size(64)));
using uvec = uint32_t __attribute__((vector_size(64)));

// The two kinds of dot step: acc[i] += hi(x)·hi(w[i]), then += lo(x)·lo(w[i]).
struct Native {
    using W = uvec;
    __attribute__((always_inline, target("avx512f"))) static W words(const uint32_t* p) {
        W w;
        std::memcpy(&w, p, sizeof w);
        return w;
    }
    // VDPBF16PS, x's word broadcast from memory ({1to16}).
    __attribute__((always_inline, target("avx512f,avx512bf16"))) static void dot(
        fvec& acc, const uint32_t* x, const W& w) {
        acc = (fvec)_mm512_dpbf16_ps((__m512)acc, (__m512bh)_mm512_set1_epi32(int(*x)),
                                     (__m512bh)w);
    }
};
struct Emulated {
    struct W {
        fvec even, odd;
    };
    __attribute__((always_inline, target("avx512f"))) static W words(const uint32_t* p) {
        uvec w;
        std::memcpy(&w, p, sizeof w);
        return {(fvec)(w << 16), (fvec)(w & 0xffff0000u)};  // vector casts keep the bits
    }
    __attribute__((always_inline, target("avx512f"))) static void dot(fvec& acc,
                                                                       const uint32_t* x,
                                                                       const W& w) {
        const uint32_t lo = *x << 16, hi = *x & 0xffff0000u;
        float xe, xo;
        std::memcpy(&xe, &lo, sizeof xe);
        std::memcpy(&xo, &hi, sizeof xo);
        // Each product is exact in f32 (8 × 8 significant bits): a product
        // then an add rounds as the instruction's fused step does.
        acc = acc + xo * w.odd;
        acc = acc + xe * w.even;
    }
};

// 16 f32 sums to bf16 bits, nearest even, NaN quiet (float_to_bf16_bits).
__attribute__((target("avx512f"))) void store_bf16(uint16_t* p, fvec v) {
    const uvec x = (uvec)v;
    const uvec rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    const uvec bits = (x & 0x7fffffffu) > 0x7f800000u ? (x >> 16) | 0x40u : rounded;
    using hvec = uint16_t __attribute__((vector_size(32)));
    const hvec h = __builtin_convertvector(bits, hvec);
    std::memcpy(p, &h, sizeof h);
}

// acc[r][v] = bias[16v ..] + Σ_t Σ_{k<K} x[r·ps + off[t] + k] ⊙ w[t·K·O + k·O + 16v ..]
// (words of pairs), then y[r·ys + 16v ..] = bf16(acc). bias may be null
// (zero). PS > 0: ps is PS, known here, so the R pixels' words are at fixed
// offsets from one pointer (a runtime ps needs a register per pixel, more
// than x86-64 has for 14 pixels).
template <class Dot, int R, int V, int PS>
__attribute__((target("avx512f,avx512bf16"))) void tile(const uint32_t* x, int64_t ps,
                                                        const int64_t* off, int64_t taps,
                                                        int64_t K, const uint32_t* w, int64_t O,
                                                        const float* bias, uint16_t* y,
                                                        int64_t ys) {
    const int64_t step = PS > 0 ? PS : ps;
    fvec acc[R][V];
    for (int v = 0; v < V; ++v) {
        fvec b = {};
        if (bias) std::memcpy(&b, bias + kLanes * v, sizeof b);
        for (int r = 0; r < R; ++r) acc[r][v] = b;
    }
    for (int64_t t = 0; t < taps; ++t) {
        const uint32_t* xt = x + off[t];
        const uint32_t* wt = w + t * K * O;
        for (int64_t k = 0; k < K; ++k, wt += O) {
            typename Dot::W wv[V];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) wv[v] = Dot::words(wt + kLanes * v);
#pragma GCC unroll 14
            for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) Dot::dot(acc[r][v], xt + r * step + k, wv[v]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) store_bf16(y + r * ys + kLanes * v, acc[r][v]);
}

template <class Dot, int V, int PS, int... R>
constexpr std::array<TileFn, sizeof...(R)> tiles(std::integer_sequence<int, R...>) {
    return {&tile<Dot, R + 1, V, PS>...};
}
template <class Dot, int V, int PS>
constexpr auto kTiles = tiles<Dot, V, PS>(std::make_integer_sequence<int, kMaxR[V]>{});

// tile<Dot, R, v, PS> for R = 1 .. kMaxR[v], indexed by R − 1: with the
// pixel step fixed where it is 8 or 16 words (16 or 32 channels, or 16 at
// stride 2), or 1 (one channel and its zero: a stem), and the tile 14
// pixels wide (v ≤ 2).
template <class Dot>
const TileFn* table_of(int v, int64_t ps) {
    switch (v) {
        case 4:
            return kTiles<Dot, 4, 0>.data();
        case 3:
            return kTiles<Dot, 3, 0>.data();
        case 2:
            return ps == 8    ? kTiles<Dot, 2, 8>.data()
                   : ps == 16 ? kTiles<Dot, 2, 16>.data()
                              : kTiles<Dot, 2, 0>.data();
        default:
            return ps == 1    ? kTiles<Dot, 1, 1>.data()
                   : ps == 8  ? kTiles<Dot, 1, 8>.data()
                   : ps == 16 ? kTiles<Dot, 1, 16>.data()
                              : kTiles<Dot, 1, 0>.data();
    }
}

// acc[r][v] = Σ_{m, oy, ox} x[m·x_image + oy·xrow + ox·xs + r·rs] ⊙ dy[m·dy_image + oy·dy_row + ox·O + 16v]
// (words of image pairs), then out[r·ldo + 16v] = acc (f32). RS > 0: rs is
// RS, known here, so the rows' words are at fixed offsets from one pointer
// and broadcast straight from memory (a runtime rs left GCC short of
// registers: offsets parked in vector registers, a move per broadcast).
template <class Dot, int V, int R, int RS>
__attribute__((target("avx512f,avx512bf16"))) void weight_tile(const uint32_t* dy, int64_t O,
                                                    int64_t dy_row, int64_t dy_image,
                                                    const uint32_t* x, int64_t rs, int64_t xs,
                                                    int64_t xrow, int64_t x_image, int64_t images,
                                                    int64_t oh, int64_t ow, float* out,
                                                    int64_t ldo) {
    if constexpr (RS > 0) rs = RS;
    fvec acc[R][V] = {};
    for (int64_t m = 0; m < images; ++m)
        for (int64_t oy = 0; oy < oh; ++oy) {
            const uint32_t* d = dy + m * dy_image + oy * dy_row;
            const uint32_t* xr = x + m * x_image + oy * xrow;
            for (int64_t ox = 0; ox < ow; ++ox, xr += xs, d += O) {
                typename Dot::W dv[V];
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) dv[v] = Dot::words(d + kLanes * v);
#pragma GCC unroll 24
                for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
                    for (int v = 0; v < V; ++v) Dot::dot(acc[r][v], xr + r * rs, dv[v]);
            }
        }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) std::memcpy(out + r * ldo + kLanes * v, &acc[r][v], 64);
}

template <class Dot, int V, int RS, int... R>
constexpr std::array<WeightFn, sizeof...(R)> weight_tiles_of(std::integer_sequence<int, R...>) {
    return {&weight_tile<Dot, V, R + 1, RS>...};
}
// The grad_weight tiles for v vectors of output channels, indexed by
// channels − 1: with the row step fixed where it is one word (adjacent
// channels, or a stem's adjacent taps), else read at run time.
template <class Dot, int RS>
const WeightFn* weight_table_of(int64_t v) {
    static constexpr auto t1 =
        weight_tiles_of<Dot, 1, RS>(std::make_integer_sequence<int, kWeightRows>{});
    static constexpr auto t2 =
        weight_tiles_of<Dot, 2, RS>(std::make_integer_sequence<int, kWeightRows / 2>{});
    static constexpr auto t4 =
        weight_tiles_of<Dot, 4, RS>(std::make_integer_sequence<int, kWeightRows / 4>{});
    return v == 4 ? t4.data() : v == 2 ? t2.data() : t1.data();
}
template <class Dot>
const WeightFn* weight_table_of(int64_t v, int64_t rs) {
    return rs == 1 ? weight_table_of<Dot, 1>(v) : weight_table_of<Dot, 0>(v);
}

}  // namespace

const TileFn* tile_table(bool native, int v, int64_t ps) {
    return native ? table_of<Native>(v, ps) : table_of<Emulated>(v, ps);
}

const WeightFn* weight_table(bool native, int64_t v, int64_t rs) {
    return native ? weight_table_of<Native>(v, rs) : weight_table_of<Emulated>(v, rs);
}

}  // namespace ember::kernels::cpu::nhwc_bf16

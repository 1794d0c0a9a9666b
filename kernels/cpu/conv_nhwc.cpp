// CPU direct conv2d forward on channels-last tensors (kernels/cpu/conv_nhwc.h).
//
// Math:  out[n][oy][ox][o] = bias[o] + Σ_{i, j, c} w[o][c][i][j] ·
//        in[n][oy·sh − ph + i·dh][ox·sw − pw + j·dw][c] (zero outside).
// Layout: a pixel's channels are adjacent, so with the image zero-padded
//   (one copy per image, skipped without padding) every tap of a tile of R
//   pixels along an output row reads R pixels sw·C floats apart, and the
//   tile's R × 16·V outputs are R runs of adjacent channels of the output.
// Tiles: R output pixels × V vectors of 16 output channels (R·V ≤ 28
//   accumulators): per (tap, input channel) V vector loads of the packed
//   weights ([tap][c][o]) and R broadcast input values for R·V FMAs. The
//   output rows are cut into equal tiles of at most kMaxR[V] pixels.
// Cost:  2·N·O·OH·OW·C·kH·kW FLOPs; reads the input once (plus the padded
//   copy, within L2) and writes the output once, straight from the tiles.
// Threads: images split over OpenMP threads; each output is computed by one
//   tile in a fixed order: bit-identical for any thread count.
// Test: tests/kernels/test_conv_nhwc.cpp; benchmark: `ember bench conv`
//   (the channels_last rows).
#include "kernels/cpu/conv_nhwc.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/conv_threads.h"

namespace ember::kernels::cpu::nhwc {

namespace {

using conv_detail::for_items;
using conv_detail::team_size;

using vec = float __attribute__((vector_size(64)));  // 16 lanes: one AVX-512 register
constexpr int64_t kLanes = 16;
constexpr int kMaxV = 4;
// The widest tile (pixels) for V output vectors: R·V ≤ 28 accumulators.
constexpr std::array<int, kMaxV + 1> kMaxR = {0, 14, 14, 9, 7};

inline vec load(const float* p) {
    vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }

// acc[r][v] = bias[16v ..] + Σ_t Σ_{c<C} w[t·C·O + c·O + 16v ..] · x[r·ps + off[t] + c],
// then y[r·O + 16v ..] = acc (bias may be null: zero).
template <int R, int V>
void tile(const float* x, int64_t ps, const int64_t* off, int64_t taps, int64_t C, const float* w,
          int64_t O, const float* bias, float* y) {
    vec acc[R][V];
    for (int v = 0; v < V; ++v) {
        const vec b = bias ? load(bias + kLanes * v) : vec{};
        for (int r = 0; r < R; ++r) acc[r][v] = b;
    }
    for (int64_t t = 0; t < taps; ++t) {
        const float* xt = x + off[t];
        const float* wt = w + t * C * O;
        for (int64_t c = 0; c < C; ++c, wt += O) {
            vec wv[V];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) wv[v] = load(wt + kLanes * v);
#pragma GCC unroll 14
            for (int r = 0; r < R; ++r) {
                const float b = xt[r * ps + c];
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) acc[r][v] += b * wv[v];
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) store(y + r * O + kLanes * v, acc[r][v]);
}

using TileFn = decltype(&tile<1, 1>);
// tile<R, V> for R = 1 .. kMaxR[V], indexed by R − 1.
template <int V, int... R>
constexpr std::array<TileFn, sizeof...(R)> tiles(std::integer_sequence<int, R...>) {
    return {&tile<R + 1, V>...};
}
constexpr auto kTiles1 = tiles<1>(std::make_integer_sequence<int, kMaxR[1]>{});
constexpr auto kTiles2 = tiles<2>(std::make_integer_sequence<int, kMaxR[2]>{});
constexpr auto kTiles3 = tiles<3>(std::make_integer_sequence<int, kMaxR[3]>{});
constexpr auto kTiles4 = tiles<4>(std::make_integer_sequence<int, kMaxR[4]>{});

const TileFn* tile_table(int v) {
    switch (v) {
        case 4:
            return kTiles4.data();
        case 3:
            return kTiles3.data();
        case 2:
            return kTiles2.data();
        default:
            return kTiles1.data();
    }
}

int64_t macs(const Conv2dShape& s) { return s.n * s.o * s.oh * s.ow * s.c * s.kh * s.kw; }

}  // namespace

bool fits(const Conv2dShape& s) {
    return s.groups == 1 && s.o % kLanes == 0 && s.c <= kMaxChannels && s.o <= kMaxChannels;
}

void forward(const Conv2dShape& s, const float* in, const float* weight, const float* bias,
             float* out) {
    const int64_t taps = s.kh * s.kw;
    // wp[t][c][o] = weight[o][c][t]: a tile's output channels of one (tap, channel) adjacent.
    std::vector<float> wp(size_t(taps * s.c * s.o));
    for (int64_t o = 0; o < s.o; ++o)
        for (int64_t c = 0; c < s.c; ++c)
            for (int64_t t = 0; t < taps; ++t)
                wp[size_t((t * s.c + c) * s.o + o)] = weight[(o * s.c + c) * taps + t];

    // The image as the tiles read it: padded by (ph, pw) when there is padding.
    const bool padded = s.ph > 0 || s.pw > 0;
    const int64_t hp = s.h + 2 * s.ph, wpx = s.w + 2 * s.pw;
    std::vector<int64_t> off(static_cast<size_t>(taps));
    for (int64_t i = 0; i < s.kh; ++i)
        for (int64_t j = 0; j < s.kw; ++j)
            off[size_t(i * s.kw + j)] = (i * s.dh * wpx + j * s.dw) * s.c;

    // Vectors of output channels per tile (the widest that divides O / 16),
    // and the output row cut into `cuts` tiles of `r` pixels (the last narrower).
    const int64_t vecs = s.o / kLanes;
    const int v = vecs % 4 == 0 ? 4 : vecs % 3 == 0 ? 3 : vecs % 2 == 0 ? 2 : 1;
    const TileFn* table = tile_table(v);
    const int64_t cuts = (s.ow + kMaxR[size_t(v)] - 1) / kMaxR[size_t(v)];
    const int64_t r = cuts > 0 ? (s.ow + cuts - 1) / cuts : 0;

    const int team = team_size(s.n, macs(s));
    const size_t per_thread = padded ? size_t(hp * wpx * s.c) : 0;
    std::vector<float> scratch(per_thread * size_t(team));
    const int64_t row = s.w * s.c;  // floats of one input row
    for_items(s.n, team, [&](int64_t n, int thread) {
        const float* img = in + n * s.h * row;
        if (padded) {
            float* p = scratch.data() + per_thread * size_t(thread);
            const int64_t prow = wpx * s.c;
            std::fill(p, p + s.ph * prow, 0.0f);
            std::fill(p + (s.ph + s.h) * prow, p + hp * prow, 0.0f);
            for (int64_t iy = 0; iy < s.h; ++iy) {
                float* dst = p + (s.ph + iy) * prow;
                std::fill(dst, dst + s.pw * s.c, 0.0f);
                std::memcpy(dst + s.pw * s.c, img + iy * row, size_t(row) * sizeof(float));
                std::fill(dst + s.pw * s.c + row, dst + prow, 0.0f);
            }
            img = p;
        }
        const int64_t ps = s.sw * s.c;  // floats between a tile's pixels
        for (int64_t oy = 0; oy < s.oh; ++oy) {
            const float* x = img + oy * s.sh * wpx * s.c;
            float* y = out + (n * s.oh + oy) * s.ow * s.o;
            for (int64_t ox = 0; ox < s.ow; ox += r) {
                const int64_t width = std::min(r, s.ow - ox);
                for (int64_t o0 = 0; o0 < s.o; o0 += kLanes * v)
                    table[width - 1](x + ox * ps, ps, off.data(), taps, s.c, wp.data() + o0, s.o,
                                     bias ? bias + o0 : nullptr, y + ox * s.o + o0);
            }
        }
    });
}

}  // namespace ember::kernels::cpu::nhwc

// CPU direct conv2d on channels-last tensors: forward, grad_input and
// grad_weight (kernels/cpu/conv_nhwc.h).
//
// Math:  out[n][oy][ox][o] = bias[o] + Σ_{i, j, c} w[o][c][i][j] ·
//        in[n][oy·sh − ph + i·dh][ox·sw − pw + j·dw][c] (zero outside);
//        grad_input by stride phase (see grad_input below), grad_weight
//        dw[o][c][i][j] = Σ_{n, oy, ox} dy[n][oy][ox][o] · in[n][oy·sh − ph +
//        i·dh][ox·sw − pw + j·dw][c].
// Layout: a pixel's channels are adjacent, so with the image zero-padded
//   (one copy per image, skipped without padding) every tap of a tile of R
//   pixels along an output row reads R pixels sw·C floats apart, and the
//   tile's R × 16·V outputs are R runs of adjacent channels of the output.
// Tiles: R output pixels × V vectors of 16 output channels (R·V ≤ 28
//   accumulators): per (tap, input channel) V vector loads of the packed
//   weights ([tap][c][o]) and R broadcast input values for R·V FMAs. The
//   output rows are cut into equal tiles of at most kMaxR[V] pixels.
//   grad_input runs the same tiles over grad_out with the weights [t][o][c]
//   of each phase's taps. grad_weight uses the direct kernels' weight tile
//   (kernels/cpu/conv_weight_tile.h) on the input and grad_out as they lie:
//   both are channel-last already.
// Cost:  2·N·O·OH·OW·C·kH·kW FLOPs per pass; each reads its operands once
//   (plus a padded copy of an image, within L2) and writes its result once.
// Threads: forward and grad_input split the images (each output computed by
//   one tile in a fixed order); grad_weight splits the batch into chunks of
//   images (from the sizes alone) and adds their partials in chunk order:
//   bit-identical for any thread count.
// Test: tests/kernels/test_conv_nhwc.cpp; benchmark: `ember bench conv`
//   (the channels_last rows).
#include "kernels/cpu/conv_nhwc.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/conv_nhwc_plan.h"
#include "kernels/cpu/conv_threads.h"
#include "kernels/cpu/conv_weight_tile.h"

namespace ember::kernels::cpu::nhwc {

namespace {

using conv_detail::for_items;
using conv_detail::team_size;

using weight_tiles::load;
using weight_tiles::store;
using weight_tiles::vec;
constexpr int64_t kChunkBytes = 768 << 10;  // a grad_weight chunk's data: within L2

// acc[r][v] = bias[16v ..] + Σ_t Σ_{c<C} w[t·C·O + c·O + 16v ..] · x[r·ps + off[t] + c],
// then y[r·ys + 16v ..] = acc (bias may be null: zero). C is the reduced
// channel count, O the row length of the packed weights.
template <int R, int V>
void tile(const float* x, int64_t ps, const int64_t* off, int64_t taps, int64_t C, const float* w,
          int64_t O, const float* bias, float* y, int64_t ys) {
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
        for (int v = 0; v < V; ++v) store(y + r * ys + kLanes * v, acc[r][v]);
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

// One row of `width` outputs of n channels: pixel k reads x + k·ps (taps at
// off, k channels reduced) and writes y + k·ys.
void row(const Cut& c, const TileFn* table, int64_t width, const float* x, int64_t ps, const int64_t* off, int64_t taps,
         int64_t k, const float* w, int64_t n, const float* bias, float* y, int64_t ys) {
    for (int64_t p0 = 0; p0 < width; p0 += c.r) {
        const int64_t pixels = std::min(c.r, width - p0);
        for (int64_t o0 = 0; o0 < n; o0 += kLanes * c.v)
            table[pixels - 1](x + p0 * ps, ps, off, taps, k, w + o0, n,
                                bias ? bias + o0 : nullptr, y + p0 * ys + o0, ys);
    }
}

// One image [rows, cols, ch] zero-padded by (top, left) and to [prows, pcols, ch] at dst.
void pad_image(const float* src, int64_t rows, int64_t cols, int64_t ch, int64_t top, int64_t left,
               int64_t prows, int64_t pcols, float* dst) {
    nhwc::pad_image(src, rows, cols, ch, top, left, prows, pcols, ch, dst, [](float v) { return v; });
}

// wp[t][c][o] = weight[o][c][t] for the taps listed: a tile's output
// channels of one (tap, channel) adjacent.
std::vector<float> pack_forward(const Conv2dShape& s, const float* weight) {
    const int64_t taps = s.kh * s.kw;
    std::vector<float> wp(size_t(taps * s.c * s.o));
    for (int64_t o = 0; o < s.o; ++o)
        for (int64_t c = 0; c < s.c; ++c)
            for (int64_t t = 0; t < taps; ++t)
                wp[size_t((t * s.c + c) * s.o + o)] = weight[(o * s.c + c) * taps + t];
    return wp;
}

}  // namespace

bool fits(const Conv2dShape& s, Pass pass) {
    if (s.groups != 1 || s.c > kMaxChannels || s.o > kMaxChannels) return false;
    return pass == Pass::grad_input ? s.c % kLanes == 0 : s.o % kLanes == 0;
}

void forward(const Conv2dShape& s, const float* in, const float* weight, const float* bias,
             float* out) {
    const int64_t taps = s.kh * s.kw;
    const std::vector<float> wp = pack_forward(s, weight);
    // The image as the tiles read it: padded by (ph, pw) when there is padding.
    const bool padded = s.ph > 0 || s.pw > 0;
    const int64_t hp = s.h + 2 * s.ph, wpx = s.w + 2 * s.pw;
    std::vector<int64_t> off(static_cast<size_t>(taps));
    for (int64_t i = 0; i < s.kh; ++i)
        for (int64_t j = 0; j < s.kw; ++j)
            off[size_t(i * s.kw + j)] = (i * s.dh * wpx + j * s.dw) * s.c;
    const Cut c = cut(s.o, s.ow);
    const int team = team_size(s.n, macs(s));
    const size_t per_thread = padded ? size_t(hp * wpx * s.c) : 0;
    std::vector<float> scratch(per_thread * size_t(team));
    for_items(s.n, team, [&](int64_t n, int thread) {
        const float* img = in + n * s.h * s.w * s.c;
        if (padded) {
            float* p = scratch.data() + per_thread * size_t(thread);
            pad_image(img, s.h, s.w, s.c, s.ph, s.pw, hp, wpx, p);
            img = p;
        }
        for (int64_t oy = 0; oy < s.oh; ++oy)
            row(c, tile_table(c.v), s.ow, img + oy * s.sh * wpx * s.c, s.sw * s.c, off.data(), taps, s.c, wp.data(),
                s.o, bias, out + (n * s.oh + oy) * s.ow * s.o, s.o);
    });
}

// grad_input by stride phase (grad_input_phases): per phase, the tiles
// over grad_out padded once per image, with the weights [t][o][c] of its taps.
void grad_input(const Conv2dShape& s, const float* grad_out, const float* weight,
                float* grad_input) {
    const Phases plan = grad_input_phases(s);
    // Per phase: the packed weights [t][o][c] of its taps and their offsets.
    std::vector<std::vector<float>> w(plan.phases.size());
    std::vector<std::vector<int64_t>> off(plan.phases.size());
    for (size_t k = 0; k < plan.phases.size(); ++k) {
        const Phase& p = plan.phases[k];
        for (size_t t = 0; t < p.i.size(); ++t) {
            off[k].push_back(p.pixel[t] * s.o);
            for (int64_t o = 0; o < s.o; ++o)
                for (int64_t c = 0; c < s.c; ++c)
                    w[k].push_back(weight[((o * s.c + c) * s.kh + p.i[t]) * s.kw + p.j[t]]);
        }
    }

    const Cut c = cut(s.c, (s.w + s.sw - 1) / s.sw);
    const TileFn* table = tile_table(c.v);
    const int team = team_size(s.n, macs(s));
    const size_t per_thread = size_t(plan.rows * plan.cols * s.o);
    std::vector<float> scratch(per_thread * size_t(team));
    for_items(s.n, team, [&](int64_t n, int thread) {
        float* pd = scratch.data() + per_thread * size_t(thread);
        pad_image(grad_out + n * s.oh * s.ow * s.o, s.oh, s.ow, s.o, plan.top, plan.left,
                  plan.rows, plan.cols, pd);
        float* img = grad_input + n * s.h * s.w * s.c;
        for (size_t k = 0; k < plan.phases.size(); ++k) {
            const Phase& p = plan.phases[k];
            const int64_t taps = int64_t(off[k].size());
            for (int64_t u = 0; u < p.rows; ++u) {
                float* y = img + ((u * s.sh + p.a) * s.w + p.b) * s.c;
                if (taps == 0) {  // zeros, a vector of 16 at a time (s.c is a multiple)
                    static constexpr float zeros[kLanes] = {};
                    for (int64_t v = 0; v < p.cols; ++v)
                        for (int64_t e = 0; e < s.c; e += kLanes)
                            std::memcpy(y + v * s.sw * s.c + e, zeros, sizeof zeros);
                    continue;
                }
                row(c, table, p.cols, pd + ((u + plan.top) * plan.cols + plan.left) * s.o, s.o,
                    off[k].data(), taps, s.o, w[k].data(), s.c, nullptr, y, s.sw * s.c);
            }
        }
    });
}

void grad_weight(const Conv2dShape& s, const float* grad_out, const float* in, float* grad_weight) {
    namespace wt = weight_tiles;
    const int64_t taps = s.kh * s.kw, size = s.o * s.c * taps;
    const bool padded = s.ph > 0 || s.pw > 0;
    const int64_t hp = s.h + 2 * s.ph, wpx = s.w + 2 * s.pw;
    // Per image: the (padded) input, read in place when unpadded, and grad_out, read in place.
    const int64_t x_image = hp * wpx * s.c, dy_image = s.oh * s.ow * s.o;
    const int64_t images =
        conv_detail::chunk_images(s.n, (x_image + dy_image) * int64_t(sizeof(float)), kChunkBytes);
    const int64_t chunks = (s.n + images - 1) / images;
    const wt::Plan tp = wt::plan(s.o);
    // Each chunk's sums in partials[chunk] as [tap][c][o]; added in chunk order at the end.
    std::vector<float> partials(size_t(chunks * size));
    const int team = team_size(chunks, macs(s));
    const size_t per_thread = padded ? size_t(x_image * images) : 0;
    std::vector<float> scratch(per_thread * size_t(team));
    for_items(chunks, team, [&](int64_t chunk, int thread) {
        const int64_t n0 = chunk * images, m = std::min(s.n, n0 + images) - n0;
        const float* x = in + n0 * s.h * s.w * s.c;
        if (padded) {
            float* p = scratch.data() + per_thread * size_t(thread);
            for (int64_t k = 0; k < m; ++k)
                pad_image(in + (n0 + k) * s.h * s.w * s.c, s.h, s.w, s.c, s.ph, s.pw, hp, wpx,
                          p + k * x_image);
            x = p;
        }
        const float* dy = grad_out + n0 * dy_image;
        float* part = partials.data() + chunk * size;
        const int64_t xs = s.sw * s.c, xrow = s.sh * wpx * s.c;
        if (s.c == 1 && s.sw == 1 && s.dw == 1 && s.kw <= tp.rows) {
            // One channel (a stem): a kernel row's taps are adjacent pixels, one tile.
            for (int64_t i = 0; i < s.kh; ++i)
                for (int64_t o0 = 0; o0 < s.o; o0 += kLanes * tp.v)
                    tp.table[s.kw - 1](dy + o0, s.o, dy_image, x + i * s.dh * wpx, 1, xrow, x_image,
                                       m, s.oh, s.ow, part + i * s.kw * s.o + o0, s.o);
            return;
        }
        for (int64_t i = 0; i < s.kh; ++i)
            for (int64_t j = 0; j < s.kw; ++j) {
                const int64_t t = i * s.kw + j;
                const float* xt = x + (i * s.dh * wpx + j * s.dw) * s.c;
                for (int64_t o0 = 0; o0 < s.o; o0 += kLanes * tp.v)
                    for (int64_t c0 = 0; c0 < s.c; c0 += tp.rows) {
                        const int64_t r = std::min(tp.rows, s.c - c0);
                        tp.table[r - 1](dy + o0, s.o, dy_image, xt + c0, xs, xrow, x_image, m, s.oh,
                                        s.ow, part + (t * s.c + c0) * s.o + o0, s.o);
                    }
            }
    });
    wt::finish(partials, chunks, s.o, s.c, taps, grad_weight);
}

}  // namespace ember::kernels::cpu::nhwc

// CPU direct conv2d for small channel counts: forward, grad_input and
// grad_weight on register tiles, no im2col matrix (kernels/cpu/conv_direct.h).
//
// Layout: each image is copied into stride-phase planes
//   (kernels/cpu/conv_planes.h): every tap is a unit-stride run of the
//   output positions q = oy·Wv + ox over the "virtual" row width Wv ≥ OW;
//   the columns past OW (and the tail past OH·Wv) are computed and dropped.
//   Waste: the padding columns, (Wv − OW) / Wv — 7 % at 28×28, 22 % at 7×7.
// Math:
//   forward      out[o][q]  = Σ_taps Σ_c w[o][c][tap] · plane_tap[c][q + off_tap]
//   grad_input   plane_p[c][q] = Σ_{taps of plane p} Σ_o w[o][c][tap] · dy[o][q − off_tap]
//                (the adjoint as a gather: each plane of the input's layout
//                from grad_out in the virtual layout behind zeros, so the
//                reads before the first row or past a row's end find zeros;
//                then back into [C, H, W], padding positions dropped; only
//                the plane rows that hold input pixels are computed)
//   grad_weight  dw[o][c][tap] = Σ_images Σ_(oy, ox) dy[o][oy][ox] ·
//                  plane_tap[c][oy·Wv + ox + off_tap]
//                over the real outputs only, with the planes and grad_out
//                channel-last ([position][C], [pixel][O]) per chunk of images
// Tiles: forward and grad_input keep an 8 × (16·X) block of outputs in 8·X
//   vector registers (X = 1..3 pixel vectors, chosen by positions computed,
//   one vector counted dearer): per channel step X vector loads and 8 broadcast weights
//   for 8·X FMAs. grad_weight keeps R input channels × V vectors of 16
//   output channels (R·V ≤ 24) for the whole chunk: per pixel V vector loads
//   of grad_out and R broadcasts of the planes for R·V FMAs, no sum across
//   lanes; a one-channel input (a stem) takes a kernel row's taps as its R.
// Cost: 2·N·O·OH·OW·C·kH·kW FLOPs per pass (forward and grad_input also
//   compute the dropped columns). Per image the planes (C·Hv·Wv·sh·sw floats)
//   and the output stay in L2; a grad_weight chunk is sized to (kChunkBytes).
//   Weights are repacked once per call ([tap][c][o] or [tap][o][c]).
// Threads: forward and grad_input split the images; grad_weight splits the
//   batch into chunks of images (chunk_images: from the sizes alone), each
//   writing its own partial, and adds the partials in chunk order:
//   bit-identical for any thread count. Summation order differs from the
//   im2col path's.
// perf (`ember bench train --breakdown`, 2 threads): resnet8's 3×3 convs at
//   50–110 % of the same-run GEMM peak in each pass (the strided ones lowest);
//   1×1 convs stay on im2col. The tiles alone run at the core's FMA peak
//   from L1; about a third of a pass is moving data (plane copies, output
//   rows), so forward and grad_input prefetch the next image during the
//   tiles (NextImage: 5–13 % on resnet8's 16- and 32-channel layers, one
//   thread, interleaved runs).
// Test: tests/kernels/test_conv_direct.cpp; benchmark: `ember bench conv`.
#include "kernels/cpu/conv_direct.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/cpu/conv_planes.h"
#include "kernels/cpu/conv_threads.h"
#include "kernels/cpu/conv_weight_tile.h"
#include "kernels/cpu/transpose16.h"

namespace ember::kernels::cpu::direct {

namespace {

using conv_detail::chunk_images;
using conv_detail::for_items;
using conv_detail::team_size;
using planes::from_planes;
using planes::inside_columns;
using planes::to_planes;
using planes::to_virtual;

using weight_tiles::kLanes;
using weight_tiles::load;
using weight_tiles::store;
using weight_tiles::vec;
constexpr int kRows = 8;  // output (forward) or input (grad_input) channels per tile
constexpr int kMaxX = 3;  // pixel vectors per tile
constexpr int64_t kChunkBytes = 768 << 10;  // a grad_weight chunk's data: within L2

// ---- Micro-kernels ----

// acc[r][x] = Σ_t Σ_{c<k} w[t·wtap + c·ldw + r] · base[tap[t] + c·kstride + 16x],
// then out[r·ostride + 16x] = acc (add: +=). Forward: rows are output
// channels, taps the kernel's; grad_input: rows are input channels, one tap.
template <int X>
void gather_tile(const float* base, const int64_t* tap, int64_t taps, int64_t k, int64_t kstride,
                 const float* w, int64_t wtap, int64_t ldw, float* out, int64_t ostride, bool add) {
    vec acc[kRows][X] = {};
    for (int64_t t = 0; t < taps; ++t) {
        const float* a = base + tap[t];
        const float* b = w + t * wtap;
        for (int64_t c = 0; c < k; ++c, a += kstride, b += ldw) {
            vec xv[X];
#pragma GCC unroll 4
            for (int x = 0; x < X; ++x) xv[x] = load(a + kLanes * x);
#pragma GCC unroll 8
            for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
                for (int x = 0; x < X; ++x) acc[r][x] += b[r] * xv[x];
        }
    }
    for (int r = 0; r < kRows; ++r)
        for (int x = 0; x < X; ++x) {
            float* o = out + r * ostride + kLanes * x;
            store(o, add ? load(o) + acc[r][x] : acc[r][x]);
        }
}

using GatherFn = decltype(&gather_tile<1>);
constexpr std::array<GatherFn, kMaxX> kGather = {&gather_tile<1>, &gather_tile<2>, &gather_tile<3>};

// ---- Geometry: planes, taps, tiles (from the sizes alone) ----

// For q positions: the gather tile width in vectors and q rounded up to
// whole tiles of it, the cheapest by positions computed × cost per
// position (the wider on a tie). A one-vector tile costs more per position:
// it has 9 loads (1 pixel vector, 8 weights) for 8 FMAs and only 8
// accumulators to hide the FMA latency; two or three vectors are FMA-bound.
std::pair<int64_t, int64_t> tiles_for(int64_t q) {
    constexpr double kNarrowCost = 1.15;  // per position, of a one-vector tile
    std::pair<int64_t, int64_t> best{kMaxX, -1};
    double best_cost = 0;
    for (int64_t x = kMaxX; x >= 1; --x) {
        const int64_t pad = (q + kLanes * x - 1) / (kLanes * x) * (kLanes * x);
        const double cost = double(pad) * (x == 1 ? kNarrowCost : 1.0);
        if (best.second < 0 || cost < best_cost) best = {x, pad}, best_cost = cost;
    }
    return best;
}

struct Geometry : planes::Planes {
    int64_t x;     // pixel vectors per gather tile
    int64_t qpad;  // q rounded up to whole gather tiles (≥ whole vectors)
    int64_t ps;    // elements per plane channel: positions read past qpad included
};

Geometry make_geometry(const Conv2dShape& s) {
    Geometry g;
    static_cast<planes::Planes&>(g) = planes::make_planes(s);
    std::tie(g.x, g.qpad) = tiles_for(g.q);
    const int64_t need = std::max(g.hv * g.wv, g.qpad + g.max_off);
    g.ps = (need + kLanes - 1) / kLanes * kLanes;
    return g;
}

// ---- Channel-last copies for grad_weight: 16 × 16 blocks transposed in registers ----

// dst[v·ldd + c] = src[c·lds + v] for c < channels, v < count: `channels`
// rows into channel-last positions, in 16 × 16 blocks transposed in
// registers where the channels come in 16s; single elements elsewhere.
void to_channel_last(const float* src, int64_t lds, int64_t channels, int64_t count, float* dst,
                     int64_t ldd) {
    int64_t c0 = 0;
    for (; c0 + kLanes <= channels; c0 += kLanes) {
        int64_t v0 = 0;
        for (; v0 + kLanes <= count; v0 += kLanes) {
            vec r[16];
            for (int k = 0; k < 16; ++k) r[k] = load(src + (c0 + k) * lds + v0);
            transpose16(r);
            for (int k = 0; k < 16; ++k) store(dst + (v0 + k) * ldd + c0, r[k]);
        }
        for (int64_t v = v0; v < count; ++v)
            for (int64_t c = c0; c < c0 + kLanes; ++c) dst[v * ldd + c] = src[c * lds + v];
    }
    for (int64_t c = c0; c < channels; ++c)
        for (int64_t v = 0; v < count; ++v) dst[v * ldd + c] = src[c * lds + v];
}

// The image in [C, H, W] into channel-last planes: plane p at dst + p·pstride,
// position u·Wv + v's C channels adjacent, zero outside the input; only the
// planes that taps read. Through `tmp` (C·Hv·Wv floats per plane): the
// planes channel by channel, then transposed in 16 × 16 blocks.
void to_planes_last(const Conv2dShape& s, const Geometry& g, const float* in, float* dst,
                    int64_t pstride, float* tmp) {
    const int64_t len = g.hv * g.wv;
    to_planes(s, g, s.c, in, tmp, s.c * len, len, len);
    for (int64_t p = 0; p < g.planes; ++p)
        if (g.used[size_t(p)])
            to_channel_last(tmp + p * s.c * len, len, s.c, len, dst + p * pstride, s.c);
}

// Brings the next image's data (`floats` floats at `next`, null for none)
// into L2 while this one computes: step() once per tile, over `steps` tiles,
// prefetches its share of the cache lines. The kernels read each image's
// data in one burst (the plane copies); without this that burst waits on
// memory while the tiles, which read only L1 and L2, leave it idle.
class NextImage {
  public:
    NextImage(const float* next, int64_t floats, int64_t steps)
        : next_(next),
          lines_((floats + kLanes - 1) / kLanes),
          per_((lines_ + std::max<int64_t>(steps, 1) - 1) / std::max<int64_t>(steps, 1)) {}
    void step() {
        for (int64_t k = 0; next_ && k < per_ && line_ < lines_; ++k, ++line_)
            __builtin_prefetch(next_ + line_ * kLanes, 0, 2);
    }

  private:
    const float* next_;
    int64_t lines_, per_, line_ = 0;
};

int64_t macs(const Conv2dShape& s) { return s.n * s.o * s.oh * s.ow * s.c * s.kh * s.kw; }

}  // namespace

bool fits(const Conv2dShape& s, Pass pass) {
    // 1×1 kernels: im2col's GEMM reads the input in place (stride 1) or
    // gathers little (strided), and is as fast (resnet8's strided shortcuts
    // measured the same on both paths in `ember bench train --breakdown`).
    if (s.groups != 1 || s.kh * s.kw == 1 || s.c > kMaxChannels || s.o > kMaxChannels) return false;
    switch (pass) {
        case Pass::forward:
            return s.o % kRows == 0;
        case Pass::grad_weight:
            return s.o % kLanes == 0;
        case Pass::grad_input:
            return s.c % kRows == 0;
    }
    return false;
}

void forward(const Conv2dShape& s, const float* in, const float* weight, const float* bias,
             float* out) {
    const Geometry g = make_geometry(s);
    // wp[t][c][o] = weight[o][c][t]: a tile's 8 weights of one (tap, channel) are adjacent.
    std::vector<float> wp(size_t(g.taps * s.c * s.o));
    for (int64_t o = 0; o < s.o; ++o)
        for (int64_t c = 0; c < s.c; ++c)
            for (int64_t t = 0; t < g.taps; ++t)
                wp[size_t((t * s.c + c) * s.o + o)] = weight[(o * s.c + c) * g.taps + t];
    std::vector<int64_t> tap(size_t(g.taps));
    for (int64_t t = 0; t < g.taps; ++t)
        tap[size_t(t)] = g.plane[size_t(t)] * s.c * g.ps + g.off[size_t(t)];

    const int team = team_size(s.n, macs(s));
    const size_t plane_size = size_t(g.planes * s.c * g.ps), out_size = size_t(s.o * g.qpad);
    std::vector<float> scratch((plane_size + out_size) * size_t(team));
    const GatherFn tile = kGather[size_t(g.x - 1)];
    const int64_t ohw = s.oh * s.ow, image = s.c * s.h * s.w;
    for_items(s.n, team, [&](int64_t n, int thread) {
        float* planes = scratch.data() + (plane_size + out_size) * size_t(thread);
        float* y = planes + plane_size;  // [O][qpad]
        to_planes(s, g, s.c, in + n * image, planes, s.c * g.ps, g.ps, g.ps);
        NextImage next(n + 1 < s.n ? in + (n + 1) * image : nullptr, image,
                       g.qpad / (kLanes * g.x));
        for (int64_t q0 = 0; q0 < g.qpad; q0 += kLanes * g.x) {
            next.step();
            for (int64_t o0 = 0; o0 < s.o; o0 += kRows)
                tile(planes + q0, tap.data(), g.taps, s.c, g.ps, wp.data() + o0, s.c * s.o, s.o,
                     y + o0 * g.qpad + q0, g.qpad, false);
        }
        float* dst = out + n * s.o * ohw;
        for (int64_t o = 0; o < s.o; ++o) {
            const float b = bias ? bias[o] : 0.0f;
            for (int64_t oy = 0; oy < s.oh; ++oy) {
                const float* src = y + o * g.qpad + oy * g.wv;
                float* row = dst + o * ohw + oy * s.ow;
                for (int64_t ox = 0; ox < s.ow; ++ox) row[ox] = src[ox] + b;
            }
        }
    });
}

void grad_input(const Conv2dShape& s, const float* grad_out, const float* weight,
                float* grad_input) {
    const Geometry g = make_geometry(s);
    // The taps grouped by the plane they read: plane p's are order[first[p] .. first[p + 1]).
    std::vector<int64_t> first(size_t(g.planes + 1), 0), order;
    for (int64_t t = 0; t < g.taps; ++t) first[size_t(g.plane[size_t(t)] + 1)] += 1;
    for (int64_t p = 0; p < g.planes; ++p) first[size_t(p + 1)] += first[size_t(p)];
    for (int64_t p = 0; p < g.planes; ++p)
        for (int64_t t = 0; t < g.taps; ++t)
            if (g.plane[size_t(t)] == p) order.push_back(t);
    // wt[k][o][c] = weight[o][c][order[k]]; back[k]: where tap order[k] reads
    // grad_out, relative to the plane position it writes (the negated offset).
    std::vector<float> wt(size_t(g.taps * s.o * s.c));
    std::vector<int64_t> back(size_t(g.taps));
    int64_t front = 0;
    for (int64_t k = 0; k < g.taps; ++k) {
        const int64_t t = order[size_t(k)];
        back[size_t(k)] = -g.off[size_t(t)];
        front = std::max(front, g.off[size_t(t)]);
        for (int64_t o = 0; o < s.o; ++o)
            for (int64_t c = 0; c < s.c; ++c)
                wt[size_t((k * s.o + o) * s.c + c)] = weight[(o * s.c + c) * g.taps + t];
    }
    // Only each plane's rows that hold input pixels, [row0, row1), are
    // computed: from row0·Wv on, in whole tiles (the padding rows would be
    // dropped; at 7×7 this cuts the positions computed from 96 to 64). Each plane channel
    // has `len` elements; grad_out lies in the virtual layout behind
    // `front` zeros, long enough for every read.
    std::vector<int64_t> row0(size_t(g.planes)), row1(size_t(g.planes));
    int64_t span = 1, start = 0;
    for (int64_t p = 0; p < g.planes; ++p) {
        const int64_t a = p / s.sw;
        const int64_t u0 = s.ph > a ? (s.ph - a + s.sh - 1) / s.sh : 0;
        row0[size_t(p)] = std::min(u0, g.hv);
        row1[size_t(p)] = std::clamp((s.h + s.ph - a + s.sh - 1) / s.sh, row0[size_t(p)], g.hv);
        span = std::max(span, (row1[size_t(p)] - row0[size_t(p)]) * g.wv);
        start = std::max(start, row0[size_t(p)] * g.wv);
    }
    const auto [x, qp] = tiles_for(span);
    const int64_t len = start + qp, ds = front + std::max(len, g.q);

    const int team = team_size(s.n, macs(s));
    const size_t plane_size = size_t(g.planes * s.c * len), dy_size = size_t(s.o * ds);
    std::vector<float> scratch((plane_size + dy_size) * size_t(team));
    const GatherFn tile = kGather[size_t(x - 1)];
    std::vector<char> written(size_t(g.planes));
    for (int64_t p = 0; p < g.planes; ++p)
        written[size_t(p)] = first[size_t(p + 1)] > first[size_t(p)];
    const int64_t dy_image = s.o * s.oh * s.ow;
    for_items(s.n, team, [&](int64_t n, int thread) {
        float* planes = scratch.data() + (plane_size + dy_size) * size_t(thread);
        float* dy = planes + plane_size;
        to_virtual(s, g.wv, s.o, grad_out + n * dy_image, front, ds, ds, dy);
        NextImage next(n + 1 < s.n ? grad_out + (n + 1) * dy_image : nullptr, dy_image,
                       g.planes * qp / (kLanes * x));
        for (int64_t p = 0; p < g.planes; ++p) {
            const int64_t k0 = first[size_t(p)], taps = first[size_t(p + 1)] - k0;
            if (taps == 0) continue;  // no tap reads it: zero, written below
            const int64_t qs = row0[size_t(p)] * g.wv;
            for (int64_t q0 = qs; q0 < qs + qp; q0 += kLanes * x) {
                next.step();
                for (int64_t c0 = 0; c0 < s.c; c0 += kRows)
                    tile(dy + front + q0, back.data() + k0, taps, s.o, ds,
                         wt.data() + k0 * s.o * s.c + c0, s.o * s.c, s.c,
                         planes + (p * s.c + c0) * len + q0, len, false);
            }
        }
        // Back to [C, H, W]: input pixel (u·sh + a − ph, v·sw + b − pw) is plane (a, b)'s (u, v).
        from_planes(s, g, s.c, planes, s.c * len, len, written, grad_input + n * s.c * s.h * s.w);
    });
}

void grad_weight(const Conv2dShape& s, const float* grad_out, const float* in, float* grad_weight) {
    const Geometry g = make_geometry(s);
    const int64_t ohw = s.oh * s.ow, size = s.o * s.c * g.taps;
    // Per image: channel-last planes [plane][Hv·Wv][C] and grad_out [OH·OW][O].
    const int64_t plane_size = g.planes * g.hv * g.wv * s.c, dy_size = ohw * s.o;
    const int64_t images =
        chunk_images(s.n, (plane_size + dy_size) * int64_t(sizeof(float)), kChunkBytes);
    const int64_t chunks = (s.n + images - 1) / images;
    // Output channels per tile in vectors (1, 2 or 4), channels per tile.
    const weight_tiles::Plan tp = weight_tiles::plan(s.o);
    const int64_t v = tp.v, rows = tp.rows;
    const weight_tiles::WeightFn* table = tp.table;

    // Each chunk's sums in partials[chunk] as [tap][c][o]; added in chunk
    // order into grad_weight's [o][c][tap] at the end.
    std::vector<float> partials(size_t(chunks * size));
    const int team = team_size(chunks, macs(s));
    // Per thread: the chunk's planes and grad_out, and one image's planes
    // channel by channel on the way to channel-last.
    const size_t per_thread = size_t((plane_size + dy_size) * images + plane_size);
    std::vector<float> scratch(per_thread * size_t(team));
    for_items(chunks, team, [&](int64_t chunk, int thread) {
        const int64_t n0 = chunk * images, m = std::min(s.n, n0 + images) - n0;
        float* planes = scratch.data() + per_thread * size_t(thread);
        float* dy = planes + plane_size * images;
        float* tmp = dy + dy_size * images;
        for (int64_t k = 0; k < m; ++k) {
            to_planes_last(s, g, in + (n0 + k) * s.c * s.h * s.w, planes + k * plane_size,
                           g.hv * g.wv * s.c, tmp);
            const float* src = grad_out + (n0 + k) * s.o * ohw;
            float* dst = dy + k * dy_size;
            to_channel_last(src, ohw, s.o, ohw, dst, s.o);
        }
        float* part = partials.data() + chunk * size;
        if (s.c == 1 && s.sw == 1 && s.dw == 1 && s.kw <= rows) {
            // One channel (a stem): a kernel row's taps are adjacent positions, one tile.
            for (int64_t i = 0; i < s.kh; ++i) {
                const int64_t t = i * s.kw;
                const float* x = planes + g.plane[size_t(t)] * g.hv * g.wv + g.off[size_t(t)];
                for (int64_t o0 = 0; o0 < s.o; o0 += kLanes * v)
                    table[s.kw - 1](dy + o0, s.o, dy_size, x, 1, g.wv, plane_size, m, s.oh, s.ow,
                                    part + t * s.o + o0, s.o);
            }
            return;
        }
        for (int64_t t = 0; t < g.taps; ++t) {
            const float* x = planes + (g.plane[size_t(t)] * g.hv * g.wv + g.off[size_t(t)]) * s.c;
            for (int64_t o0 = 0; o0 < s.o; o0 += kLanes * v)
                for (int64_t c0 = 0; c0 < s.c; c0 += rows) {
                    const int64_t r = std::min(rows, s.c - c0);
                    table[r - 1](dy + o0, s.o, dy_size, x + c0, s.c, g.wv * s.c, plane_size, m,
                                 s.oh, s.ow, part + (t * s.c + c0) * s.o + o0, s.o);
                }
        }
    });
    weight_tiles::finish(partials, chunks, s.o, s.c, g.taps, grad_weight);
}

}  // namespace ember::kernels::cpu::direct

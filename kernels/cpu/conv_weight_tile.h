// The grad_weight register tile of the CPU direct convolutions (NCHW through
// channel-last planes, kernels/cpu/conv_direct.cpp; channels-last tensors as
// they lie, kernels/cpu/conv_nhwc.cpp), the sum of their per-chunk partials,
// and the 16-lane vector both use. Internal to those files.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "conv_threads.h"

namespace ember::kernels::cpu::weight_tiles {

using vec = float __attribute__((vector_size(64)));  // 16 lanes: one AVX-512 register
inline constexpr int64_t kLanes = 16;
inline constexpr int kAcc = 24;  // accumulator registers of a tile

/// 16 floats from p, or to p (no alignment needed).
inline vec load(const float* p) {
    vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }

// For images m < images, output rows oy < oh and columns ox < ow (pixel
// p = oy·ow + ox):
//   acc[r][v] = Σ x[m·x_image + oy·xrow + ox·xs + r] · dy[m·dy_image + p·ds + 16v]
// — R input channels (broadcast) times V vectors of output channels of
// grad_out, both channel-last — then out[r·ldo + 16v] = acc. Per pixel V
// vector loads and R broadcasts for R·V FMAs, no sum across lanes.
template <int V, int R>
void weight_tile(const float* dy, int64_t ds, int64_t dy_image, const float* x, int64_t xs,
                 int64_t xrow, int64_t x_image, int64_t images, int64_t oh, int64_t ow, float* out,
                 int64_t ldo) {
    vec acc[R][V] = {};
    for (int64_t m = 0; m < images; ++m) {
        const float* d = dy + m * dy_image;
        for (int64_t oy = 0; oy < oh; ++oy) {
            const float* xr = x + m * x_image + oy * xrow;
            for (int64_t ox = 0; ox < ow; ++ox, xr += xs, d += ds) {
                vec dv[V];
#pragma GCC unroll 4
                for (int v = 0; v < V; ++v) dv[v] = load(d + kLanes * v);
#pragma GCC unroll 24
                for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
                    for (int v = 0; v < V; ++v) acc[r][v] += xr[r] * dv[v];
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) store(out + r * ldo + kLanes * v, acc[r][v]);
}

using WeightFn = decltype(&weight_tile<1, 1>);
// weight_tile<V, R> for R = 1 .. kAcc / V, indexed by R − 1.
template <int V, int... R>
constexpr std::array<WeightFn, sizeof...(R)> make_table(std::integer_sequence<int, R...>) {
    return {&weight_tile<V, R + 1>...};
}
inline constexpr auto kWeight1 = make_table<1>(std::make_integer_sequence<int, kAcc>{});
inline constexpr auto kWeight2 = make_table<2>(std::make_integer_sequence<int, kAcc / 2>{});
inline constexpr auto kWeight4 = make_table<4>(std::make_integer_sequence<int, kAcc / 4>{});

/// The tile shape for o output channels (a multiple of 16): vectors of
/// output channels per tile (4, 2 or 1), the most input channels per tile,
/// and the table of tiles indexed by input channels − 1.
struct Plan {
    int64_t v, rows;
    const WeightFn* table;
};
inline Plan plan(int64_t o) {
    const int64_t v = o % 64 == 0 ? 4 : o % 32 == 0 ? 2 : 1;
    return {v, kAcc / v, v == 4 ? kWeight4.data() : v == 2 ? kWeight2.data() : kWeight1.data()};
}

/// grad_weight[o][c][t] = Σ_chunk partials[chunk][t][c][o], in chunk order:
/// summed in the partials' own layout (each chunk's run read in order,
/// vectorized), blocks of elements split over the threads, then reordered.
/// Bit-identical for any thread count.
inline void finish(const std::vector<float>& partials, int64_t chunks, int64_t o, int64_t c,
                   int64_t taps, float* grad_weight) {
    constexpr int64_t kBlock = 1024;
    const int64_t size = o * c * taps, blocks = (size + kBlock - 1) / kBlock;
    std::vector<float> total(size_t(size), 0.0f);
    conv_detail::for_items(blocks, conv_detail::team_size(blocks, chunks * size),
                           [&](int64_t b, int) {
                               float* dst = total.data() + b * kBlock;
                               const int64_t n = std::min(kBlock, size - b * kBlock);
                               for (int64_t k = 0; k < chunks; ++k) {
                                   const float* src = partials.data() + k * size + b * kBlock;
                                   for (int64_t e = 0; e < n; ++e) dst[e] += src[e];
                               }
                           });
    for (int64_t oo = 0; oo < o; ++oo)
        for (int64_t cc = 0; cc < c; ++cc)
            for (int64_t t = 0; t < taps; ++t)
                grad_weight[(oo * c + cc) * taps + t] = total[size_t((t * c + cc) * o + oo)];
}

}  // namespace ember::kernels::cpu::weight_tiles

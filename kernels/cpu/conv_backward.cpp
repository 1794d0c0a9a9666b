// CPU conv2d backward: grad_input (GEMM, then col2im), grad_weight (im2col,
// then GEMM) and grad_bias (sums), bit-identical for any thread count.
//
// Math:    per image n and group g, with col_g[n] the forward's im2col matrix
//          [C/G·kH·kW, OH·OW] (kernels/cpu/im2col.h) and W_g [O/G, C/G·kH·kW]:
//            grad_input_g[n] = col2im(W_gᵀ · dY_g[n])   (overlapping windows
//                              add up; taps in the padding are dropped)
//            grad_weight_g   = Σ_n dY_g[n] · col_g[n]ᵀ
//            grad_bias[o]    = Σ_{n, y, x} dY[n, o, y, x]
// Buffers: every requested output is overwritten in full. grad_input is
//          zeroed, then accumulated (+=) by col2im tile after tile (a 1×1
//          kernel with stride 1 and no padding has no col matrix: the GEMM
//          overwrites (=) it directly); grad_weight is zeroed, then each GEMM
//          accumulates (+=) one image's tile into it; grad_bias is written (=)
//          once per channel from an f64 sum. The col tiles are scratch.
// Layout:  contiguous NCHW grad_out and input, OIHW weight; f32 and f64 (the
//          front computes f16/bf16 in f32).
// Cost:    2·N·O·OH·OW·(C/G)·kH·kW FLOPs for each of grad_input and
//          grad_weight; N·O·OH·OW adds for grad_bias. Col tiles stay in L2.
// Threads: the work is cut into pieces whose shapes depend only on the sizes:
//          chunks of about kChunkRows rows of col (whole input channels),
//          blocks of kChunkRows output channels, tiles of output columns.
//          grad_input splits (image, group, chunk) items, each owning its
//          channels' planes; grad_weight splits (group, chunk, output block)
//          blocks, each summing over images and tiles in order (each block
//          redoes its chunk's im2col: about 1/64 of the block's GEMM work);
//          with fewer than 64 blocks the batch is split into parts too,
//          whose partial sums are added in part order at the end (the part
//          count, too, comes from the sizes). grad_bias splits the channels.
//          Eigen stays single-threaded (its threaded GEMM blocks K
//          differently), so every element sees the same GEMM calls in the
//          same order on 1 thread or 64: bit-identical results.
// perf:    one image with one group gives grad_input only ⌈(C/G)·kH·kW / chunk⌉
//          items (a split over tiles would need partial planes: windows of
//          neighbouring tiles overlap), leaving threads idle beyond that.
// Depthwise convs take kernels/cpu/conv_depthwise.cpp; small channel
//          counts (f32) the direct kernels where direct::fits says so:
//          kernels/cpu/conv_direct.cpp.
// Forward: kernels/cpu/conv.cpp. Test: tests/kernels/test_conv_backward.cpp;
// benchmark: bench/conv.cpp ("conv" family).
#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_depthwise.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/conv_nhwc_bf16.h"
#include "kernels/cpu/conv_threads.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/matmul.h"

namespace ember::kernels::cpu {

namespace {

using conv_detail::col2im;
using conv_detail::for_items;
using conv_detail::im2col;
using conv_detail::matrix;
using conv_detail::team_size;
using conv_detail::tile_columns;

// Rows of col per work chunk (rounded down to whole channels, at least one),
// and output channels per grad_weight block: small enough to give
// grad_weight several items per group, large enough that re-packing the
// other GEMM operand for every chunk or block costs little.
constexpr int64_t kChunkRows = 64;
// grad_weight with fewer blocks than this also splits the batch, into at
// most this many items, adding the parts' partial sums in order afterwards;
// the partials take at most kMaxPartial elements.
constexpr int64_t kMinWeightItems = 64;
constexpr int64_t kMaxPartial = int64_t(1) << 22;

// How the backward of one conv is cut into pieces: from the sizes alone.
struct Plan {
    int64_t cg, og, taps, ckk, ohw;
    int64_t chunk, chunks;  // rows of col per chunk, chunks per group
    int64_t nt;             // output columns per tile
    size_t scratch;         // elements of col tile per thread (a whole number of cache lines)
    bool direct;            // 1×1, stride 1, no padding: the input is the col matrix
};

Plan make_plan(const Conv2dShape& s, int64_t elem_size) {
    Plan p;
    p.cg = s.c / s.groups;
    p.og = s.o / s.groups;
    p.taps = s.kh * s.kw;
    p.ckk = p.cg * p.taps;
    p.ohw = s.oh * s.ow;
    p.chunk = std::max<int64_t>(1, kChunkRows / p.taps) * p.taps;
    p.chunks = (p.ckk + p.chunk - 1) / p.chunk;
    p.nt = tile_columns(p.ohw, std::min(p.chunk, p.ckk) + p.og, elem_size);
    p.direct = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
    // Equal alignment for every thread's tile, whatever the thread count.
    p.scratch = p.direct ? 0 : size_t((std::min(p.chunk, p.ckk) * p.nt + 15) / 16 * 16);
    return p;
}

// grad_input = col2im(W_gᵀ · dY_g) per (image, group, chunk of channels).
template <class T>
void grad_input(const Conv2dShape& s, const Plan& p, const T* dy, const T* wt, T* dx) {
    const int64_t items = s.n * s.groups * p.chunks, hw = s.h * s.w;
    const int team = team_size(items, s.n * s.o * p.ohw * p.ckk);
    std::vector<T> cols(p.scratch * size_t(team));
    for_items(items, team, [&](int64_t item, int t) {
        const int64_t k = item % p.chunks, g = (item / p.chunks) % s.groups,
                      n = item / (p.chunks * s.groups);
        const int64_t r0 = k * p.chunk, r1 = std::min(p.ckk, r0 + p.chunk), rows = r1 - r0;
        // Rows [r0, r1) of W_gᵀ: columns of the row-major W_g.
        const View wt_rows = matrix(wt + g * p.og * p.ckk + r0, rows, p.og, 1, p.ckk);
        const T* y = dy + (n * s.o + g * p.og) * p.ohw;
        T* x = dx + (n * s.c + g * p.cg) * hw;  // the group's planes; this chunk owns r0..r1's
        T* col = cols.data() + p.scratch * size_t(t);
        if (!p.direct) std::fill(x + r0 / p.taps * hw, x + r1 / p.taps * hw, T(0));
        for (int64_t j0 = 0; j0 < p.ohw; j0 += p.nt) {
            const int64_t j1 = std::min(p.ohw, j0 + p.nt);
            const View dy_tile = matrix(y + j0, p.og, j1 - j0, p.ohw);
            if (p.direct) {
                matmul(matrix(x + r0 * hw + j0, rows, j1 - j0, hw), wt_rows, dy_tile);
            } else {
                matmul(matrix(col, rows, j1 - j0, j1 - j0), wt_rows, dy_tile);
                col2im(col, s, r0, r1, j0, j1, x);
            }
        }
    });
}

// grad_weight_g[o0..o1, r0..r1) = Σ_n Σ_tiles (dY_g[n] rows o0..o1, tile) ·
// (col_g[n] rows r0..r1, tile)ᵀ per (group, chunk, block of output channels)
// block, and per part of the batch when there are few blocks.
template <class T>
void grad_weight(const Conv2dShape& s, const Plan& p, const T* dy, const T* in, T* dw) {
    const int64_t oblocks = (p.og + kChunkRows - 1) / kChunkRows, hw = s.h * s.w;
    const int64_t blocks = s.groups * p.chunks * oblocks, size = s.o * p.ckk;
    // Parts of the batch (contiguous runs of images); part 0 sums into dw,
    // part q > 0 into partials[q − 1]. All from the sizes alone.
    int64_t parts = blocks == 0 ? 1 : (kMinWeightItems + blocks - 1) / blocks;
    parts =
        std::max<int64_t>(1, std::min({parts, s.n, 1 + kMaxPartial / std::max<int64_t>(size, 1)}));
    const int64_t per_part = (s.n + parts - 1) / parts;
    if (per_part > 0) parts = (s.n + per_part - 1) / per_part;  // none empty
    std::vector<T> partials(size_t((parts - 1) * size));
    const int64_t items = blocks * parts;
    const int team = team_size(items, s.n * s.o * p.ohw * p.ckk);
    std::vector<T> cols(p.scratch * size_t(team));
    for_items(items, team, [&](int64_t item, int t) {
        const int64_t part = item / blocks, blk = item % blocks;
        const int64_t b = blk % oblocks, k = (blk / oblocks) % p.chunks,
                      g = blk / (oblocks * p.chunks);
        const int64_t r0 = k * p.chunk, r1 = std::min(p.ckk, r0 + p.chunk), rows = r1 - r0;
        const int64_t o0 = b * kChunkRows, ob = std::min(p.og, o0 + kChunkRows) - o0;
        T* base = part == 0 ? dw : partials.data() + (part - 1) * size;
        T* w = base + (g * p.og + o0) * p.ckk + r0;  // block [ob, rows] with row stride ckk
        for (int64_t o = 0; o < ob; ++o) std::fill(w + o * p.ckk, w + o * p.ckk + rows, T(0));
        const View dw_block = matrix(w, ob, rows, p.ckk);
        T* col = cols.data() + p.scratch * size_t(t);
        for (int64_t n = part * per_part; n < std::min(s.n, (part + 1) * per_part); ++n) {
            const T* x = in + (n * s.c + g * p.cg) * hw;
            const T* y = dy + (n * s.o + g * p.og + o0) * p.ohw;
            for (int64_t j0 = 0; j0 < p.ohw; j0 += p.nt) {
                const int64_t j1 = std::min(p.ohw, j0 + p.nt), nt = j1 - j0;
                // (col rows, tile)ᵀ [nt, rows]: column-major views of col or of the input.
                View col_t;
                if (p.direct) {
                    col_t = matrix(x + r0 * hw + j0, nt, rows, 1, hw);
                } else {
                    im2col(x, s, r0, r1, j0, j1, col);
                    col_t = matrix(col, nt, rows, 1, nt);
                }
                matmul(dw_block, matrix(y + j0, ob, nt, p.ohw), col_t, true);
            }
        }
    });
    if (parts == 1) return;
    // dw += partials in part order, a weight row per item.
    for_items(s.o, team_size(s.o, (parts - 1) * size), [&](int64_t o, int) {
        for (int64_t q = 0; q < parts - 1; ++q) {
            const T* src = partials.data() + q * size + o * p.ckk;
            for (int64_t e = 0; e < p.ckk; ++e) dw[o * p.ckk + e] += src[e];
        }
    });
}

// grad_bias[o] = Σ dY[:, o]: summed in f64, one channel per item.
template <class T>
void grad_bias(const Conv2dShape& s, const T* dy, T* db) {
    const int64_t ohw = s.oh * s.ow;
    for_items(s.o, team_size(s.o, s.n * s.o * ohw), [&](int64_t o, int) {
        double sum = 0;
        for (int64_t n = 0; n < s.n; ++n) {
            const T* y = dy + (n * s.o + o) * ohw;
            double plane = 0;
            for (int64_t q = 0; q < ohw; ++q) plane += double(y[q]);
            sum += plane;
        }
        db[o] = T(sum);
    });
}

template <class T>
void run(const Conv2dShape& s, const T* dy, const T* in, const T* wt, T* dx, T* dw, T* db) {
    if (depthwise::fits(s)) {
        if (dx) depthwise::grad_input(s, dy, wt, dx);
        if (dw) depthwise::grad_weight(s, dy, in, dw);
        dx = dw = nullptr;
    }
    const Plan p = make_plan(s, sizeof(T));
    if (dx) grad_input(s, p, dy, wt, dx);
    if (dw) grad_weight(s, p, dy, in, dw);
    if (db) grad_bias(s, dy, db);
}

}  // namespace

void conv2d_backward(const Conv2dShape& s, DType dtype, const void* grad_out, const void* input,
                     const void* weight, void* grad_input, void* grad_weight, void* grad_bias) {
    switch (dtype) {
        case DType::f32: {
            const auto* dy = static_cast<const float*>(grad_out);
            const auto* x = static_cast<const float*>(input);
            const auto* w = static_cast<const float*>(weight);
            auto* dx = static_cast<float*>(grad_input);
            auto* dw = static_cast<float*>(grad_weight);
            // Small channel counts: the direct kernels (kernels/cpu/conv_direct.cpp).
            if (dx && direct::fits(s, direct::Pass::grad_input)) {
                direct::grad_input(s, dy, w, dx);
                dx = nullptr;
            }
            if (dw && direct::fits(s, direct::Pass::grad_weight)) {
                direct::grad_weight(s, dy, x, dw);
                dw = nullptr;
            }
            return run(s, dy, x, w, dx, dw, static_cast<float*>(grad_bias));
        }
        case DType::f64:
            return run(s, static_cast<const double*>(grad_out), static_cast<const double*>(input),
                       static_cast<const double*>(weight), static_cast<double*>(grad_input),
                       static_cast<double*>(grad_weight), static_cast<double*>(grad_bias));
        default:
            break;
    }
    EMBER_FAIL("internal error: cpu::conv2d_backward got dtype ", dtype_name(dtype));
}

bool conv2d_backward_channels_last_fits(const Conv2dShape& s, DType dtype, bool grad_input,
                                        bool grad_weight) {
    switch (dtype) {
        case DType::f32:
            return (!grad_input || nhwc::fits(s, nhwc::Pass::grad_input)) &&
                   (!grad_weight || nhwc::fits(s, nhwc::Pass::grad_weight));
        case DType::bf16:
            return (!grad_input || nhwc_bf16::fits(s, nhwc::Pass::grad_input)) &&
                   (!grad_weight || nhwc_bf16::fits(s, nhwc::Pass::grad_weight));
        default:
            return false;
    }
}

namespace {

// grad_bias[o] = Σ_n Σ_pixels dy[n][pixel][o] of channels-last T (f32 or
// bf16 bits read through `value`), in f64, one channel per item.
template <class T, class Value, class Put>
void channels_last_bias(const Conv2dShape& s, const T* dy, T* db, Value value, Put put) {
    const int64_t ohw = s.oh * s.ow;
    for_items(s.o, team_size(s.o, s.n * s.o * ohw), [&](int64_t o, int) {
        double sum = 0;
        for (int64_t n = 0; n < s.n; ++n) {
            const T* y = dy + n * ohw * s.o + o;
            double plane = 0;
            for (int64_t q = 0; q < ohw; ++q) plane += double(value(y[q * s.o]));
            sum += plane;
        }
        db[o] = put(float(sum));
    });
}

}  // namespace

void conv2d_backward_channels_last(const Conv2dShape& s, DType dtype, const void* grad_out,
                                   const void* input, const void* weight, void* grad_input,
                                   void* grad_weight, void* grad_bias) {
    EMBER_INTERNAL_ASSERT(conv2d_backward_channels_last_fits(s, dtype, grad_input != nullptr,
                                                             grad_weight != nullptr));
    if (dtype == DType::bf16) {
        const auto* dy = static_cast<const uint16_t*>(grad_out);
        if (grad_input)
            nhwc_bf16::grad_input(s, dy, static_cast<const uint16_t*>(weight),
                                  static_cast<uint16_t*>(grad_input));
        if (grad_weight)
            nhwc_bf16::grad_weight(s, dy, static_cast<const uint16_t*>(input),
                                   static_cast<uint16_t*>(grad_weight));
        if (grad_bias)
            channels_last_bias(s, dy, static_cast<uint16_t*>(grad_bias), bf16_bits_to_float,
                               float_to_bf16_bits);
        return;
    }
    const auto* dy = static_cast<const float*>(grad_out);
    if (grad_input)
        nhwc::grad_input(s, dy, static_cast<const float*>(weight), static_cast<float*>(grad_input));
    if (grad_weight)
        nhwc::grad_weight(s, dy, static_cast<const float*>(input),
                          static_cast<float*>(grad_weight));
    auto same = [](float v) { return v; };
    if (grad_bias) channels_last_bias(s, dy, static_cast<float*>(grad_bias), same, same);
}

}  // namespace ember::kernels::cpu

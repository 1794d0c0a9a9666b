// CPU direct conv2d on channels-last bf16 tensors: forward, grad_input and
// grad_weight on VDPBF16PS (kernels/cpu/conv_nhwc_bf16.h).
//
// Math:  as kernels/cpu/conv_nhwc.cpp; every product of two bf16 exact in
//        f32, the f32 sums rounded once to bf16 (nearest even) at the end.
// Pairs: VDPBF16PS multiplies two adjacent bf16 of a 32-bit word by the two
//        of another word and adds both products to an f32 lane (the odd
//        half's product first, then the even half's, each addition
//        rounded). The reduced dimension is cut into such pairs:
//        - forward: input channels (c, c + 1) of a pixel, adjacent in NHWC:
//          the padded copy of an image has an even channel count (a zero
//          channel after an odd one) and is read as words; the weights are
//          packed [tap][c/2][o] as words (the pair of channels in one word).
//        - grad_input: output channels (o, o + 1) of grad_out, the same way,
//          per stride phase (conv_nhwc_plan.h), weights [tap][o/2][c].
//        - grad_weight: images. The padded inputs of images (2p, 2p + 1)
//          are interleaved into one [hp][wp][c] plane of words, and their
//          grad_outs into [oh][ow][o] (an odd batch's last image paired
//          with zeros): every tap reads a pair at the same pixels, so one
//          packing per image pair serves all taps, and the tile steps over
//          output pixels as the f32 one does.
// Tiles: as the f32 kernels (R pixels × V vectors of 16 output channels;
//        grad_weight R input channels × V vectors of output channels), on
//        VDPBF16PS or its f32 emulation: kernels/cpu/conv_nhwc_bf16_tiles.cpp.
//        Subnormal operands are flushed where the emulation's operands are
//        copied or packed, as the instruction reads them.
// Cost:  2·N·O·OH·OW·C·kH·kW FLOPs per pass (a zero channel or pixel where
//        the count is odd); each pass reads its operands once into a padded
//        or packed copy within L2 and writes its result once. A pointwise
//        conv (1×1, no padding: a strided shortcut) copies only the input
//        pixels it reads (nhwc::pointwise), a quarter of them at stride 2.
// Threads: forward and grad_input split the images; grad_weight sums fixed
//        chunks of images into f32 partials added in chunk order:
//        bit-identical for any thread count.
// Test: tests/kernels/test_conv_nhwc_bf16.cpp; benchmark: `ember bench conv`
//        (the bf16 channels_last rows).
#include "kernels/cpu/conv_nhwc_bf16.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "core/half.h"
#include "core/settings.h"
#include "kernels/cpu/conv_nhwc_plan.h"
#include "kernels/cpu/conv_threads.h"
#include "kernels/cpu/conv_nhwc_bf16_tiles.h"
#include "kernels/cpu/conv_weight_tile.h"

namespace ember::kernels::cpu::nhwc_bf16 {

namespace {

using conv_detail::for_items;
using conv_detail::team_size;
using nhwc::Cut;
using nhwc::kLanes;

constexpr int64_t kMaxChannels = 64;         // as the f32 kernels (bench/RESULTS.md)
constexpr int64_t kChunkBytes = 768 << 10;  // a grad_weight chunk's packed data: within L2

// A bf16's bits with a subnormal read as zero (VDPBF16PS's rule). A lambda,
// so that the copies that apply it inline it and vectorize.
constexpr auto flush = [](uint16_t b) -> uint16_t {
    return (b & 0x7f80) == 0 ? uint16_t(b & 0x8000) : b;
};

// One row of `width` outputs of n channels: pixel p reads words x + p·ps
// (taps at off, K pairs reduced) and writes y + p·ys.
void row(const Cut& c, const TileFn* table, int64_t width, const uint32_t* x, int64_t ps,
         const int64_t* off, int64_t taps, int64_t K, const uint32_t* w, int64_t n,
         const float* bias, uint16_t* y, int64_t ys) {
    for (int64_t p0 = 0; p0 < width; p0 += c.r) {
        const int64_t pixels = std::min(c.r, width - p0);
        for (int64_t o0 = 0; o0 < n; o0 += kLanes * c.v)
            table[pixels - 1](x + p0 * ps, ps, off, taps, K, w + o0, n, bias ? bias + o0 : nullptr,
                              y + p0 * ys + o0, ys);
    }
}

// A word of two bf16: lo the even element, hi the odd one.
uint32_t word(uint16_t lo, uint16_t hi) { return uint32_t(flush(lo)) | uint32_t(flush(hi)) << 16; }

// The copies the tiles read: subnormals flushed for the emulation only
// (VDPBF16PS reads them as zero itself), so the native path copies plainly.
constexpr auto keep = [](uint16_t b) { return b; };
void pad_copy(bool native, const uint16_t* src, int64_t rows, int64_t cols, int64_t ch,
              int64_t top, int64_t left, int64_t prows, int64_t pcols, int64_t pch,
              uint16_t* dst) {
    if (native)
        nhwc::pad_image(src, rows, cols, ch, top, left, prows, pcols, pch, dst, keep);
    else
        nhwc::pad_image(src, rows, cols, ch, top, left, prows, pcols, pch, dst, flush);
}

// The copy of image `src` [h, w, c] a pass reads: pixels (oy·sh, ox·sw)
// gathered into [oh, ow, pch] for a pointwise conv (nhwc::pointwise), else
// the whole image padded into [h + 2ph, w + 2pw, pch].
void image_copy(bool native, const Conv2dShape& s, const uint16_t* src, int64_t pch,
                uint16_t* dst) {
    const bool gather = nhwc::pointwise(s);
    const int64_t hp = s.h + 2 * s.ph, wpx = s.w + 2 * s.pw;
    if (gather && native)
        nhwc::gather_pixels(src, s.w, s.c, s.sh, s.sw, s.oh, s.ow, pch, dst, keep);
    else if (gather)
        nhwc::gather_pixels(src, s.w, s.c, s.sh, s.sw, s.oh, s.ow, pch, dst, flush);
    else
        pad_copy(native, src, s.h, s.w, s.c, s.ph, s.pw, hp, wpx, pch, dst);
}

// The geometry of image_copy's result, in elements of pch channels: its
// rows and columns, and the step between the pixels (and rows) that output
// pixel steps (and output rows) read.
struct CopyGeometry {
    int64_t rows, cols, pixel_step, row_step;
};
CopyGeometry copy_geometry(const Conv2dShape& s) {
    if (nhwc::pointwise(s)) return {s.oh, s.ow, 1, s.ow};
    const int64_t wpx = s.w + 2 * s.pw;
    return {s.h + 2 * s.ph, wpx, s.sw, s.sh * wpx};
}

// d[e] = the word of a[e] and b[e] (b null: zero), each half through put.
template <class Put>
void interleave(const uint16_t* a, const uint16_t* b, int64_t count, uint32_t* d, Put put) {
    if (b)
        for (int64_t e = 0; e < count; ++e) d[e] = uint32_t(put(a[e])) | uint32_t(put(b[e])) << 16;
    else
        for (int64_t e = 0; e < count; ++e) d[e] = uint32_t(put(a[e]));
}

int64_t macs(const Conv2dShape& s) { return s.n * s.o * s.oh * s.ow * s.c * s.kh * s.kw; }

}  // namespace

bool fits(const Conv2dShape& s, Pass pass) {
    if (!__builtin_cpu_supports("avx512f")) return false;
    if (s.groups != 1 || s.c > kMaxChannels || s.o > kMaxChannels) return false;
    return pass == Pass::grad_input ? s.c % kLanes == 0 : s.o % kLanes == 0;
}

void forward(const Conv2dShape& s, const uint16_t* in, const uint16_t* weight,
             const uint16_t* bias, uint16_t* out) {
    const int64_t taps = s.kh * s.kw, K = (s.c + 1) / 2, c2 = 2 * K;
    const bool native = cpu_bf16_native();
    // wp[t][k][o] = the word of weight[o][2k][t] and weight[o][2k + 1][t] (zero past c).
    std::vector<uint32_t> wp(size_t(taps * K * s.o));
    for (int64_t t = 0; t < taps; ++t)
        for (int64_t k = 0; k < K; ++k)
            for (int64_t o = 0; o < s.o; ++o) {
                const uint16_t* w = weight + (o * s.c + 2 * k) * taps + t;
                wp[size_t((t * K + k) * s.o + o)] = word(w[0], 2 * k + 1 < s.c ? w[taps] : 0);
            }
    std::vector<float> b(bias ? size_t(s.o) : 0);
    for (size_t o = 0; o < b.size(); ++o) b[o] = bf16_bits_to_float(bias[o]);
    const CopyGeometry geo = copy_geometry(s);
    std::vector<int64_t> off(static_cast<size_t>(taps));
    for (int64_t i = 0; i < s.kh; ++i)
        for (int64_t j = 0; j < s.kw; ++j)
            off[size_t(i * s.kw + j)] = (i * s.dh * geo.cols + j * s.dw) * K;
    const Cut c = nhwc::cut(s.o, s.ow);
    const TileFn* table = tile_table(native, c.v, geo.pixel_step * K);
    const int team = team_size(s.n, macs(s));
    // Every image is copied (image_copy): padded or gathered, to an even
    // channel count (subnormals flushed for the emulation). Scratch is left
    // uninitialized: every word a tile reads is written first.
    const size_t per_thread = size_t(geo.rows * geo.cols * c2);
    const auto scratch = std::make_unique_for_overwrite<uint16_t[]>(per_thread * size_t(team));
    for_items(s.n, team, [&](int64_t n, int thread) {
        uint16_t* p = scratch.get() + per_thread * size_t(thread);
        image_copy(native, s, in + n * s.h * s.w * s.c, c2, p);
        const auto* img = reinterpret_cast<const uint32_t*>(p);
        for (int64_t oy = 0; oy < s.oh; ++oy)
            row(c, table, s.ow, img + oy * geo.row_step * K, geo.pixel_step * K, off.data(), taps,
                K, wp.data(), s.o, bias ? b.data() : nullptr, out + (n * s.oh + oy) * s.ow * s.o,
                s.o);
    });
}

void grad_input(const Conv2dShape& s, const uint16_t* grad_out, const uint16_t* weight,
                uint16_t* grad_input) {
    const nhwc::Phases plan = nhwc::grad_input_phases(s);
    const int64_t K = (s.o + 1) / 2, o2 = 2 * K, taps = s.kh * s.kw;
    const bool native = cpu_bf16_native();
    // Per phase: words [t][k][c] of weight[2k][c][tap] and weight[2k + 1][c][tap], and offsets.
    std::vector<std::vector<uint32_t>> w(plan.phases.size());
    std::vector<std::vector<int64_t>> off(plan.phases.size());
    for (size_t p = 0; p < plan.phases.size(); ++p) {
        const nhwc::Phase& ph = plan.phases[p];
        for (size_t t = 0; t < ph.i.size(); ++t) {
            off[p].push_back(ph.pixel[t] * K);
            const int64_t tap = ph.i[t] * s.kw + ph.j[t];
            for (int64_t k = 0; k < K; ++k)
                for (int64_t c = 0; c < s.c; ++c) {
                    const uint16_t* e = weight + (2 * k * s.c + c) * taps + tap;
                    w[p].push_back(word(e[0], 2 * k + 1 < s.o ? e[s.c * taps] : 0));
                }
        }
    }
    const Cut c = nhwc::cut(s.c, (s.w + s.sw - 1) / s.sw);
    const TileFn* table = tile_table(native, c.v, K);
    const int team = team_size(s.n, macs(s));
    const size_t per_thread = size_t(plan.rows * plan.cols * o2);
    const auto scratch = std::make_unique_for_overwrite<uint16_t[]>(per_thread * size_t(team));
    for_items(s.n, team, [&](int64_t n, int thread) {
        uint16_t* pd = scratch.get() + per_thread * size_t(thread);
        pad_copy(native, grad_out + n * s.oh * s.ow * s.o, s.oh, s.ow, s.o, plan.top, plan.left,
                 plan.rows, plan.cols, o2, pd);
        const auto* dy = reinterpret_cast<const uint32_t*>(pd);
        uint16_t* img = grad_input + n * s.h * s.w * s.c;
        for (size_t p = 0; p < plan.phases.size(); ++p) {
            const nhwc::Phase& ph = plan.phases[p];
            const int64_t count = int64_t(off[p].size());
            for (int64_t u = 0; u < ph.rows; ++u) {
                uint16_t* y = img + ((u * s.sh + ph.a) * s.w + ph.b) * s.c;
                if (count == 0) {  // zeros, a vector of 16 at a time (s.c is a multiple)
                    static constexpr uint16_t zeros[kLanes] = {};
                    for (int64_t v = 0; v < ph.cols; ++v)
                        for (int64_t e = 0; e < s.c; e += kLanes)
                            std::memcpy(y + v * s.sw * s.c + e, zeros, sizeof zeros);
                    continue;
                }
                row(c, table, ph.cols, dy + ((u + plan.top) * plan.cols + plan.left) * K, K,
                    off[p].data(), count, K, w[p].data(), s.c, nullptr, y, s.sw * s.c);
            }
        }
    });
}

void grad_weight(const Conv2dShape& s, const uint16_t* grad_out, const uint16_t* in,
                 uint16_t* grad_weight) {
    const int64_t taps = s.kh * s.kw, size = s.o * s.c * taps, pairs = (s.n + 1) / 2;
    // Per pair of images (2p, 2p + 1), packed as words (the second zero past
    // the batch): the inputs as image_copy leaves them ([rows][cols][c]) and
    // the grad_outs [oh][ow][o]. Every tap reads the pair at the same
    // pixels, so one packing serves all.
    const CopyGeometry geo = copy_geometry(s);
    const int64_t x_image = geo.rows * geo.cols * s.c, dy_image = s.oh * s.ow * s.o;
    const int64_t per_chunk = conv_detail::chunk_images(
        pairs, (x_image + dy_image) * int64_t(sizeof(uint32_t)), kChunkBytes);
    const int64_t chunks = (pairs + per_chunk - 1) / per_chunk;
    const int64_t v = s.o % 64 == 0 ? 4 : s.o % 32 == 0 ? 2 : 1, rows = kWeightRows / v;
    const bool native = cpu_bf16_native();
    // One channel (a stem): the tile's rows are a kernel row's taps, dw
    // pixels apart; otherwise they are adjacent channels.
    const bool stem = s.c == 1 && s.kw <= rows;
    const WeightFn* table = weight_table(native, v, stem ? s.dw : 1);
    // Each chunk's sums in partials[chunk] as [tap][c][o]; added in chunk order at the end.
    std::vector<float> partials(size_t(chunks * size));
    const int team = team_size(chunks, macs(s));
    const int64_t padded = x_image;  // bf16 halves of one copied image
    const size_t per_thread = size_t((x_image + dy_image) * per_chunk + padded);
    const auto scratch = std::make_unique_for_overwrite<uint32_t[]>(per_thread * size_t(team));
    for_items(chunks, team, [&](int64_t chunk, int thread) {
        const int64_t p0 = chunk * per_chunk, m = std::min(pairs, p0 + per_chunk) - p0;
        uint32_t* xp = scratch.get() + per_thread * size_t(thread);
        uint32_t* dp = xp + x_image * per_chunk;
        // Two padded images, halves of the last per_thread words.
        auto* pad0 = reinterpret_cast<uint16_t*>(dp + dy_image * per_chunk);
        uint16_t* pad1 = pad0 + padded;
        for (int64_t k = 0; k < m; ++k) {
            const int64_t n = 2 * (p0 + k);
            const bool second = n + 1 < s.n;
            for (int64_t e = 0; e < 1 + int64_t(second); ++e)
                image_copy(native, s, in + (n + e) * s.h * s.w * s.c, s.c, e == 0 ? pad0 : pad1);
            interleave(pad0, second ? pad1 : nullptr, x_image, xp + k * x_image, keep);
            const uint16_t* g = grad_out + n * dy_image;
            const uint16_t* g1 = second ? g + dy_image : nullptr;
            if (native)
                interleave(g, g1, dy_image, dp + k * dy_image, keep);
            else
                interleave(g, g1, dy_image, dp + k * dy_image, flush);
        }
        float* part = partials.data() + chunk * size;
        const int64_t xs = geo.pixel_step * s.c, xrow = geo.row_step * s.c, dy_row = s.ow * s.o;
        if (stem) {
            for (int64_t i = 0; i < s.kh; ++i)
                for (int64_t o0 = 0; o0 < s.o; o0 += kLanes * v)
                    table[s.kw - 1](dp + o0, s.o, dy_row, dy_image, xp + i * s.dh * geo.cols, s.dw,
                                    xs, xrow, x_image, m, s.oh, s.ow, part + i * s.kw * s.o + o0,
                                    s.o);
            return;
        }
        for (int64_t i = 0; i < s.kh; ++i)
            for (int64_t j = 0; j < s.kw; ++j) {
                const int64_t t = i * s.kw + j;
                const uint32_t* xt = xp + (i * s.dh * geo.cols + j * s.dw) * s.c;
                for (int64_t o0 = 0; o0 < s.o; o0 += kLanes * v)
                    for (int64_t c0 = 0; c0 < s.c; c0 += rows) {
                        const int64_t r = std::min(rows, s.c - c0);
                        table[r - 1](dp + o0, s.o, dy_row, dy_image, xt + c0, 1, xs, xrow, x_image,
                                     m, s.oh, s.ow, part + (t * s.c + c0) * s.o + o0, s.o);
                    }
            }
    });
    std::vector<float> total(static_cast<size_t>(size));
    weight_tiles::finish(partials, chunks, s.o, s.c, taps, total.data());
    for (int64_t e = 0; e < size; ++e) grad_weight[e] = float_to_bf16_bits(total[size_t(e)]);
}

}  // namespace ember::kernels::cpu::nhwc_bf16

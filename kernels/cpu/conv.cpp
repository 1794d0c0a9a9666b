// CPU conv2d forward: im2col, then GEMM, one tile of output columns at a time.
//
// Math:    out[n, o, y, x] = bias[o] + Σ_{c, i, j} w[o, c, i, j] ·
//          in[n, g·C/G + c, y·sh − ph + i·dh, x·sw − pw + j·dw] (zero outside),
//          c over the C/G channels of o's group g. Per image, group and tile
//          of output positions: out_g [O/G, tile] += w_g [O/G, C/G·kH·kW] ·
//          col [C/G·kH·kW, tile], onto the bias.
// Layout:  contiguous NCHW input and output, OIHW weight; f32 and f64 (the
//          front computes f16/bf16 in f32). Overwrites out.
// Cost:    2·N·O·OH·OW·(C/G)·kH·kW FLOPs; im2col writes N·C·kH·kW·OH·OW
//          elements into an L2-sized tile (skipped for a 1×1 kernel with
//          stride 1 and no padding: the input is the col matrix).
// Threads: (image, group, tile) items split across OpenMP threads, each
//          with its own col tile, Eigen single-threaded inside the team; with
//          fewer items than threads, Eigen threads each GEMM instead.
// Depthwise convs (groups = C) take kernels/cpu/conv_depthwise.cpp (im2col
//          made them a GEMV per tile, at 6–10 % of the GEMM rate); small
//          channel counts (f32) take the direct kernel: kernels/cpu/conv_direct.cpp,
//          where direct::fits says so.
// Channels-last inputs take kernels/cpu/conv_nhwc.cpp (conv2d_channels_last).
// Backward: kernels/cpu/conv_backward.cpp; im2col: kernels/cpu/im2col.h.
// Test: tests/kernels/test_conv.cpp; benchmark: bench/conv.cpp ("conv" family).
#include "kernels/cpu/conv.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/conv_depthwise.h"
#include "kernels/cpu/conv_direct.h"
#include "kernels/cpu/conv_nhwc.h"
#include "kernels/cpu/conv_nhwc_bf16.h"
#include "kernels/cpu/conv_threads.h"
#include "kernels/cpu/im2col.h"
#include "kernels/cpu/matmul.h"

namespace ember::kernels::cpu {

namespace {

using conv_detail::im2col;
using conv_detail::kParallelMinWork;
using conv_detail::matrix;
using conv_detail::tile_columns;

template <class T>
void run(const Conv2dShape& s, const T* in, const T* wt, const T* bias, T* out) {
    const int64_t cg = s.c / s.groups, og = s.o / s.groups, ckk = cg * s.kh * s.kw;
    const int64_t ohw = s.oh * s.ow;
    // A 1×1 kernel with unit stride and no padding reads the input as it lies.
    const bool direct = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
    // The col tile and the output tile it produces stay in L2 between
    // im2col, the bias fill and the GEMM that reads and accumulates them.
    const int64_t nt = tile_columns(ohw, ckk + og, sizeof(T));
    const int64_t tiles = (ohw + nt - 1) / nt, items = s.n * s.groups * tiles;

    // One (image, group, column tile): bias fill, im2col, GEMM accumulating onto it.
    auto tile = [&](int64_t item, T* col) {
        const int64_t t = item % tiles, g = (item / tiles) % s.groups,
                      n = item / (tiles * s.groups);
        const int64_t j0 = t * nt, j1 = std::min(ohw, j0 + nt);
        const T* x = in + (n * s.c + g * cg) * s.h * s.w;
        T* y = out + (n * s.o + g * og) * ohw + j0;
        if (bias)
            for (int64_t r = 0; r < og; ++r)
                std::fill(y + r * ohw, y + r * ohw + (j1 - j0), bias[g * og + r]);
        if (!direct) im2col(x, s, 0, ckk, j0, j1, col);
        matmul(matrix(y, og, j1 - j0, ohw), matrix(wt + g * og * ckk, og, ckk, ckk),
               direct ? matrix(x + j0, ckk, j1 - j0, ohw) : matrix(col, ckk, j1 - j0, j1 - j0),
               bias != nullptr);
    };

    const int64_t work = s.n * s.o * ohw * ckk;
    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    // Items run one per thread, Eigen single-threaded inside the team. With
    // fewer items than threads (one small image) they run in turn and Eigen
    // threads each GEMM instead (a team of one does not stop it).
    const bool parallel = threads > 1 && items >= threads && work >= kParallelMinWork;
    // Scratch for every thread, allocated here: an allocation failure inside
    // the parallel region would terminate the process instead of throwing.
    const size_t per_thread = direct ? 0 : size_t(ckk * nt);
    std::vector<T> cols(per_thread * size_t(parallel ? threads : 1));
#pragma omp parallel if (parallel) num_threads(parallel ? threads : 1)
    {
        T* col = cols.data() + per_thread * size_t(omp_get_thread_num());
#pragma omp for schedule(static)
        for (int64_t item = 0; item < items; ++item) tile(item, col);
    }
}

}  // namespace

void conv2d(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
            const void* bias, void* out) {
    switch (dtype) {
        case DType::f32:
            if (depthwise::fits(s))
                return depthwise::forward(
                    s, static_cast<const float*>(input), static_cast<const float*>(weight),
                    static_cast<const float*>(bias), static_cast<float*>(out));
            if (direct::fits(s, direct::Pass::forward))
                return direct::forward(s, static_cast<const float*>(input),
                                       static_cast<const float*>(weight),
                                       static_cast<const float*>(bias), static_cast<float*>(out));
            return run(s, static_cast<const float*>(input), static_cast<const float*>(weight),
                       static_cast<const float*>(bias), static_cast<float*>(out));
        case DType::f64:
            if (depthwise::fits(s))
                return depthwise::forward(
                    s, static_cast<const double*>(input), static_cast<const double*>(weight),
                    static_cast<const double*>(bias), static_cast<double*>(out));
            return run(s, static_cast<const double*>(input), static_cast<const double*>(weight),
                       static_cast<const double*>(bias), static_cast<double*>(out));
        default:
            break;
    }
    EMBER_FAIL("internal error: cpu::conv2d got dtype ", dtype_name(dtype));
}

bool conv2d_channels_last_fits(const Conv2dShape& s, DType dtype) {
    switch (dtype) {
        case DType::f32:
            return nhwc::fits(s, nhwc::Pass::forward);
        case DType::bf16:
            return nhwc_bf16::fits(s, nhwc::Pass::forward);
        default:
            return false;
    }
}

void conv2d_channels_last(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
                          const void* bias, void* out) {
    EMBER_INTERNAL_ASSERT(conv2d_channels_last_fits(s, dtype));
    if (dtype == DType::bf16)
        return nhwc_bf16::forward(s, static_cast<const uint16_t*>(input),
                                  static_cast<const uint16_t*>(weight),
                                  static_cast<const uint16_t*>(bias), static_cast<uint16_t*>(out));
    nhwc::forward(s, static_cast<const float*>(input), static_cast<const float*>(weight),
                  static_cast<const float*>(bias), static_cast<float*>(out));
}

}  // namespace ember::kernels::cpu

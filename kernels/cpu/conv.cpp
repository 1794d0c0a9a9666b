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
// perf:    depthwise (O/G = 1) is a GEMV per tile, far below the GEMM rate;
//          a direct loop would serve it better if a model needs it.
// Test: tests/kernels/test_conv.cpp; benchmark: bench/conv.cpp ("conv" family).
#include "kernels/cpu/conv.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "kernels/cpu/matmul.h"

namespace ember::kernels::cpu {

namespace {

// Output columns are processed in tiles sized so that a tile of the col
// matrix and the output tile it produces stay in L2 (about half of 1 MiB)
// between im2col, the bias fill and the GEMM that reads and accumulates them.
constexpr int64_t kTileBytes = int64_t(512) << 10;
constexpr int64_t kMinTileCols = 128;  // narrower tiles cost Eigen more in re-packing the weight
// Below this many multiply-adds in total a conv runs on one thread: an
// OpenMP team costs microseconds.
constexpr int64_t kParallelMinWork = int64_t(1) << 18;

// A row-major [rows, cols] matrix with leading dimension ld, as a View.
template <class T>
View matrix(const T* p, int64_t rows, int64_t cols, int64_t ld) {
    View v;
    v.data = reinterpret_cast<char*>(const_cast<T*>(p));
    v.dtype = dtype_of<T>();
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = cols;
    v.strides[0] = ld;
    v.strides[1] = 1;
    return v;
}

// Columns [j0, j1) of the col matrix [cg·kh·kw, oh·ow] of in [cg, h, w],
// into col [cg·kh·kw, j1 − j0]: row (c, i, j) holds, for each output
// position, the input element under kernel tap (i, j) of channel c (0 in the
// padding).
template <class T>
void im2col(const T* in, int64_t cg, const Conv2dShape& s, int64_t j0, int64_t j1, T* col) {
    const int64_t taps = s.kh * s.kw, nt = j1 - j0;
    for (int64_t r = 0; r < cg * taps; ++r) {
        const int64_t c = r / taps, i = (r / s.kw) % s.kh, j = r % s.kw;
        const T* plane = in + c * s.h * s.w;
        const int64_t x0 = j * s.dw - s.pw;  // input column under output column 0
        // Output columns [lo, hi) read inside the input row; the rest is padding.
        const int64_t lo = x0 >= 0 ? 0 : std::min(s.ow, (-x0 + s.sw - 1) / s.sw);
        const int64_t hi = s.w - x0 <= 0 ? 0 : std::min(s.ow, (s.w - x0 + s.sw - 1) / s.sw);
        T* dst = col + r * nt;
        for (int64_t q = j0; q < j1;) {  // one output row's part of the tile per step
            const int64_t y = q / s.ow, xa = q % s.ow, xb = std::min(s.ow, xa + (j1 - q));
            const int64_t off = (q - j0) - xa;  // dst[off + x] is output column x of row y
            const int64_t iy = y * s.sh - s.ph + i * s.dh;
            const int64_t a = std::max(xa, lo), b = std::min(xb, hi);
            if (iy < 0 || iy >= s.h || a >= b) {
                std::fill(dst + off + xa, dst + off + xb, T(0));
            } else {
                const T* src = plane + iy * s.w + x0;  // src[x·sw] for x in [a, b)
                std::fill(dst + off + xa, dst + off + a, T(0));
                if (s.sw == 1)
                    std::copy(src + a, src + b, dst + off + a);
                else
                    for (int64_t x = a; x < b; ++x) dst[off + x] = src[x * s.sw];
                std::fill(dst + off + b, dst + off + xb, T(0));
            }
            q += xb - xa;
        }
    }
}

template <class T>
void run(const Conv2dShape& s, const T* in, const T* wt, const T* bias, T* out) {
    const int64_t cg = s.c / s.groups, og = s.o / s.groups, ckk = cg * s.kh * s.kw;
    const int64_t ohw = s.oh * s.ow;
    // A 1×1 kernel with unit stride and no padding reads the input as it lies.
    const bool direct = s.kh == 1 && s.kw == 1 && s.sh == 1 && s.sw == 1 && s.ph == 0 && s.pw == 0;
    // Equal tiles of a multiple of 16 columns (whole SIMD panels for the GEMM).
    const int64_t fit = std::max(kMinTileCols, kTileBytes / int64_t(sizeof(T)) / (ckk + og));
    const int64_t parts = std::max<int64_t>(1, (ohw + fit - 1) / fit);
    const int64_t nt = std::min(ohw, ((ohw + parts - 1) / parts + 15) / 16 * 16);
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
        if (!direct) im2col(x, cg, s, j0, j1, col);
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
            return run(s, static_cast<const float*>(input), static_cast<const float*>(weight),
                       static_cast<const float*>(bias), static_cast<float*>(out));
        case DType::f64:
            return run(s, static_cast<const double*>(input), static_cast<const double*>(weight),
                       static_cast<const double*>(bias), static_cast<double*>(out));
        default:
            break;
    }
    EMBER_FAIL("internal error: cpu::conv2d got dtype ", dtype_name(dtype));
}

}  // namespace ember::kernels::cpu

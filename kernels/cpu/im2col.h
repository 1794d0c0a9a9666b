// im2col and its adjoint col2im for the CPU conv2d kernels (forward in
// kernels/cpu/conv.cpp, backward in kernels/cpu/conv_backward.cpp), and the
// row-major matrix View they hand to cpu::matmul. Internal to those two files.
#pragma once

#include <algorithm>
#include <cstdint>

#include "conv.h"
#include "../view.h"

namespace ember::kernels::cpu::conv_detail {

// Output columns are processed in tiles sized so that the tiles of the
// matrices a GEMM step reads and writes stay in L2 (about half of 1 MiB).
constexpr int64_t kTileBytes = int64_t(512) << 10;
constexpr int64_t kMinTileCols = 128;  // narrower tiles cost Eigen more in re-packing

/// Columns per tile of the ohw output positions when each column holds
/// `rows` elements of `elem_size` bytes across the tiled matrices: equal
/// tiles of a multiple of 16 columns (whole SIMD panels for the GEMM).
/// Depends only on the sizes, never on the thread count.
inline int64_t tile_columns(int64_t ohw, int64_t rows, int64_t elem_size) {
    const int64_t fit = std::max(kMinTileCols, kTileBytes / elem_size / std::max<int64_t>(rows, 1));
    const int64_t parts = std::max<int64_t>(1, (ohw + fit - 1) / fit);
    return std::min(ohw, ((ohw + parts - 1) / parts + 15) / 16 * 16);
}

/// A [rows, cols] matrix at p with element strides (row_stride, col_stride), as a View.
template <class T>
View matrix(const T* p, int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride = 1) {
    View v;
    v.data = reinterpret_cast<char*>(const_cast<T*>(p));
    v.dtype = dtype_of<T>();
    v.ndim = 2;
    v.shape[0] = rows;
    v.shape[1] = cols;
    v.strides[0] = row_stride;
    v.strides[1] = col_stride;
    return v;
}

/// The output columns [lo, hi) whose tap at input column offset x0 (the
/// input column under output column 0) lands inside the input row; the
/// others read padding.
inline void inside_columns(const Conv2dShape& s, int64_t x0, int64_t* lo, int64_t* hi) {
    *lo = x0 >= 0 ? 0 : std::min(s.ow, (-x0 + s.sw - 1) / s.sw);
    *hi = s.w - x0 <= 0 ? 0 : std::min(s.ow, (s.w - x0 + s.sw - 1) / s.sw);
}

/// Calls f(r, iy, x0, xa, xb, a, b, off) for every row r in [r0, r1) of the col
/// matrix [cg·kH·kW, OH·OW] of one image and group, and every output row's
/// part of the column range [j0, j1): row r = (c, i, j) is kernel tap (i, j)
/// of channel c; the part's output columns are [xa, xb) of output row y,
/// stored at tile column off + x; iy = y·sh − ph + i·dh is the input row
/// under them (maybe outside [0, H)), and [a, b) ⊆ [xa, xb) are the columns
/// whose input column x0 + x·sw is inside the row.
template <class F>
void for_each_col_run(const Conv2dShape& s, int64_t r0, int64_t r1, int64_t j0, int64_t j1, F&& f) {
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i = (r / s.kw) % s.kh, j = r % s.kw;
        const int64_t x0 = j * s.dw - s.pw;
        int64_t lo, hi;
        inside_columns(s, x0, &lo, &hi);
        for (int64_t q = j0; q < j1;) {  // one output row's part of the range per step
            const int64_t y = q / s.ow, xa = q % s.ow, xb = std::min(s.ow, xa + (j1 - q));
            const int64_t iy = y * s.sh - s.ph + i * s.dh;
            f(r, iy, x0, xa, xb, std::max(xa, lo), std::min(xb, hi), (q - j0) - xa);
            q += xb - xa;
        }
    }
}

/// Rows [r0, r1) and columns [j0, j1) of the col matrix of in [cg, H, W]
/// (one image's channels of one group) into col [r1 − r0, j1 − j0]: each
/// element is the input under its tap, 0 in the padding. Overwrites col.
template <class T>
void im2col(const T* in, const Conv2dShape& s, int64_t r0, int64_t r1, int64_t j0, int64_t j1,
            T* col) {
    const int64_t taps = s.kh * s.kw, nt = j1 - j0;
    for_each_col_run(s, r0, r1, j0, j1,
                     [&](int64_t r, int64_t iy, int64_t x0, int64_t xa, int64_t xb, int64_t a,
                         int64_t b, int64_t off) {
                         T* dst = col + (r - r0) * nt + off;
                         if (iy < 0 || iy >= s.h || a >= b) {
                             std::fill(dst + xa, dst + xb, T(0));
                             return;
                         }
                         // src[x0 + x·sw] is the input under output column x.
                         const T* src = in + (r / taps * s.h + iy) * s.w;
                         std::fill(dst + xa, dst + a, T(0));
                         if (s.sw == 1)
                             std::copy(src + (x0 + a), src + (x0 + b), dst + a);
                         else
                             for (int64_t x = a; x < b; ++x) dst[x] = src[x0 + x * s.sw];
                         std::fill(dst + b, dst + xb, T(0));
                     });
}

/// The adjoint of im2col: adds (+=) rows [r0, r1) and columns [j0, j1) of
/// col [r1 − r0, j1 − j0] into out [cg, H, W] at the input element under
/// each tap; taps in the padding are dropped. Overlapping windows add up.
template <class T>
void col2im(const T* col, const Conv2dShape& s, int64_t r0, int64_t r1, int64_t j0, int64_t j1,
            T* out) {
    const int64_t taps = s.kh * s.kw, nt = j1 - j0;
    for_each_col_run(s, r0, r1, j0, j1,
                     [&](int64_t r, int64_t iy, int64_t x0, int64_t, int64_t, int64_t a, int64_t b,
                         int64_t off) {
                         if (iy < 0 || iy >= s.h || a >= b) return;
                         const T* src = col + (r - r0) * nt + off;
                         T* dst = out + (r / taps * s.h + iy) * s.w;
                         if (s.sw == 1)
                             for (int64_t x = a; x < b; ++x) dst[x0 + x] += src[x];
                         else
                             for (int64_t x = a; x < b; ++x) dst[x0 + x * s.sw] += src[x];
                     });
}

}  // namespace ember::kernels::cpu::conv_detail

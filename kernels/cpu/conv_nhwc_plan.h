// What the channels-last convolutions in f32 (kernels/cpu/conv_nhwc.cpp) and
// bf16 (kernels/cpu/conv_nhwc_bf16.cpp) share: how a row of outputs is cut
// into register tiles, how grad_input splits into stride phases, and the
// zero-padded (or, pointwise, gathered) copy of an image the tiles read.
// Internal to those files.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "../conv_args.h"

namespace ember::kernels::cpu::nhwc {

inline constexpr int64_t kLanes = 16;  // f32 sums per vector
inline constexpr int kMaxV = 4;
// The widest tile (pixels) for V output vectors: R·V ≤ 28 accumulators.
inline constexpr std::array<int, kMaxV + 1> kMaxR = {0, 14, 14, 9, 7};

/// A row of `width` outputs of n channels (a multiple of 16) in tiles:
/// vectors of output channels per tile (the widest that divides n / 16),
/// and tiles of `r` pixels (the last narrower).
struct Cut {
    int v;
    int64_t r;
};
inline Cut cut(int64_t n, int64_t width) {
    const int64_t vecs = n / kLanes;
    const int v = vecs % 4 == 0 ? 4 : vecs % 3 == 0 ? 3 : vecs % 2 == 0 ? 2 : 1;
    const int64_t pieces = (width + kMaxR[size_t(v)] - 1) / kMaxR[size_t(v)];
    return {v, pieces > 0 ? (width + pieces - 1) / pieces : 0};
}

/// One image [rows, cols, ch] zero-padded by (top, left) to [prows, pcols,
/// pch] at dst (pch ≥ ch: the extra channels zero), each element through
/// `put` (a copy, or a flush of what the tiles must not see).
template <class T, class Put>
void pad_image(const T* src, int64_t rows, int64_t cols, int64_t ch, int64_t top, int64_t left,
               int64_t prows, int64_t pcols, int64_t pch, T* dst, Put put) {
    const int64_t pline = pcols * pch;
    std::fill(dst, dst + top * pline, T(0));
    std::fill(dst + (top + rows) * pline, dst + prows * pline, T(0));
    for (int64_t y = 0; y < rows; ++y) {
        T* d = dst + (top + y) * pline;
        std::fill(d, d + left * pch, T(0));
        if (pch == ch) {
            const T* s = src + y * cols * ch;
            T* o = d + left * ch;
            for (int64_t e = 0; e < cols * ch; ++e) o[e] = put(s[e]);
        } else if (ch == 1 && pch == 2) {
            // One channel (a stem's image) and a zero after it: one loop the
            // compiler vectorizes (a fill per pixel was a memset call each).
            const T* s = src + y * cols;
            T* o = d + left * 2;
            for (int64_t x = 0; x < cols; ++x) o[2 * x] = put(s[x]), o[2 * x + 1] = T(0);
        } else {
            for (int64_t x = 0; x < cols; ++x) {
                const T* s = src + (y * cols + x) * ch;
                T* o = d + (left + x) * pch;
                for (int64_t e = 0; e < ch; ++e) o[e] = put(s[e]);
                std::fill(o + ch, o + pch, T(0));
            }
        }
        std::fill(d + (left + cols) * pch, d + pline, T(0));
    }
}

/// Whether a convolution reads only pixels (oy·sh, ox·sw) of its input, one
/// tap each: 1×1, no padding (a strided shortcut). Such an input is gathered
/// (gather_pixels), not padded whole: a stride-2 shortcut reads a quarter
/// of its input's pixels.
inline bool pointwise(const Conv2dShape& s) {
    return s.kh == 1 && s.kw == 1 && s.ph == 0 && s.pw == 0;
}

/// Pixels (y·sh, x·sw) of one image [·, cols, ch] gathered into a dense
/// [orows, ocols, pch] at dst (pch ≥ ch: the extra channels zero), each
/// element through `put`; whole vectors of 16 where they fit (a per-pixel
/// loop of a run-time length ran scalar).
template <class T, class Put>
void gather_pixels(const T* src, int64_t cols, int64_t ch, int64_t sh, int64_t sw,
                   int64_t orows, int64_t ocols, int64_t pch, T* dst, Put put) {
    const int64_t whole = ch / kLanes * kLanes;
    for (int64_t y = 0; y < orows; ++y)
        for (int64_t x = 0; x < ocols; ++x) {
            const T* s = src + (y * sh * cols + x * sw) * ch;
            T* o = dst + (y * ocols + x) * pch;
            for (int64_t e0 = 0; e0 < whole; e0 += kLanes)
                for (int64_t e = e0; e < e0 + kLanes; ++e) o[e] = put(s[e]);
            for (int64_t e = whole; e < ch; ++e) o[e] = put(s[e]);
            for (int64_t e = ch; e < pch; ++e) o[e] = T(0);
        }
}

/// grad_input by stride phase: input pixels (u·sh + a, v·sw + b) take only
/// the taps (i, j) with a + ph − i·dh ≡ 0 (mod sh) and b + pw − j·dw ≡ 0
/// (mod sw), each reading grad_out at (u + e_i, v + f_j), e_i = (a + ph −
/// i·dh) / sh: per phase a stride-1 correlation of grad_out (zero-padded by
/// `top`, `left` to [rows, cols]) with the phase's taps, written to every
/// sh-th row and sw-th column. Every tap lands in exactly one phase: no FLOP
/// is spent on a zero. A phase no tap reaches is zero.
struct Phase {
    int64_t a, b, rows, cols;       // first input row/column, output rows/columns
    std::vector<int64_t> i, j;      // its taps
    std::vector<int64_t> pixel;     // each tap's offset in the padded grad_out, in pixels
};
struct Phases {
    std::vector<Phase> phases;
    int64_t top = 0, left = 0, rows = 0, cols = 0;  // padded grad_out
};
inline Phases grad_input_phases(const Conv2dShape& s) {
    struct Axis {
        std::vector<std::vector<int64_t>> taps, shift;  // per phase: kernel index, offset
        int64_t before = 0, after = 0;                  // padding grad_out needs
    };
    auto axis = [](int64_t stride, int64_t pad, int64_t dil, int64_t k, int64_t in, int64_t out) {
        Axis ax;
        ax.taps.resize(size_t(stride));
        ax.shift.resize(size_t(stride));
        for (int64_t a = 0; a < stride; ++a) {
            const int64_t count = a < in ? (in - a + stride - 1) / stride : 0;
            for (int64_t i = 0; i < k; ++i) {
                const int64_t d = a + pad - i * dil;
                if (((d % stride) + stride) % stride != 0) continue;
                const int64_t e = (d - ((d % stride) + stride) % stride) / stride;  // exact
                ax.taps[size_t(a)].push_back(i);
                ax.shift[size_t(a)].push_back(e);
                if (count > 0) {
                    ax.before = std::max(ax.before, -e);
                    ax.after = std::max(ax.after, count - 1 + e - (out - 1));
                }
            }
        }
        return ax;
    };
    const Axis ay = axis(s.sh, s.ph, s.dh, s.kh, s.h, s.oh);
    const Axis ax = axis(s.sw, s.pw, s.dw, s.kw, s.w, s.ow);
    Phases out;
    out.top = ay.before;
    out.left = ax.before;
    out.rows = s.oh + ay.before + ay.after;
    out.cols = s.ow + ax.before + ax.after;
    for (int64_t a = 0; a < s.sh; ++a)
        for (int64_t b = 0; b < s.sw; ++b) {
            Phase p{a,
                    b,
                    a < s.h ? (s.h - a + s.sh - 1) / s.sh : 0,
                    b < s.w ? (s.w - b + s.sw - 1) / s.sw : 0,
                    {},
                    {},
                    {}};
            for (size_t ti = 0; ti < ay.taps[size_t(a)].size(); ++ti)
                for (size_t tj = 0; tj < ax.taps[size_t(b)].size(); ++tj) {
                    p.i.push_back(ay.taps[size_t(a)][ti]);
                    p.j.push_back(ax.taps[size_t(b)][tj]);
                    p.pixel.push_back(ay.shift[size_t(a)][ti] * out.cols +
                                      ax.shift[size_t(b)][tj]);
                }
            out.phases.push_back(std::move(p));
        }
    return out;
}

}  // namespace ember::kernels::cpu::nhwc

// The pooling windows both backends walk (kernels/cpu/pool.cpp,
// kernels/cuda/pool.cu), defined once so that their results agree bit for
// bit: which input taps a max, average or adaptive window covers, its
// divisor, and the max's order of taps with its tie and NaN rule. Plain C++
// with EMBER_HD functions; tests/kernels/test_pool_plan.cpp checks them
// against brute force.
#pragma once

#include <cstdint>

#include "../core/macros.h"
#include "pool_args.h"

namespace ember::kernels {

/// Positions [lo, hi) along one axis; empty when lo >= hi.
struct OutRange {
    int64_t lo, hi;
};

/// One average-pooling window: input rows [y0, y1) and columns [x0, x1) it
/// sums and its divisor. The window clipped to the padded input (ceil mode's
/// last window may hang past it) sets the divisor with padding; clipped to
/// the input, the elements summed. The forward and the backward both use it.
struct AvgWindow {
    int64_t y0, y1, x0, x1, divisor;
    EMBER_HD bool empty() const { return y0 >= y1 || x0 >= x1; }
};

EMBER_HD inline AvgWindow avg_window(int64_t oy, int64_t ox, const Pool2dWindow& w, int64_t H,
                                     int64_t W, bool count_include_pad) {
    int64_t y0 = oy * w.sh - w.ph, x0 = ox * w.sw - w.pw;
    int64_t y1 = y0 + w.kh < H + w.ph ? y0 + w.kh : H + w.ph;
    int64_t x1 = x0 + w.kw < W + w.pw ? x0 + w.kw : W + w.pw;
    const int64_t padded = (y1 - y0) * (x1 - x0);
    y0 = y0 > 0 ? y0 : 0, x0 = x0 > 0 ? x0 : 0;
    y1 = y1 < H ? y1 : H, x1 = x1 < W ? x1 : W;
    const int64_t inside = (y1 > y0 ? y1 - y0 : 0) * (x1 > x0 ? x1 - x0 : 0);
    return {y0, y1, x0, x1, count_include_pad ? padded : inside};
}

/// Adaptive pooling window of output o along one axis: input [⌊o·in/out⌋,
/// ⌈(o+1)·in/out⌉). Needs in·out < 2^63.
EMBER_HD inline OutRange adaptive_window(int64_t o, int64_t in, int64_t out) {
    return {o * in / out, ((o + 1) * in + out - 1) / out};
}

/// The max of one window and where it is: value and y·W + x.
template <class A>
struct MaxTap {
    A value;
    int64_t index;
};

/// The max over output (oy, ox)'s in-bounds taps, load(y, x) giving each
/// tap's value: rows then columns in order; the first tap always counts (an
/// all −inf window still points inside), later a larger value or a NaN wins
/// (so the first maximum, the last NaN). Index −1 when no tap is in bounds.
template <class A, class Load>
EMBER_HD inline MaxTap<A> max_window(int64_t oy, int64_t ox, const Pool2dWindow& w, int64_t H,
                                     int64_t W, A lowest, Load&& load) {
    const int64_t y0 = oy * w.sh - w.ph, x0 = ox * w.sw - w.pw;
    MaxTap<A> m{lowest, -1};
    for (int64_t i = 0; i < w.kh; ++i) {
        const int64_t y = y0 + i * w.dh;
        if (y < 0 || y >= H) continue;
        for (int64_t j = 0; j < w.kw; ++j) {
            const int64_t x = x0 + j * w.dw;
            if (x < 0 || x >= W) continue;
            const A v = load(y, x);
            if (m.index < 0 || v > m.value || v != v) m = {v, y * W + x};
        }
    }
    return m;
}

}  // namespace ember::kernels

// Index math of the CUDA pooling backwards (kernels/cuda/pool.cu), plain C++
// so the CPU tests check it (tests/kernels/test_pool_plan.cpp). The backwards
// gather: one thread per input element visits the outputs whose windows can
// hold it, in the forward's output order, so the sums are the CPU twin's bits
// and no float atomics are needed. These functions say which outputs those are;
// the windows themselves are kernels/pool_window.h's, shared with the CPU.
#pragma once

#include <cstdint>

#include "../../core/macros.h"
#include "../pool_args.h"
#include "../pool_window.h"

namespace ember::kernels::cuda {

/// Floor division for any signs (b > 0).
EMBER_HD inline int64_t floor_div(int64_t a, int64_t b) {
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/// The outputs along one axis whose average-pooling window (kernel k, stride
/// s, padding p, no dilation; `out` outputs) sums input position y: o with
/// o·s − p <= y < o·s − p + k. Clipping at the input's far end never drops
/// an in-range y, so this is exactly where avg_window's rows hold y.
EMBER_HD inline OutRange avg_cover(int64_t y, int64_t k, int64_t s, int64_t p, int64_t out) {
    int64_t lo = floor_div(y + p - k, s) + 1;  // smallest o with o·s > y + p − k
    int64_t hi = floor_div(y + p, s) + 1;      // one past the largest o with o·s <= y + p
    lo = lo > 0 ? lo : 0;
    hi = hi < out ? hi : out;
    return {lo, hi};
}

/// The outputs whose adaptive window holds input y: o in [⌊y·out/in⌋, ⌈(y+1)·out/in⌉).
/// (⌊o·in/out⌋ <= y ⟺ o < (y+1)·out/in, and ⌈(o+1)·in/out⌉ > y ⟺ o >= ⌊y·out/in⌋.)
EMBER_HD inline OutRange adaptive_cover(int64_t y, int64_t in, int64_t out) {
    return {y * out / in, ((y + 1) * out + in - 1) / in};
}

// Note [Max-pool backward without the window]
// max_pool2d_backward gets only grad_output, the input's shape and the
// indices (which may come from anywhere), not the forward's window. So the
// CUDA backward first measures how far the indices stray along each axis
// from a monotone estimate of where output o looks, est(o) = ⌊o·in/out⌋:
// reach = max |row(index) − est(oy)| over every valid index (one integer
// max, order-free). Input row y can then only be chosen by outputs with
// |y − est(oy)| <= reach, a contiguous range since est is monotone; the same
// for columns. For the forward's own indices reach is about the kernel size,
// so each input element visits a handful of outputs; for arbitrary indices
// the ranges widen (slower, still exact). est only has to be monotone and the
// same wherever it is evaluated, so it is computed in double (no overflow).

/// The monotone estimate of the input row output o of `out` looks at.
EMBER_HD inline int64_t reach_estimate(int64_t o, double ratio) {
    return int64_t(double(o) * ratio);  // >= 0: truncation is the floor
}

/// in / out, the ratio reach_estimate takes (out >= 1).
EMBER_HD inline double reach_ratio(int64_t in, int64_t out) { return double(in) / double(out); }

/// The outputs o in [0, out) with |y − est(o)| <= reach: a contiguous range
/// found by two binary searches over the monotone estimate.
EMBER_HD inline OutRange reach_cover(int64_t y, int64_t reach, double ratio, int64_t out) {
    // lo: the first o with est(o) >= y − reach; hi: the first o with est(o) > y + reach.
    int64_t a = 0, b = out;
    while (a < b) {
        const int64_t m = a + (b - a) / 2;
        if (reach_estimate(m, ratio) >= y - reach) b = m; else a = m + 1;
    }
    const int64_t lo = a;
    b = out;
    while (a < b) {
        const int64_t m = a + (b - a) / 2;
        if (reach_estimate(m, ratio) > y + reach) b = m; else a = m + 1;
    }
    return {lo, a};
}

}  // namespace ember::kernels::cuda

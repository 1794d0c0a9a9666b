// CPU softmax and log_softmax along the middle dim of [outer, size, inner],
// and their backwards.
//
// Math: m = max x; s = sum exp(x - m); softmax = exp(x - m) / s;
//   log_softmax = (x - m) - log s. Subtracting m keeps exp in (0, 1].
//   Backward from the output y: softmax gx = y (g - sum g y); log_softmax
//   gx = g - exp(y) sum g; the sums in f64 (3 * numel * sizeof(T) bytes).
// Dtypes: f32, f64, f16, bf16 (f16/bf16 computed in f32); in and out contiguous.
// Bytes: 2 * numel * sizeof(T) (each row is read from memory once and
//   re-read from the cache); FLOPs: about 15 per element (the exp polynomial).
// Layout: inner == 1 works on one row at a time in the cache while prefetching
//   the next (threads over rows); inner > 1 on strips of kStrip columns,
//   three passes over each strip.
// Test: tests/kernels/test_softmax.cpp; benchmark: bench/softmax.cpp (`ember bench softmax`).
#include "kernels/cpu/softmax.h"

#include <bit>
#include <cmath>
#include <vector>

namespace ember::kernels::cpu {

namespace {

using math::cast;

inline constexpr int64_t kStrip = 256;  // columns per task when inner > 1

using math::exp_nonpositive;

// sum exp(v - m) as an Op for tree_reduce.
template <class A>
struct ExpSumOp : SumOp<A> {
    A m;
    A map(A v, int64_t) const { return exp_nonpositive(v - m); }
};

// Note [Prefetching the next row]
// A row is read from memory once (by the max pass) and then worked on in the
// cache, where the hardware prefetcher sees no new misses and stops running
// ahead: memory would sit idle during the exp passes. So the passes that work
// in the cache prefetch the next row as they go.

// Prefetches the cache lines of p[0, n).
template <class T>
void prefetch(const T* p, int64_t n) {
    for (int64_t b = 0; b < n * int64_t(sizeof(T)); b += 64)
        __builtin_prefetch(reinterpret_cast<const char*>(p) + b);
}

// y[i] = exp(x[i] - m) and, in the same pass, their sum as a pairwise tree
// like tree_reduce's (Note [Pairwise summation] in kernels/cpu/reduce.h), with
// 4x the lanes and leaf: the exp is long, and more independent lanes keep the
// vector units busy. `next` (same offsets as x) is prefetched.
inline constexpr int kExpLanes = 4 * kLanes;
inline constexpr int64_t kExpLeaf = 4 * kLeaf;

template <class A>
A exp_store_sum(const A* x, A* y, int64_t n, A m, const A* next) {
    if (n > kExpLeaf) {
        const int64_t h = tree_split(n, kExpLeaf);
        return exp_store_sum(x, y, h, m, next) + exp_store_sum(x + h, y + h, n - h, m, next + h);
    }
    A acc[kExpLanes] = {};
    int64_t i = 0;
    for (; i + kExpLanes <= n; i += kExpLanes) {
        prefetch(next + i, kExpLanes);
#pragma omp simd
        for (int l = 0; l < kExpLanes; ++l) {
            const A e = exp_nonpositive(x[i + l] - m);
            y[i + l] = e;
            acc[l] += e;
        }
    }
    for (int l = 0; i < n; ++i, ++l) {
        y[i] = exp_nonpositive(x[i] - m);
        acc[l] += y[i];
    }
    for (int w = kExpLanes / 2; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
    return acc[0];
}

// One row; `next` is the row after it (or this one), prefetched meanwhile.
template <bool Log, class T>
void softmax_row(const T* x, T* y, int64_t n, const T* next) {
    using A = math::Acc<T>;
    const A m = tree_reduce(x, n, ExtremeOp<A, true>{});
    if constexpr (std::is_same_v<T, A>) {
        // Store the exps while summing them; softmax scales them in the cache,
        // log_softmax overwrites them.
        const A s = exp_store_sum(x, y, n, m, next);
        if constexpr (Log) {
            const A log_s = std::log(s);
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - m) - log_s;
        } else {
            const A inv = A(1) / s;
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) y[i] *= inv;
        }
        return;
    }
    // f16/bf16: the exps are recomputed in f32 rather than stored rounded.
    const A s = tree_reduce(x, n, ExpSumOp<A>{{}, m});
    const A log_s = std::log(s), inv = A(1) / s;
    for (int64_t b = 0; b < n; b += 4 * kLanes) {
        const int64_t e = std::min(n, b + 4 * kLanes);
        prefetch(next + b, e - b);
#pragma omp simd
        for (int64_t i = b; i < e; ++i) {
            const A d = cast<A>(x[i]) - m;
            y[i] = Log ? cast<T>(d - log_s) : cast<T>(exp_nonpositive(d) * inv);
        }
    }
}

// Columns j < w of a [n, stride] block (rows `stride` apart). The sums are
// kept in f64 because they run down the rows in order, not pairwise.
template <bool Log, class T>
void softmax_strip(const T* x, T* y, int64_t n, int64_t stride, int64_t w, double* sums,
                   math::Acc<T>* maxes) {
    using A = math::Acc<T>;
    for (int64_t j = 0; j < w; ++j) maxes[j] = lowest<A>(), sums[j] = 0;
    for (int64_t r = 0; r < n; ++r) {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) maxes[j] = nan_max(maxes[j], cast<A>(x[r * stride + j]));
    }
    for (int64_t r = 0; r < n; ++r) {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j)
            sums[j] += double(exp_nonpositive(cast<A>(x[r * stride + j]) - maxes[j]));
    }
    for (int64_t j = 0; j < w; ++j) sums[j] = Log ? std::log(sums[j]) : 1.0 / sums[j];
    for (int64_t r = 0; r < n; ++r) {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
            const A d = cast<A>(x[r * stride + j]) - maxes[j];
            y[r * stride + j] =
                Log ? cast<T>(d - A(sums[j])) : cast<T>(exp_nonpositive(d) * A(sums[j]));
        }
    }
}

template <bool Log>
void run(const View& out, const View& in, ReduceShape s) {
    EMBER_INTERNAL_ASSERT(in.is_contiguous() && out.is_contiguous() && in.dtype == out.dtype &&
                          in.numel() == s.outer * s.size * s.inner && out.numel() == in.numel());
    visit_floating(in.dtype, Log ? "log_softmax" : "softmax", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* x = in.ptr<const T>();
        T* y = out.ptr<T>();
        const int64_t numel = s.outer * s.size * s.inner;
        if (s.inner == 1) {
            // perf: one thread per row; a few very long rows use few threads.
            parallel_ranges(s.outer, numel, [&](int64_t b, int64_t e) {
                for (int64_t o = b; o < e; ++o) {
                    const T* row = x + o * s.size;
                    softmax_row<Log>(row, y + o * s.size, s.size, o + 1 < e ? row + s.size : row);
                }
            });
            return;
        }
        const int64_t tiles = (s.inner + kStrip - 1) / kStrip;
        parallel_ranges(s.outer * tiles, numel, [&](int64_t b, int64_t e) {
            std::vector<double> sums(static_cast<size_t>(kStrip));
            std::vector<math::Acc<T>> maxes(static_cast<size_t>(kStrip));
            for (int64_t t = b; t < e; ++t) {
                const int64_t o = t / tiles, j0 = (t % tiles) * kStrip;
                const int64_t off = o * s.size * s.inner + j0;
                softmax_strip<Log>(x + off, y + off, s.size, s.inner,
                                   std::min(kStrip, s.inner - j0), sums.data(), maxes.data());
            }
        });
    });
}

// One row of a backward: the sum (of g·y, or of g for log_softmax) in f64,
// then the row. The reduction's lane order is fixed by the build, not by the
// number of threads.
template <bool Log, class T>
void backward_row(const T* g, const T* y, T* gx, int64_t n) {
    using A = math::Acc<T>;
    double acc = 0;
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < n; ++i) {
        const double gv = double(cast<A>(g[i]));
        acc += Log ? gv : gv * double(cast<A>(y[i]));
    }
    const A sum = A(acc);
    for (int64_t i = 0; i < n; ++i) {
        const A gv = cast<A>(g[i]), yv = cast<A>(y[i]);
        gx[i] = cast<T>(Log ? gv - std::exp(yv) * sum : yv * (gv - sum));
    }
}

// Columns j < w of a [n, stride] block, the sums running down the rows in f64.
template <bool Log, class T>
void backward_strip(const T* g, const T* y, T* gx, int64_t n, int64_t stride, int64_t w,
                    double* sums) {
    using A = math::Acc<T>;
    for (int64_t j = 0; j < w; ++j) sums[j] = 0;
    for (int64_t r = 0; r < n; ++r) {
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
            const double gv = double(cast<A>(g[r * stride + j]));
            sums[j] += Log ? gv : gv * double(cast<A>(y[r * stride + j]));
        }
    }
    for (int64_t r = 0; r < n; ++r)
        for (int64_t j = 0; j < w; ++j) {
            const int64_t i = r * stride + j;
            const A gv = cast<A>(g[i]), yv = cast<A>(y[i]), sum = A(sums[j]);
            gx[i] = cast<T>(Log ? gv - std::exp(yv) * sum : yv * (gv - sum));
        }
}

template <bool Log>
void run_backward(const View& gx, const View& g, const View& y, ReduceShape s) {
    EMBER_INTERNAL_ASSERT(gx.is_contiguous() && g.is_contiguous() && y.is_contiguous() &&
                          gx.dtype == g.dtype && g.dtype == y.dtype &&
                          y.numel() == s.outer * s.size * s.inner);
    visit_floating(y.dtype, Log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* gp = g.ptr<const T>();
        const T* yp = y.ptr<const T>();
        T* out = gx.ptr<T>();
        const int64_t numel = s.outer * s.size * s.inner;
        if (s.inner == 1) {
            parallel_ranges(s.outer, numel, [&](int64_t b, int64_t e) {
                for (int64_t o = b; o < e; ++o)
                    backward_row<Log>(gp + o * s.size, yp + o * s.size, out + o * s.size, s.size);
            });
            return;
        }
        const int64_t tiles = (s.inner + kStrip - 1) / kStrip;
        parallel_ranges(s.outer * tiles, numel, [&](int64_t b, int64_t e) {
            std::vector<double> sums(static_cast<size_t>(kStrip));
            for (int64_t t = b; t < e; ++t) {
                const int64_t o = t / tiles, j0 = (t % tiles) * kStrip;
                const int64_t off = o * s.size * s.inner + j0;
                backward_strip<Log>(gp + off, yp + off, out + off, s.size, s.inner,
                                    std::min(kStrip, s.inner - j0), sums.data());
            }
        });
    });
}

}  // namespace

void softmax(const View& out, const View& in, ReduceShape s) { run<false>(out, in, s); }
void log_softmax(const View& out, const View& in, ReduceShape s) { run<true>(out, in, s); }
void softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s) {
    run_backward<false>(grad_x, grad_y, y, s);
}
void log_softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s) {
    run_backward<true>(grad_x, grad_y, y, s);
}

}  // namespace ember::kernels::cpu

// CUDA softmax and log_softmax along the middle dim of a contiguous
// [outer, size, inner] buffer, and their backwards from the output y.
//
// Math: m = max x; s = sum exp(x - m); softmax = exp(x - m) * (1 / s);
//   log_softmax = (x - m) - log s. Backward: softmax gx = y (g - sum g y);
//   log_softmax gx = g - exp(y) sum g, the sums in f64 — the CPU twin's
//   formulas (kernels/cpu/softmax.cpp), which the device computes with its
//   own exp (__expf in exp_nonpositive: a few ulp from the CPU's).
// Dtypes: f32, f64, f16, bf16 (f16/bf16 in f32); in and out contiguous.
// Bytes: forward 2 * numel * sizeof(T) (a long row or a column is read twice,
//   the second time mostly from L2); backward 3 * numel * sizeof(T).
//   FLOPs: about 5 per element forward (max, subtract, exp, add, scale), 4 backward.
// Launch (kernels/cuda/softmax_plan.h): inner == 1 and size <= 1024: a warp
//   per row, 256-thread blocks, the row in registers (one read); longer rows:
//   a block of 256..1024 threads per row, an online max-and-sum per thread
//   combined by block_reduce, then a second read to write; inner > 1: a thread
//   per column looping over size (max, f64 sum, write: three reads, as the CPU
//   strips). Grids stride over rows or columns (at most 2^20 blocks).
// Deterministic: every reduction's order depends on the plan only.
// perf: no vector loads; a few long rows, or a small outer * inner, leave
//   most SMs idle (no split of one row across blocks).
// Test: tests/cuda/test_cuda_loss.cpp, tests/cuda/test_cuda_ops.cpp (op table),
//   plan: tests/kernels/test_softmax_plan.cpp. Bench: `ember bench softmax`.
#include <cmath>
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/softmax.h"
#include "kernels/cuda/softmax_plan.h"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

using math::Acc;
using math::cast;
using math::exp_nonpositive;


// A running max and the sum of exp(x - m) of the values seen so far.
template <class A>
struct MaxSum {
    A m, s;
};

// Combines two partials; exactly one exp. Equal maxima (also two -inf, two
// +inf) add without an exp, which would be exp(NaN); a NaN max wins.
struct MaxSumOp {
    template <class A>
    __device__ MaxSum<A> operator()(MaxSum<A> a, MaxSum<A> b) const {
        if (a.m != a.m || b.m != b.m) return {a.m != a.m ? a.m : b.m, a.s};
        if (a.m == b.m) return {a.m, a.s + b.s};
        if (a.m > b.m) return {a.m, a.s + b.s * exp_nonpositive(b.m - a.m)};
        return {b.m, b.s + a.s * exp_nonpositive(a.m - b.m)};
    }
};

// The output element from d = x - m and f = log s (Log) or 1 / s.
template <bool Log, class T, class A>
__device__ __forceinline__ T finish(A d, A f) {
    return Log ? cast<T>(d - f) : cast<T>(exp_nonpositive(d) * f);
}

template <bool Log, class T, int N>
__global__ void __launch_bounds__(kRowBlock) forward_warp(T* y, const T* x, SoftmaxPlan p) {
    using A = Acc<T>;
    const int lane = int(threadIdx.x) % kWarp;
    const int64_t n = p.shape.size;
    for (int64_t row = item_begin(p, blockIdx.x, threadIdx.x); row < p.items;
         row += item_stride(p)) {  // the same row for the whole warp
        const T* xr = x + row * n;
        A v[N];
        A m = A(-INFINITY);
#pragma unroll
        for (int k = 0; k < N; ++k) {
            const int64_t c = lane + kWarp * k;
            v[k] = c < n ? cast<A>(xr[c]) : A(-INFINITY);
            m = nan_max(m, v[k]);
        }
        m = warp_broadcast(warp_reduce(m, MaxOp{}));
        A s = 0;
#pragma unroll
        for (int k = 0; k < N; ++k)
            if (lane + kWarp * k < n) s += exp_nonpositive(v[k] - m);
        s = warp_broadcast(warp_reduce(s, AddOp{}));
        const A f = Log ? dlog(s) : A(1) / s;
        T* yr = y + row * n;
#pragma unroll
        for (int k = 0; k < N; ++k)
            if (lane + kWarp * k < n) yr[lane + kWarp * k] = finish<Log, T>(v[k] - m, f);
    }
}

template <bool Log, class T>
__global__ void __launch_bounds__(1024) forward_block(T* y, const T* x, SoftmaxPlan p) {
    using A = Acc<T>;
    const int64_t n = p.shape.size;
    for (int64_t row = item_begin(p, blockIdx.x, threadIdx.x); row < p.items;
         row += item_stride(p)) {
        const T* xr = x + row * n;
        MaxSum<A> acc{A(-INFINITY), A(0)};
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            acc = MaxSumOp{}(acc, MaxSum<A>{cast<A>(xr[c]), A(1)});
        acc = block_reduce(acc, MaxSumOp{});
        // As sum exp(x - m) would: a max of +inf (or a row of -inf) makes a
        // term exp(inf - inf) = NaN.
        if (isinf(acc.m)) acc.s = A(NAN);
        const A f = Log ? dlog(acc.s) : A(1) / acc.s;
        T* yr = y + row * n;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            yr[c] = finish<Log, T>(cast<A>(xr[c]) - acc.m, f);
    }
}

template <bool Log, class T>
__global__ void __launch_bounds__(kRowBlock) forward_columns(T* y, const T* x, SoftmaxPlan p) {
    using A = Acc<T>;
    const int64_t n = p.shape.size, st = p.shape.inner;
    for (int64_t item = item_begin(p, blockIdx.x, threadIdx.x); item < p.items;
         item += item_stride(p)) {
        const int64_t base = column_base(p, item, threadIdx.x);
        if (base < 0) continue;
        A m = A(-INFINITY);
        for (int64_t r = 0; r < n; ++r) m = nan_max(m, cast<A>(x[base + r * st]));
        double s = 0;  // down the rows in order: f64, as the CPU strips
        for (int64_t r = 0; r < n; ++r) s += double(exp_nonpositive(cast<A>(x[base + r * st]) - m));
        const A f = A(Log ? log(s) : 1.0 / s);
        for (int64_t r = 0; r < n; ++r)
            y[base + r * st] = finish<Log, T>(cast<A>(x[base + r * st]) - m, f);
    }
}

// One backward element from g, y and the row's sum.
template <bool Log, class T, class A>
__device__ __forceinline__ T backward_at(A g, A y, A sum) {
    return cast<T>(Log ? g - dexp(y) * sum : y * (g - sum));
}
template <bool Log, class A>
__device__ __forceinline__ double backward_term(A g, A y) {
    return Log ? double(g) : double(g) * double(y);
}

template <bool Log, class T, int N>
__global__ void __launch_bounds__(kRowBlock)
    backward_warp(T* gx, const T* g, const T* y, SoftmaxPlan p) {
    using A = Acc<T>;
    const int lane = int(threadIdx.x) % kWarp;
    const int64_t n = p.shape.size;
    for (int64_t row = item_begin(p, blockIdx.x, threadIdx.x); row < p.items;
         row += item_stride(p)) {
        A gv[N], yv[N];
        double acc = 0;
#pragma unroll
        for (int k = 0; k < N; ++k) {
            const int64_t c = lane + kWarp * k;
            gv[k] = c < n ? cast<A>(g[row * n + c]) : A(0);
            yv[k] = c < n ? cast<A>(y[row * n + c]) : A(0);
            acc += backward_term<Log>(gv[k], yv[k]);
        }
        const A sum = A(warp_broadcast(warp_reduce(acc, AddOp{})));
#pragma unroll
        for (int k = 0; k < N; ++k)
            if (lane + kWarp * k < n)
                gx[row * n + lane + kWarp * k] = backward_at<Log, T>(gv[k], yv[k], sum);
    }
}

template <bool Log, class T>
__global__ void __launch_bounds__(1024)
    backward_block(T* gx, const T* g, const T* y, SoftmaxPlan p) {
    using A = Acc<T>;
    const int64_t n = p.shape.size;
    for (int64_t row = item_begin(p, blockIdx.x, threadIdx.x); row < p.items;
         row += item_stride(p)) {
        const int64_t o = row * n;
        double acc = 0;
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            acc += backward_term<Log>(cast<A>(g[o + c]), cast<A>(y[o + c]));
        const A sum = A(block_reduce(acc, AddOp{}));
        for (int64_t c = threadIdx.x; c < n; c += blockDim.x)
            gx[o + c] = backward_at<Log, T>(cast<A>(g[o + c]), cast<A>(y[o + c]), sum);
    }
}

template <bool Log, class T>
__global__ void __launch_bounds__(kRowBlock)
    backward_columns(T* gx, const T* g, const T* y, SoftmaxPlan p) {
    using A = Acc<T>;
    const int64_t n = p.shape.size, st = p.shape.inner;
    for (int64_t item = item_begin(p, blockIdx.x, threadIdx.x); item < p.items;
         item += item_stride(p)) {
        const int64_t base = column_base(p, item, threadIdx.x);
        if (base < 0) continue;
        double acc = 0;
        for (int64_t r = 0; r < n; ++r)
            acc += backward_term<Log>(cast<A>(g[base + r * st]), cast<A>(y[base + r * st]));
        const A sum = A(acc);
        for (int64_t r = 0; r < n; ++r) {
            const int64_t i = base + r * st;
            gx[i] = backward_at<Log, T>(cast<A>(g[i]), cast<A>(y[i]), sum);
        }
    }
}

// f(std::integral_constant<int, N>) for the plan's values per lane.
template <class F>
void visit_per_lane(int per_lane, F&& f) {
    if (per_lane <= 4) return f(std::integral_constant<int, 4>{});
    if (per_lane <= 16) return f(std::integral_constant<int, 16>{});
    return f(std::integral_constant<int, kMaxPerLane>{});
}

template <bool Log>
void forward(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(in.is_contiguous() && out.is_contiguous() && in.dtype == out.dtype);
    const SoftmaxPlan p = softmax_plan(s);
    if (p.grid == 0) return;
    const unsigned grid = unsigned(p.grid);
    visit_floating(in.dtype, Log ? "log_softmax" : "softmax", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* y = out.ptr<T>();
        const T* x = in.ptr<const T>();
        switch (p.mapping) {
            case RowMapping::warp_per_row:
                visit_per_lane(p.per_lane, [&](auto n) {
                    forward_warp<Log, T, decltype(n)::value>
                        <<<grid, p.block, 0, stream.handle>>>(y, x, p);
                });
                break;
            case RowMapping::block_per_row:
                forward_block<Log, T><<<grid, p.block, 0, stream.handle>>>(y, x, p);
                break;
            case RowMapping::columns:
                forward_columns<Log, T><<<grid, p.block, 0, stream.handle>>>(y, x, p);
                break;
        }
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

template <bool Log>
void backward(const View& gx, const View& g, const View& y, ReduceShape s, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(gx.is_contiguous() && g.is_contiguous() && y.is_contiguous() &&
                          gx.dtype == g.dtype && g.dtype == y.dtype);
    const SoftmaxPlan p = softmax_plan(s);
    if (p.grid == 0) return;
    const unsigned grid = unsigned(p.grid);
    visit_floating(y.dtype, Log ? "log_softmax_backward" : "softmax_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* o = gx.ptr<T>();
        const T* gp = g.ptr<const T>();
        const T* yp = y.ptr<const T>();
        switch (p.mapping) {
            case RowMapping::warp_per_row:
                visit_per_lane(p.per_lane, [&](auto n) {
                    backward_warp<Log, T, decltype(n)::value>
                        <<<grid, p.block, 0, stream.handle>>>(o, gp, yp, p);
                });
                break;
            case RowMapping::block_per_row:
                backward_block<Log, T><<<grid, p.block, 0, stream.handle>>>(o, gp, yp, p);
                break;
            case RowMapping::columns:
                backward_columns<Log, T><<<grid, p.block, 0, stream.handle>>>(o, gp, yp, p);
                break;
        }
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void softmax(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    forward<false>(out, in, s, stream);
}
void log_softmax(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    forward<true>(out, in, s, stream);
}
void softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s,
                      StreamRef stream) {
    backward<false>(grad_x, grad_y, y, s, stream);
}
void log_softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s,
                          StreamRef stream) {
    backward<true>(grad_x, grad_y, y, s, stream);
}

}  // namespace ember::kernels::cuda

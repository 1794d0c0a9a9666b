// CUDA fused cross-entropy (log_softmax + NLL with label smoothing), forward
// and backward, one row of logits per warp (C <= 1024) or per block.
//
// Math (the CPU twin's, kernels/cpu/loss.cpp): m = max_c x_c;
//   lse = m + log Σ_c exp(x_c − m) (the sum in f64);
//   loss = lse − (1 − ε)·x_t − (ε / C)·Σ_c x_c (f64, rounded once);
//   grad_c = g·(exp(x_c − lse) − (1 − ε)·[c == t] − ε / C), the exponent and
//   the exp in f64 (Note [lse in f64]). Ignored rows: loss 0, zero gradient.
//   A target outside [0, C) other than ignore_index raises the device error
//   flag (position: the row) and gets a NaN loss or gradient row.
// Dtypes: logits f32, f64, f16, bf16; loss and grad_loss f32 (f64 for f64
//   logits); lse f64; targets i64; all contiguous.
// Bytes: forward N·C·sizeof(T) (+ 24 N); backward 2·N·C·sizeof(T) (+ 24 N).
//   FLOPs: ~5 per logit forward (max, subtract, exp, two adds), ~4 backward
//   (+ an f64 exp: on a GPU with slow f64 the backward is exp-bound).
// Launch (kernels/cuda/softmax_plan.h with [N, C, 1]): C <= 1024: a warp per
//   row in 256-thread blocks, the row in registers; longer rows: a block of
//   256..1024 threads per row with an online max-and-sum, block_reduce'd.
//   Grids stride over rows. Deterministic: reduction orders depend on the plan only.
// perf: no vector loads; few long rows leave SMs idle.
// Test: the op table (tests/ops/entries_loss.cpp via tests/cuda/test_cuda_ops.cpp:
// against kernels/cpu/loss.cpp), edge cases in tests/cuda/test_cuda_loss.cpp.
#include <cmath>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error_flag.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/loss.h"
#include "kernels/cuda/offset.cuh"
#include "kernels/cuda/softmax_plan.h"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

using math::Acc;
using math::cast;


// A row's partial: the max m so far, s = Σ exp(x − m) and sx = Σ x, in f64.
template <class A>
struct Partial {
    A m;
    double s, sx;
};

// Combines two partials (exactly one exp unless the maxima are equal, which
// also covers two ±inf); a NaN max wins.
struct PartialOp {
    template <class A>
    __device__ Partial<A> operator()(Partial<A> a, Partial<A> b) const {
        const double sx = a.sx + b.sx;
        if (a.m != a.m || b.m != b.m) return {a.m != a.m ? a.m : b.m, a.s, sx};
        if (a.m == b.m) return {a.m, a.s + b.s, sx};
        if (a.m > b.m) return {a.m, a.s + b.s * exp(double(b.m) - double(a.m)), sx};
        return {b.m, b.s + a.s * exp(double(a.m) - double(b.m)), sx};
    }
};

struct Sums {
    double s, sx;
};
struct SumsOp {
    __device__ Sums operator()(Sums a, Sums b) const { return {a.s + b.s, a.sx + b.sx}; }
};

__device__ __forceinline__ bool bad_target(int64_t t, const CrossEntropyArgs& a) {
    return t != a.ignore_index && (t < 0 || t >= a.classes);
}

// Writes row i's lse and loss from its max m and sums (one thread per row).
template <class T, class A = Acc<T>>
__device__ void finish_row(A* lo, double* ls, const T* xr, int64_t i, int64_t t, A m, Sums sums,
                           const CrossEntropyArgs& a, ErrorFlagRef flag) {
    const double l = double(m) + log(sums.s);
    ls[i] = l;
    if (t == a.ignore_index) {
        lo[i] = A(0);
    } else if (bad_target(t, a)) {
        raise_error(flag, i, t);
        lo[i] = A(NAN);
    } else {
        const double eps = a.label_smoothing;
        double r = l - (1 - eps) * double(cast<A>(xr[t]));
        if (eps > 0) r -= eps / double(a.classes) * sums.sx;  // as the CPU: skipped at ε = 0
        lo[i] = A(r);
    }
}

template <class T, int N>
__global__ void __launch_bounds__(kRowBlock)
    forward_warp(Acc<T>* lo, double* ls, const T* x, const int64_t* target, SoftmaxPlan p,
                 CrossEntropyArgs a, ErrorFlagRef flag) {
    using A = Acc<T>;
    const int lane = int(threadIdx.x) % kWarp;
    const int64_t C = p.shape.size;
    for (int64_t i = item_begin(p, blockIdx.x, threadIdx.x); i < p.items; i += item_stride(p)) {
        const T* xr = x + i * C;
        A v[N];
        A m = A(-INFINITY);
#pragma unroll
        for (int k = 0; k < N; ++k) {
            v[k] = lane + kWarp * k < C ? cast<A>(xr[lane + kWarp * k]) : A(-INFINITY);
            m = nan_max(m, v[k]);
        }
        m = warp_broadcast(warp_reduce(m, MaxOp{}));
        Sums sums{0, 0};
#pragma unroll
        for (int k = 0; k < N; ++k)
            if (lane + kWarp * k < C) {
                sums.s += double(dexp(v[k] - m));
                sums.sx += double(v[k]);
            }
        sums = warp_reduce(sums, SumsOp{});
        if (lane == 0) finish_row(lo, ls, xr, i, target[i], m, sums, a, flag);
    }
}

template <class T>
__global__ void __launch_bounds__(1024)
    forward_block(Acc<T>* lo, double* ls, const T* x, const int64_t* target, SoftmaxPlan p,
                  CrossEntropyArgs a, ErrorFlagRef flag) {
    using A = Acc<T>;
    const int64_t C = p.shape.size;
    for (int64_t i = item_begin(p, blockIdx.x, threadIdx.x); i < p.items; i += item_stride(p)) {
        const T* xr = x + i * C;
        Partial<A> acc{A(-INFINITY), 0, 0};
        for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
            const A v = cast<A>(xr[c]);
            if (v != v || acc.m != acc.m) {
                acc.m = acc.m != acc.m ? acc.m : v;  // a NaN max wins
            } else if (v > acc.m) {  // a new max: rescale what came before (from -inf: 0)
                acc.s = acc.s * exp(double(acc.m) - double(v)) + 1;
                acc.m = v;
            } else if (v == acc.m) {
                acc.s += 1;
            } else {
                acc.s += double(dexp(v - acc.m));  // as the CPU: the exp in Acc<T>
            }
            acc.sx += double(v);
        }
        acc = block_reduce(acc, PartialOp{});
        // As Σ exp(x − m) would: a max of +inf (or a row of -inf) makes a
        // term exp(inf − inf) = NaN.
        if (isinf(acc.m)) acc.s = NAN;
        if (threadIdx.x == 0) finish_row(lo, ls, xr, i, target[i], acc.m, {acc.s, acc.sx}, a, flag);
    }
}

// A warp (C <= 1024) or a block per row; nothing is reduced, so one kernel
// serves both mappings.
template <class T>
__global__ void __launch_bounds__(1024)
    backward_rows(T* gx, const Acc<T>* g, const T* x, const double* ls, const int64_t* target,
                  SoftmaxPlan p, CrossEntropyArgs a, ErrorFlagRef flag) {
    using A = Acc<T>;
    const bool warp = p.mapping == RowMapping::warp_per_row;
    const int first = warp ? int(threadIdx.x) % kWarp : int(threadIdx.x);
    const int step = warp ? kWarp : int(blockDim.x);
    const int64_t C = p.shape.size;
    const A on = A(1 - a.label_smoothing), off = A(a.label_smoothing / double(C));
    for (int64_t i = item_begin(p, blockIdx.x, threadIdx.x); i < p.items; i += item_stride(p)) {
        const int64_t t = target[i];
        const T* xr = x + i * C;
        T* out = gx + i * C;
        if (t == a.ignore_index || bad_target(t, a)) {
            const bool bad = t != a.ignore_index;
            if (bad && first == 0) raise_error(flag, i, t);
            for (int64_t c = first; c < C; c += step) out[c] = cast<T>(bad ? A(NAN) : A(0));
            continue;
        }
        const A gi = g[i];
        const double l = ls[i];
        for (int64_t c = first; c < C; c += step) {
            const A pc = A(exp(double(cast<A>(xr[c])) - l));
            out[c] = cast<T>(c == t ? gi * (pc - off - on) : gi * (pc - off));
        }
    }
}

__global__ void check_targets_kernel(const int64_t* target, int64_t n, CrossEntropyArgs a,
                                     ErrorFlagRef flag) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        if (bad_target(target[i], a)) raise_error(flag, i, target[i]);
}

template <class F>
void visit_per_lane(int per_lane, F&& f) {
    if (per_lane <= 4) return f(std::integral_constant<int, 4>{});
    if (per_lane <= 16) return f(std::integral_constant<int, 16>{});
    return f(std::integral_constant<int, kMaxPerLane>{});
}

}  // namespace

void cross_entropy_forward(const View& loss, const View& lse, const View& logits,
                           const View& target, const CrossEntropyArgs& a, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(logits.is_contiguous() && target.is_contiguous() &&
                          loss.is_contiguous() && lse.is_contiguous() && logits.ndim == 2 &&
                          logits.shape[1] == a.classes && lse.dtype == DType::f64);
    const SoftmaxPlan p = softmax_plan({logits.shape[0], a.classes, 1});
    if (p.grid == 0) return;
    const char* op = "cross_entropy_forward";
    const ErrorFlagRef flag =
        CudaContext::of(stream.device).error_flag().arm(op, "target", a.classes);
    const unsigned grid = unsigned(p.grid);
    visit_floating(logits.dtype, op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        A* lo = loss.ptr<A>();
        double* ls = lse.ptr<double>();
        const T* x = logits.ptr<const T>();
        const int64_t* t = target.ptr<const int64_t>();
        if (p.mapping == RowMapping::warp_per_row)
            visit_per_lane(p.per_lane, [&](auto n) {
                forward_warp<T, decltype(n)::value>
                    <<<grid, p.block, 0, stream.handle>>>(lo, ls, x, t, p, a, flag);
            });
        else
            forward_block<T><<<grid, p.block, 0, stream.handle>>>(lo, ls, x, t, p, a, flag);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& logits,
                            const View& lse, const View& target, const CrossEntropyArgs& a,
                            StreamRef stream) {
    EMBER_INTERNAL_ASSERT(logits.is_contiguous() && grad_logits.is_contiguous() &&
                          grad_loss.is_contiguous() && lse.is_contiguous() &&
                          target.is_contiguous() && logits.ndim == 2 &&
                          logits.shape[1] == a.classes && lse.dtype == DType::f64);
    const SoftmaxPlan p = softmax_plan({logits.shape[0], a.classes, 1});
    if (p.grid == 0) return;
    const char* op = "cross_entropy_backward";
    const ErrorFlagRef flag =
        CudaContext::of(stream.device).error_flag().arm(op, "target", a.classes);
    visit_floating(logits.dtype, op, [&](auto tag) {
        using T = typename decltype(tag)::type;
        backward_rows<T><<<unsigned(p.grid), p.block, 0, stream.handle>>>(
            grad_logits.ptr<T>(), grad_loss.ptr<const Acc<T>>(), logits.ptr<const T>(),
            lse.ptr<const double>(), target.ptr<const int64_t>(), p, a, flag);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void check_class_targets(const char* op, const View& target, const CrossEntropyArgs& a,
                         StreamRef stream) {
    const int64_t n = target.numel();
    if (n == 0) return;
    EMBER_INTERNAL_ASSERT(target.is_contiguous() && target.dtype == DType::i64);
    const ErrorFlagRef flag =
        CudaContext::of(stream.device).error_flag().arm(op, "target", a.classes);
    constexpr int kBlock = 256;
    check_targets_kernel<<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
        target.ptr<const int64_t>(), n, a, flag);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::kernels::cuda

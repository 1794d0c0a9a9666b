// CUDA layer norm, forward and backward. CPU twin: kernels/cpu/norm.cpp;
// math: docs/normalization.md.
//
// Math:  per-row statistics by Welford merged with Chan's formula in Acc<T>
//        (f32 for f32/f16/bf16, f64 for f64) where the CPU sums in f64; the
//        backward's row sums and the weight/bias column sums likewise.
// Bytes: the forward reads a row twice (the second time from cache) and
//        writes y (2·numel·sizeof(T) from memory); the backward reads x and g
//        and writes grad_input, and the weight/bias sums read x and g again.
//        About 10 FLOPs per element: memory-bound.
// Launch: plans in kernels/cuda/norm_plan.h: a warp per row (M <= 1024, 8
//        rows per 256-thread block) or a block per row (128-512 threads);
//        weight/bias sums in 32-column × 8-lane blocks into ordered row
//        partials, then one thread per column adds them in order.
// perf: rows are read with scalar loads.
// Deterministic: no atomics; every order of additions depends on the shape only.
// Test: the op table (tests/ops/entries_norm.cpp, run on the device by
// tests/cuda/test_cuda_ops.cpp), edge cases in tests/cuda/test_cuda_norm.cpp
// (plans: tests/kernels/test_norm_plan.cpp).
#include <cmath>
#include <optional>
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_common.cuh"
#include "kernels/cuda/norm_plan.h"
#include "kernels/cuda/offset.cuh"
#include "kernels/cuda/workspace.h"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

using math::Acc;
using math::cast;
using math::load;
using namespace norm_detail;

// The threads that share a row: a warp, or the whole block.
template <bool kWarpRow>
struct RowGroup {
    __device__ static int lane() { return kWarpRow ? int(threadIdx.x) % kWarp : int(threadIdx.x); }
    __device__ static int size() { return kWarpRow ? kWarp : int(blockDim.x); }
    __device__ static int64_t group() { return kWarpRow ? int64_t(threadIdx.x) / kWarp : 0; }
    template <class S, class F>
    __device__ static S reduce(S v, F f) {
        if constexpr (kWarpRow)
            return warp_broadcast(warp_reduce(v, f));
        else
            return block_reduce(v, f);
    }
};

template <class T, bool kWarpRow>
__global__ void ln_forward_kernel(RowPlan p, int64_t R, int64_t M, const T* x, const Acc<T>* w,
                                  const Acc<T>* b, T* y, Acc<T>* mean, Acc<T>* rstd, double eps) {
    using A = Acc<T>;
    using G = RowGroup<kWarpRow>;
    for (int64_t r = first_row(p, blockIdx.x, G::group()); r < R; r += row_stride(p)) {
        const T* xr = x + r * M;
        T* yr = y + r * M;
        Welford<A> s{A(0), A(0), 0};
        for (int64_t j = G::lane(); j < M; j += G::size()) s = welford_add(s, load(xr[j]));
        s = G::reduce(s, WelfordMerge{});
        const A mu = s.mean, k = A(1 / sqrt(double(s.m2) / double(M) + eps));
        if (G::lane() == 0) mean[r] = mu, rstd[r] = k;
        for (int64_t j = G::lane(); j < M; j += G::size()) {
            A v = (load(xr[j]) - mu) * k;
            if (w != nullptr) v *= w[j];
            if (b != nullptr) v += b[j];
            yr[j] = cast<T>(v);
        }
    }
}

// grad_input per row: rstd·(h − mean(h) − x̂·mean(h·x̂)), h = g·w.
template <class T, bool kWarpRow>
__global__ void ln_backward_input_kernel(RowPlan p, int64_t R, int64_t M, const T* g, const T* x,
                                         const Acc<T>* w, const Acc<T>* mean, const Acc<T>* rstd,
                                         T* gx) {
    using A = Acc<T>;
    using G = RowGroup<kWarpRow>;
    for (int64_t r = first_row(p, blockIdx.x, G::group()); r < R; r += row_stride(p)) {
        const T *xr = x + r * M, *gr = g + r * M;
        const A m = mean[r], k = rstd[r];
        Sums2<A> s{A(0), A(0)};
        for (int64_t j = G::lane(); j < M; j += G::size()) {
            const A h = w != nullptr ? load(gr[j]) * w[j] : load(gr[j]);
            s.a += h;
            s.b += h * ((load(xr[j]) - m) * k);
        }
        s = G::reduce(s, AddSums{});
        const A c1 = s.a / A(M), c2 = s.b / A(M);
        for (int64_t j = G::lane(); j < M; j += G::size()) {
            const A h = w != nullptr ? load(gr[j]) * w[j] : load(gr[j]);
            const A xhat = (load(xr[j]) - m) * k;
            gx[r * M + j] = cast<T>(k * (h - c1 - xhat * c2));
        }
    }
}

// Row partials of Σ g and Σ g·x̂ per column (ColumnPlan): coalesced along columns.
template <class T>
__global__ void __launch_bounds__(kColTile * kColRows)
    ln_column_partials_kernel(ColumnPlan p, const T* g, const T* x, const Acc<T>* mean,
                              const Acc<T>* rstd, Sums2<Acc<T>>* part) {
    using A = Acc<T>;
    __shared__ Sums2<A> lanes[kColRows][kColTile];
    const int tx = int(threadIdx.x), ty = int(threadIdx.y);
    const int64_t r0 = int64_t(blockIdx.y) * p.rows_per_part;
    const int64_t r1 = norm_min(p.R, r0 + p.rows_per_part);
    for (int64_t t = blockIdx.x; t < p.col_tiles; t += gridDim.x) {
        const int64_t j = t * kColTile + tx;
        Sums2<A> s{A(0), A(0)};
        if (j < p.M)
            for (int64_t r = r0 + ty; r < r1; r += kColRows) {
                const A gi = load(g[r * p.M + j]);
                s.a += gi;
                s.b += gi * (load(x[r * p.M + j]) - mean[r]) * rstd[r];
            }
        lanes[ty][tx] = s;
        __syncthreads();
        if (ty == 0 && j < p.M) {
            for (int y = 1; y < kColRows; ++y) s = AddSums{}(s, lanes[y][tx]);
            part[int64_t(blockIdx.y) * p.M + j] = s;
        }
        __syncthreads();
    }
}

template <class A>
__global__ void ln_column_finish_kernel(int64_t M, int64_t parts, const Sums2<A>* part,
                                        Vec grad_weight, Vec grad_bias) {
    for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < M;
         j += int64_t(gridDim.x) * blockDim.x) {
        Sums2<A> s = part[j];
        for (int64_t q = 1; q < parts; ++q) s = AddSums{}(s, part[q * M + j]);
        vec_store(grad_weight, j, double(s.b));
        vec_store(grad_bias, j, double(s.a));
    }
}

template <class A>
__global__ void to_acc_kernel(int64_t n, Vec v, A* out) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        out[i] = A(vec_load(v, i, 0));
}

// A weight or bias as n contiguous Acc values: null when absent, the tensor's
// own memory when it already is that, else a converted copy in `ws`.
template <class A>
const A* acc_vector(const View& v, int64_t n, std::optional<Workspace>& ws, StreamRef stream) {
    if (v.data == nullptr) return nullptr;
    if (v.dtype == dtype_of<A>() && (n <= 1 || v.strides[0] == 1)) return v.ptr<const A>();
    ws.emplace(stream, size_t(n) * sizeof(A));
    to_acc_kernel<A><<<grid_for(n, 256), 256, 0, stream.handle>>>(n, vec_of(v), ws->as<A>());
    EMBER_CUDA_CHECK(cudaGetLastError());
    return ws->as<A>();
}

// Calls launch(std::true_type) for a warp per row, launch(std::false_type) for a block per row.
template <class F>
void launch_rows(const RowPlan& p, F launch) {
    if (p.warp_per_row)
        launch(std::true_type{});
    else
        launch(std::false_type{});
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void layer_norm_forward(const LayerNormArgs& a, StreamRef stream) {
    const View& x = a.x;
    EMBER_INTERNAL_ASSERT(x.ndim == 2 && x.is_contiguous() && a.out.is_contiguous() &&
                          a.mean.is_contiguous() && a.rstd.is_contiguous());
    const int64_t R = x.shape[0], M = x.shape[1];
    if (R == 0 || M == 0) return;  // the front fills the NaN statistics
    visit_floating(x.dtype, "layer_norm_forward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        std::optional<Workspace> wws, bws;
        const A* w = acc_vector<A>(a.weight, M, wws, stream);
        const A* b = acc_vector<A>(a.bias, M, bws, stream);
        const RowPlan p = plan_rows(R, M);
        launch_rows(p, [&](auto warp) {
            ln_forward_kernel<T, decltype(warp)::value>
                <<<unsigned(p.grid), p.threads, 0, stream.handle>>>(
                    p, R, M, x.ptr<const T>(), w, b, a.out.ptr<T>(), a.mean.ptr<A>(),
                    a.rstd.ptr<A>(), a.eps);
        });
    });
}

void layer_norm_backward(const LayerNormBackwardArgs& a, StreamRef stream) {
    const View& x = a.x;
    EMBER_INTERNAL_ASSERT(x.ndim == 2 && x.is_contiguous() && a.grad_y.is_contiguous() &&
                          a.grad_y.dtype == x.dtype && a.mean.is_contiguous() &&
                          a.rstd.is_contiguous());
    const int64_t R = x.shape[0], M = x.shape[1];
    if (R == 0 || M == 0) return;
    visit_floating(x.dtype, "layer_norm_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const T *xp = x.ptr<const T>(), *gp = a.grad_y.ptr<const T>();
        const A *mean = a.mean.ptr<const A>(), *rstd = a.rstd.ptr<const A>();
        if (a.grad_input.data != nullptr) {
            std::optional<Workspace> wws;
            const A* w = acc_vector<A>(a.weight, M, wws, stream);
            const RowPlan p = plan_rows(R, M);
            launch_rows(p, [&](auto warp) {
                ln_backward_input_kernel<T, decltype(warp)::value>
                    <<<unsigned(p.grid), p.threads, 0, stream.handle>>>(
                        p, R, M, gp, xp, w, mean, rstd, a.grad_input.ptr<T>());
            });
        }
        if (a.grad_weight.data == nullptr && a.grad_bias.data == nullptr) return;
        const ColumnPlan p = plan_columns(R, M);
        const Workspace part(stream, size_t(p.parts) * size_t(M) * sizeof(Sums2<A>));
        ln_column_partials_kernel<T><<<dim3(unsigned(p.grid_x), unsigned(p.grid_y)),
                                       dim3(kColTile, kColRows), 0, stream.handle>>>(
            p, gp, xp, mean, rstd, part.as<Sums2<A>>());
        EMBER_CUDA_CHECK(cudaGetLastError());
        ln_column_finish_kernel<A><<<grid_for(M, 256), 256, 0, stream.handle>>>(
            M, p.parts, part.as<Sums2<A>>(), vec_of(a.grad_weight), vec_of(a.grad_bias));
        EMBER_CUDA_CHECK(cudaGetLastError());
    });
}

}  // namespace ember::kernels::cuda

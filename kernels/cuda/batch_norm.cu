// CUDA batch norm: training forward (statistics, running-stat update, apply),
// eval, and backward; the training forward and backward optionally fused
// with a ReLU (Note [Fused batch norm + ReLU] in kernels/norm.h). CPU twin:
// kernels/cpu/norm.cpp; math: docs/normalization.md.
//
// Math:  per-channel statistics by Welford (mean, m2, count) per thread,
//        merged with Chan's formula, and plain sums for the backward, in
//        Acc<T> (f32 for f32/f16/bf16, f64 for f64) where the CPU sums in
//        f64; per-channel constants in f64 from those, rounded once; the
//        elementwise pass evaluates the CPU's formulas in Acc<T>.
// Bytes: forward reads x twice and writes y (3·numel·sizeof(T)); backward
//        reads x and g twice and writes grad_input (5·numel·sizeof(T)); the
//        fused ReLU's backward also reads y in both passes (7·numel·sizeof(T),
//        against 8 for relu_backward then batch norm's). The forward with a
//        residual (batch_norm_add_relu_forward) reads it in the apply pass:
//        4·numel·sizeof(T), against 8 for batch norm, add and relu. About 10
//        FLOPs per element: memory-bound.
// Launch: the statistics and the backward's sums by reduce_channels
//        (kernels/cuda/channel_reduce.cuh): a block (or `splits` blocks and
//        an ordered combine) per channel of an NCHW plane layout; 32-column
//        tiles of whole rows when S = 1 — a channels-last input, which the
//        front passes as [N·H·W, C, 1], or a [N, C] batch. One thread
//        finishes each channel (running statistics updated exactly once);
//        then a vectorized grid-stride apply pass, whose channel walk serves
//        both layouts.
// Deterministic: no atomics; every order of additions depends on the shape only.
// Test: the op table (tests/ops/entries_norm.cpp, run on the device by
// tests/cuda/test_cuda_ops.cpp), edge cases in tests/cuda/test_cuda_norm.cpp
// (plans: tests/kernels/test_norm_plan.cpp).
#include <cmath>

#include "core/cuda_check.h"
#include "kernels/cuda/channel_reduce.cuh"
#include "kernels/cuda/loop.cuh"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/norm_common.cuh"
#include "kernels/cuda/norm_plan.h"
#include "kernels/cuda/workspace.h"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

using math::Acc;
using math::cast;
using math::load;
using namespace norm_detail;

// One channel's constants for the elementwise pass, loaded as one vector.
// Forward and eval: y = (x − m)·k + b. Backward: gx = k·g + b + k1·(x − m).
template <class A>
struct alignas(4 * sizeof(A)) ChannelConsts {
    A m, k, b, k1;
};

// Training statistics: Welford over x; finish() runs once per channel.
template <class T>
struct BnForwardStats {
    using A = Acc<T>;
    using State = Welford<A>;
    using Merge = WelfordMerge;
    const T* x;
    A* save_mean;
    A* save_invstd;
    Vec weight, bias, running_mean, running_var;
    ChannelConsts<A>* consts;
    double momentum, eps, count;  // count = N·S >= 2 (the front checks)

    __device__ State identity() const { return {A(0), A(0), 0}; }
    __device__ int channel(int64_t) const { return 0; }
    __device__ State add(const State& s, int64_t i, int) const {
        return welford_add(s, load(x[i]));
    }
    __device__ void finish(int64_t c, const State& s) const {
        const double mean = double(s.mean), var = double(s.m2) / count;
        const double invstd = 1 / sqrt(var + eps);
        save_mean[c] = A(mean);
        save_invstd[c] = A(invstd);
        if (running_mean.data != nullptr) {  // PyTorch's rule: the unbiased variance
            const double rm = vec_load(running_mean, c, 0), rv = vec_load(running_var, c, 0);
            vec_store(running_mean, c, (1 - momentum) * rm + momentum * mean);
            vec_store(running_var, c, (1 - momentum) * rv + momentum * var * count / (count - 1));
        }
        consts[c] = {A(mean), A(vec_load(weight, c, 1) * invstd), A(vec_load(bias, c, 0)), A(0)};
    }
};

// The gradient reaching batch norm: g, or with kRelu (the fused op) g where
// the forward's output y > 0 and 0 elsewhere.
template <bool kRelu, class T>
__device__ __forceinline__ Acc<T> masked_grad(T g, T y) {
    if constexpr (kRelu)
        return load(y) > Acc<T>(0) ? load(g) : Acc<T>(0);
    else
        return load(g);
}

// Backward sums: a = Σ g, b = Σ g·(x − mean); Σ g·x̂ = invstd·b (g masked
// by y > 0 when kRelu).
template <class T, bool kRelu>
struct BnBackwardSums {
    using A = Acc<T>;
    using State = Sums2<A>;
    using Merge = AddSums;
    const T* x;
    const T* g;
    const T* y;  // the fused forward's output (kRelu only)
    const A* mean;
    const A* invstd;
    Vec weight, grad_weight, grad_bias;
    ChannelConsts<A>* consts;  // null: no grad_input
    double count;

    __device__ State identity() const { return {A(0), A(0)}; }
    __device__ A channel(int64_t c) const { return mean[c]; }
    __device__ State add(const State& s, int64_t i, A m) const {
        const A gi = masked_grad<kRelu>(g[i], kRelu ? y[i] : g[i]);
        return {s.a + gi, s.b + gi * (load(x[i]) - m)};
    }
    __device__ void finish(int64_t c, const State& s) const {
        const double inv = double(invstd[c]), sg = double(s.a), sgx = double(s.b);
        vec_store(grad_weight, c, inv * sgx);
        vec_store(grad_bias, c, sg);
        if (consts == nullptr) return;
        const double k = vec_load(weight, c, 1) * inv;
        consts[c] = {mean[c], A(k), A(-k * sg / count), A(-k * inv * inv * sgx / count)};
    }
};

// One element of the elementwise pass. Forward: (x − m)·k + b, rounded to T,
// plus the residual g when kRes (the sum rounded again), then max(·, 0) when
// kRelu (on the rounded value: −0 and NaN pass, as relu(batch_norm(x) [+ r])
// gives). Backward: k·g' + b + k1·(x − m), g' = g masked by y > 0 when kRelu.
template <class T, bool kGrad, bool kRelu, bool kRes>
__device__ __forceinline__ T bn_apply_one(const ChannelConsts<Acc<T>>& q, T x, T g, T y) {
    using A = Acc<T>;
    if constexpr (kGrad) {
        return cast<T>(q.k * masked_grad<kRelu>(g, y) + q.b + q.k1 * (load(x) - q.m));
    } else {
        T v = cast<T>((load(x) - q.m) * q.k + q.b);
        if constexpr (kRes) v = cast<T>(load(v) + load(g));
        if constexpr (kRelu) return load(v) < A(0) ? cast<T>(A(0)) : v;
        return v;
    }
}

// The elementwise pass over a contiguous [N, C, S] of n elements: K elements
// per step (one 16-byte load per operand when K > 1), one division per step.
// g: the backward's gradient, or the forward's residual (kRes); y: the
// fused backward's forward output.
template <class T, int K, bool kGrad, bool kRelu, bool kRes>
__global__ void bn_apply_kernel(int64_t n, int64_t C, int64_t S,
                                const ChannelConsts<Acc<T>>* __restrict__ consts, T* out,
                                const T* x, const T* g, const T* y) {
    constexpr bool kReadY = kGrad && kRelu, kReadG = kGrad || kRes;
    const int64_t vecs = (n + K - 1) / K, stride = int64_t(gridDim.x) * blockDim.x;
    for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < vecs; v += stride) {
        const int64_t i0 = v * K;
        ChannelWalk w = ChannelWalk::at(i0, C, S);
        if (i0 + K <= n) {
            const Pack<T, K> xp = reinterpret_cast<const Pack<T, K>*>(x)[v];
            Pack<T, K> gp = xp, yp = xp, o;
            if constexpr (kReadG) gp = reinterpret_cast<const Pack<T, K>*>(g)[v];
            if constexpr (kReadY) yp = reinterpret_cast<const Pack<T, K>*>(y)[v];
#pragma unroll
            for (int k = 0; k < K; ++k) {
                o.v[k] =
                    bn_apply_one<T, kGrad, kRelu, kRes>(consts[w.c], xp.v[k], gp.v[k], yp.v[k]);
                w.next(C, S);
            }
            reinterpret_cast<Pack<T, K>*>(out)[v] = o;
        } else {
            for (int64_t i = i0; i < n; ++i, w.next(C, S))
                out[i] = bn_apply_one<T, kGrad, kRelu, kRes>(
                    consts[w.c], x[i], kReadG ? g[i] : x[i], kReadY ? y[i] : x[i]);
        }
    }
}

template <class T, bool kGrad, bool kRelu, bool kRes = false>
void bn_apply(int64_t N, int64_t C, int64_t S, const ChannelConsts<Acc<T>>* consts, T* out,
              const T* x, const T* g, const T* y, StreamRef stream) {
    const int64_t n = N * C * S;
    constexpr int K = sizeof(T) >= 16 ? 1 : 16 / sizeof(T) > 8 ? 8 : int(16 / sizeof(T));
    const bool vec = detail::aligned_for<K, T>(out) && detail::aligned_for<K, T>(x) &&
                     (!(kGrad || kRes) || detail::aligned_for<K, T>(g)) &&
                     (!(kGrad && kRelu) || detail::aligned_for<K, T>(y));
    if (vec)
        bn_apply_kernel<T, K, kGrad, kRelu, kRes>
            <<<grid_for((n + K - 1) / K, kMapBlock), kMapBlock, 0, stream.handle>>>(n, C, S, consts,
                                                                                    out, x, g, y);
    else
        bn_apply_kernel<T, 1, kGrad, kRelu, kRes>
            <<<grid_for(n, kMapBlock), kMapBlock, 0, stream.handle>>>(n, C, S, consts, out, x, g,
                                                                      y);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

// The training backward: sums (then the constants), then the apply pass.
template <class T, bool kRelu>
void bn_backward(const BatchNormBackwardArgs& a, StreamRef stream) {
    using A = Acc<T>;
    const View& x = a.x;
    const int64_t N = x.shape[0], C = x.shape[1], S = x.shape[2];
    const bool want_input = a.grad_input.data != nullptr;
    const T* y = kRelu ? a.relu_out.ptr<const T>() : nullptr;
    const Workspace consts(stream, want_input ? size_t(C) * sizeof(ChannelConsts<A>) : 0);
    ChannelConsts<A>* k = want_input ? consts.as<ChannelConsts<A>>() : nullptr;
    const BnBackwardSums<T, kRelu> op{x.ptr<const T>(),
                                      a.grad_y.ptr<const T>(),
                                      y,
                                      a.save_mean.ptr<const A>(),
                                      a.save_invstd.ptr<const A>(),
                                      vec_of(a.weight),
                                      vec_of(a.grad_weight),
                                      vec_of(a.grad_bias),
                                      k,
                                      double(N * S)};
    reduce_channels(N, C, S, op, stream);
    if (want_input)
        bn_apply<T, true, kRelu>(N, C, S, k, a.grad_input.ptr<T>(), x.ptr<const T>(),
                                 a.grad_y.ptr<const T>(), y, stream);
}

// Eval constants: scale = w / sqrt(running_var + eps), as the CPU computes it.
template <class A>
__global__ void bn_eval_consts_kernel(int64_t C, Vec rm, Vec rv, Vec w, Vec b, double eps,
                                      ChannelConsts<A>* consts) {
    for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < C;
         c += int64_t(gridDim.x) * blockDim.x)
        consts[c] = {A(vec_load(rm, c, 0)), A(vec_load(w, c, 1) / sqrt(vec_load(rv, c, 1) + eps)),
                     A(vec_load(b, c, 0)), A(0)};
}

}  // namespace

void batch_norm_forward(const BatchNormArgs& a, StreamRef stream) {
    const View& x = a.x;
    EMBER_INTERNAL_ASSERT(x.ndim == 3 && x.is_contiguous() && a.out.is_contiguous() &&
                          a.out.dtype == x.dtype && x.shape[0] * x.shape[2] >= 2);
    const int64_t N = x.shape[0], C = x.shape[1], S = x.shape[2];
    if (C == 0) return;
    visit_floating(x.dtype, "batch_norm_forward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const Workspace consts(stream, size_t(C) * sizeof(ChannelConsts<A>));
        const BnForwardStats<T> op{x.ptr<const T>(),
                                   a.save_mean.ptr<A>(),
                                   a.save_invstd.ptr<A>(),
                                   vec_of(a.weight),
                                   vec_of(a.bias),
                                   vec_of(a.running_mean),
                                   vec_of(a.running_var),
                                   consts.as<ChannelConsts<A>>(),
                                   a.momentum,
                                   a.eps,
                                   double(N * S)};
        reduce_channels(N, C, S, op, stream);
        if (a.relu && a.residual.data)
            bn_apply<T, false, true, true>(N, C, S, consts.as<ChannelConsts<A>>(), a.out.ptr<T>(),
                                           x.ptr<const T>(), a.residual.ptr<const T>(), nullptr,
                                           stream);
        else if (a.relu)
            bn_apply<T, false, true>(N, C, S, consts.as<ChannelConsts<A>>(), a.out.ptr<T>(),
                                     x.ptr<const T>(), nullptr, nullptr, stream);
        else
            bn_apply<T, false, false>(N, C, S, consts.as<ChannelConsts<A>>(), a.out.ptr<T>(),
                                      x.ptr<const T>(), nullptr, nullptr, stream);
    });
}

void batch_norm_inference(const BatchNormArgs& a, StreamRef stream) {
    const View &x = a.x, &out = a.out;
    EMBER_INTERNAL_ASSERT(x.ndim == 3 && x.is_contiguous() && out.is_contiguous() && !a.relu);
    const int64_t N = x.shape[0], C = x.shape[1], S = x.shape[2];
    if (x.numel() == 0) return;
    visit_floating(x.dtype, "batch_norm_inference", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const Workspace consts(stream, size_t(C) * sizeof(ChannelConsts<A>));
        bn_eval_consts_kernel<A><<<grid_for(C, 256), 256, 0, stream.handle>>>(
            C, vec_of(a.running_mean), vec_of(a.running_var), vec_of(a.weight), vec_of(a.bias),
            a.eps, consts.as<ChannelConsts<A>>());
        EMBER_CUDA_CHECK(cudaGetLastError());
        bn_apply<T, false, false>(N, C, S, consts.as<ChannelConsts<A>>(), out.ptr<T>(),
                                  x.ptr<const T>(), nullptr, nullptr, stream);
    });
}

void batch_norm_backward(const BatchNormBackwardArgs& a, StreamRef stream) {
    const View& x = a.x;
    const bool relu = a.relu_out.data != nullptr;
    EMBER_INTERNAL_ASSERT(x.ndim == 3 && x.is_contiguous() && a.grad_y.is_contiguous() &&
                          a.grad_y.dtype == x.dtype &&
                          (!relu || (a.relu_out.is_contiguous() && a.relu_out.dtype == x.dtype)));
    if (x.numel() == 0 || (a.grad_input.data == nullptr && a.grad_weight.data == nullptr &&
                           a.grad_bias.data == nullptr))
        return;
    visit_floating(x.dtype, "batch_norm_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (relu)
            bn_backward<T, true>(a, stream);
        else
            bn_backward<T, false>(a, stream);
    });
}

}  // namespace ember::kernels::cuda

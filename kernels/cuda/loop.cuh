// The CUDA twin of kernels/cpu/loop.h: `cuda::map<Out, In...>(out, f, in...)`
// applies a functor elementwise over Views of one shape, on a stream. Dense operands take a
// vectorized grid-stride path (K elements per thread through 4..16-byte
// loads); anything strided or broadcast takes the OffsetCalc path. The functor
// is an EMBER_HD struct from kernels/math.h, the same one the CPU runs.
#pragma once

#include <cstdint>
#include <utility>

#include "core/cuda_check.h"
#include "core/cuda_context.h"
#include "kernels/cuda/offset.cuh"
#include "kernels/math.h"

namespace ember::kernels::cuda {

inline constexpr int kMapBlock = 256;

template <class T, int K>
struct alignas(sizeof(T) * K) Pack {
    T v[K];
};

/// Adapts an Acc-typed math functor to storage types: loads each input as its
/// accumulation type, applies Op, and converts to Out.
template <class Out, class Op>
struct Apply {
    Op op;
    template <class... A>
    EMBER_HD EMBER_INLINE Out operator()(A... a) const {
        return math::cast<Out>(op(math::load(a)...));
    }
};

namespace detail {

template <int K, class F, class Out, class... In>
__device__ __forceinline__ void apply_pack(const F& f, Pack<Out, K>& o, const Pack<In, K>&... p) {
#pragma unroll
    for (int k = 0; k < K; ++k) o.v[k] = f(p.v[k]...);
}

template <int K, class Out, class F, class... In>
__global__ void map_dense_kernel(int64_t n, F f, Out* out, const In*... in) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    const int64_t tid = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
    const int64_t nvec = n / K;
    for (int64_t v = tid; v < nvec; v += stride) {
        Pack<Out, K> o;
        apply_pack<K>(f, o, reinterpret_cast<const Pack<In, K>*>(in)[v]...);
        reinterpret_cast<Pack<Out, K>*>(out)[v] = o;
    }
    for (int64_t i = nvec * K + tid; i < n; i += stride) out[i] = f(in[i]...);
}

template <class Out, class F, class... In, size_t... I>
__device__ __forceinline__ void apply_strided(const F& f, Out* out, const int64_t (&off)[1 + sizeof...(In)],
                                              std::index_sequence<I...>, const In*... in) {
    out[off[0]] = f(in[off[I + 1]]...);
}

template <class Out, class F, class... In>
__global__ void map_strided_kernel(int64_t n, F f, OffsetCalc<1 + sizeof...(In)> calc, Out* out,
                                   const In*... in) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        int64_t off[1 + sizeof...(In)];
        calc.offsets(i, off);
        apply_strided(f, out, off, std::index_sequence_for<In...>{}, in...);
    }
}

template <int K, class T>
bool aligned_for(const void* p) {
    return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * K) == 0;
}

}  // namespace detail

/// out[i] = f(in[i]...) over Views of one shape (inputs may broadcast with
/// stride 0), launched on `stream` (its device is the current one: the
/// dispatch's DeviceGuard made it so).
template <class Out, class... In, class F>
void map(StreamRef stream, const View& out, F f, const std::conditional_t<true, View, In>&... in) {
    const int64_t n = out.numel();
    if (n == 0) return;
    const bool dense = out.is_contiguous() && (in.is_contiguous() && ...) &&
                       ((in.numel() == n) && ...);
    if (dense) {
        constexpr int K = sizeof(Out) >= 16 ? 1 : int(16 / sizeof(Out)) > 8 ? 8 : int(16 / sizeof(Out));
        const bool vec = detail::aligned_for<K, Out>(out.data) &&
                         (detail::aligned_for<K, In>(in.data) && ...);
        if (vec) {
            detail::map_dense_kernel<K, Out><<<grid_for(n / K + 1, kMapBlock), kMapBlock, 0, stream.handle>>>(
                n, f, out.ptr<Out>(), in.template ptr<const In>()...);
        } else {
            detail::map_dense_kernel<1, Out><<<grid_for(n, kMapBlock), kMapBlock, 0, stream.handle>>>(
                n, f, out.ptr<Out>(), in.template ptr<const In>()...);
        }
    } else {
        const View* ops[1 + sizeof...(In)] = {&out, &in...};
        const OffsetCalc<1 + sizeof...(In)> calc = make_offset_calc<1 + sizeof...(In)>(ops);
        detail::map_strided_kernel<Out><<<grid_for(n, kMapBlock), kMapBlock, 0, stream.handle>>>(
            n, f, calc, out.ptr<Out>(), in.template ptr<const In>()...);
    }
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::kernels::cuda

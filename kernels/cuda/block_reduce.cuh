// Warp and block reductions for CUDA kernels (reductions, softmax, norms,
// cross-entropy). Deterministic: which thread combines which partial, and in
// what order, depends on blockDim only, so a launch gives the same bits every
// run. Values of any trivially copyable type (a float, a pair of floats, a
// Welford triple) move between lanes as 32-bit words.
#pragma once

#include <cstdint>
#include <cstring>

namespace ember::kernels::cuda {

inline constexpr int kWarp = 32;

/// v of the lane `offset` above this one (this lane's own v past the warp's end).
template <class T>
__device__ __forceinline__ T shfl_down(const T& v, int offset) {
    constexpr int kWords = int((sizeof(T) + 3) / 4);
    uint32_t w[kWords] = {};
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = __shfl_down_sync(0xffffffffu, w[k], offset);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

/// Combines the 32 lanes' values of a full warp as a tree; the result is in
/// lane 0 (the other lanes hold partial results).
template <class T, class Combine>
__device__ __forceinline__ T warp_reduce(T v, Combine combine) {
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v = combine(v, shfl_down(v, offset));
    return v;
}

/// v of lane 0 in every lane of the warp.
template <class T>
__device__ __forceinline__ T warp_broadcast(const T& v) {
    constexpr int kWords = int((sizeof(T) + 3) / 4);
    uint32_t w[kWords] = {};
    memcpy(w, &v, sizeof(T));
#pragma unroll
    for (int k = 0; k < kWords; ++k) w[k] = __shfl_sync(0xffffffffu, w[k], 0);
    T r;
    memcpy(&r, w, sizeof(T));
    return r;
}

/// Combines v over all threads of a 1-d block (blockDim.x a multiple of 32,
/// at most 1024) and returns the result in every thread. Every thread of the
/// block must call it (it synchronizes); it may be called repeatedly.
/// Order: a tree within each warp, then the warps' results left to right.
template <class T, class Combine>
__device__ T block_reduce(T v, Combine combine) {
    __shared__ alignas(16) unsigned char raw[kWarp * sizeof(T)];
    T* slots = reinterpret_cast<T*>(raw);
    const int lane = int(threadIdx.x) % kWarp, warp = int(threadIdx.x) / kWarp;
    const int warps = int(blockDim.x) / kWarp;
    v = warp_reduce(v, combine);
    __syncthreads();  // an earlier call's readers are done with the slots
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    if (threadIdx.x == 0) {
        T acc = slots[0];
        for (int w = 1; w < warps; ++w) acc = combine(acc, slots[w]);
        slots[0] = acc;
    }
    __syncthreads();
    return slots[0];
}

}  // namespace ember::kernels::cuda

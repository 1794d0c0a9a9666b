// Small device helpers the CUDA kernels share (softmax, cross-entropy, the
// reductions), defined once: NaN-propagating max and min as the CPU's
// (kernels/cpu/reduce.h: a NaN wins), exp and log overloaded on f32 and f64,
// and the max and sum combiners the block reductions take.
#pragma once

namespace ember::kernels::cuda {

/// max(a, b), a NaN on either side winning (the CPU's order of tests).
template <class A>
__device__ __forceinline__ A nan_max(A a, A b) {
    return (a > b || a != a) ? a : b;
}
/// min(a, b), a NaN on either side winning.
template <class A>
__device__ __forceinline__ A nan_min(A a, A b) {
    return (a < b || a != a) ? a : b;
}

__device__ __forceinline__ float dexp(float v) { return expf(v); }
__device__ __forceinline__ double dexp(double v) { return exp(v); }
__device__ __forceinline__ float dlog(float v) { return logf(v); }
__device__ __forceinline__ double dlog(double v) { return log(v); }

/// Combiners for block_reduce (kernels/cuda/block_reduce.cuh).
struct MaxOp {
    template <class A>
    __device__ A operator()(A a, A b) const {
        return nan_max(a, b);
    }
};
struct AddOp {
    template <class A>
    __device__ A operator()(A a, A b) const {
        return a + b;
    }
};

}  // namespace ember::kernels::cuda

// What the batch norm and layer norm kernels share (kernels/cuda/batch_norm.cu,
// layer_norm.cu): per-channel vectors of any dtype and stride, Welford
// statistics merged with Chan's formula, and pairs of sums.
#pragma once

#include <cstdint>

#include "kernels/math.h"
#include "kernels/view.h"

namespace ember::kernels::cuda::norm_detail {

using math::cast;

// A 1-d floating vector of any dtype and stride (weight, bias, a running
// statistic, a parameter gradient); data == nullptr: absent.
struct Vec {
    char* data = nullptr;
    DType dtype = DType::f32;
    int64_t stride = 0;
};

inline Vec vec_of(const View& v) { return {v.data, v.dtype, v.ndim > 0 ? v.strides[0] : 0}; }

// Element i as f64, or `absent` without a vector (the CPU's read_vector).
__device__ inline double vec_load(const Vec& v, int64_t i, double absent) {
    if (v.data == nullptr) return absent;
    const int64_t o = i * v.stride;
    switch (v.dtype) {
        case DType::f64: return reinterpret_cast<const double*>(v.data)[o];
        case DType::f16: return double(float(reinterpret_cast<const Half*>(v.data)[o]));
        case DType::bf16: return double(float(reinterpret_cast<const BFloat16*>(v.data)[o]));
        default: return double(reinterpret_cast<const float*>(v.data)[o]);
    }
}

// Writes element i rounded once to the vector's dtype; nothing when absent.
__device__ inline void vec_store(const Vec& v, int64_t i, double x) {
    if (v.data == nullptr) return;
    const int64_t o = i * v.stride;
    switch (v.dtype) {
        case DType::f64: reinterpret_cast<double*>(v.data)[o] = x; break;
        case DType::f16: reinterpret_cast<Half*>(v.data)[o] = cast<Half>(x); break;
        case DType::bf16: reinterpret_cast<BFloat16*>(v.data)[o] = cast<BFloat16>(x); break;
        default: reinterpret_cast<float*>(v.data)[o] = float(x); break;
    }
}

template <class A>
struct Welford {
    A mean, m2;
    int64_t n;
};

template <class A>
__device__ __forceinline__ Welford<A> welford_add(Welford<A> w, A x) {
    ++w.n;
    const A d = x - w.mean;
    w.mean += d / A(w.n);
    w.m2 += d * (x - w.mean);
    return w;
}

struct WelfordMerge {  // Chan et al.; either side may be empty
    template <class A>
    __device__ Welford<A> operator()(const Welford<A>& a, const Welford<A>& b) const {
        const int64_t n = a.n + b.n;
        if (n == 0) return a;
        const A d = b.mean - a.mean, fb = A(b.n) / A(n);
        return {a.mean + d * fb, a.m2 + b.m2 + d * d * A(a.n) * fb, n};
    }
};

template <class A>
struct Sums2 {
    A a, b;
};

struct AddSums {
    template <class A>
    __device__ Sums2<A> operator()(const Sums2<A>& x, const Sums2<A>& y) const {
        return {x.a + y.a, x.b + y.b};
    }
};

}  // namespace ember::kernels::cuda::norm_detail

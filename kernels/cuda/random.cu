// CUDA random fills: the same per-element Philox contract as kernels/cpu/random.cpp
// (kernels/random_math.h), so uniform draws are bit-identical to the CPU's and
// normals agree within a few ulp (device log/sin/cos). Bytes: numel * sizeof(T)
// written; FLOPs: ~10 Philox rounds per 4 (uniform) or 2 (normal) elements.
// Grid-stride, 256 threads; deterministic. Test: tests/cuda; CPU twin: kernels/cpu/random.cpp.
#include "core/cuda_check.h"
#include "kernels/cuda/offset.cuh"
#include "kernels/random.h"
#include "kernels/random_math.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kBlock = 256;

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, uint64_t first, math::Acc<T> lo,
                               math::Acc<T> span, bool unit) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        const math::Acc<T> u = math::uniform_at<T>(seed, first, i);
        out[i] = math::cast<T>(unit ? u : lo + span * u);
    }
}

template <class T>
__global__ void normal_kernel(T* out, int64_t n, uint64_t seed, uint64_t first, math::Acc<T> mean,
                              math::Acc<T> std, bool standard) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        const math::Acc<T> z = math::normal_at<T>(seed, first, i);
        out[i] = math::cast<T>(standard ? z : mean + std * z);
    }
}

template <class T>
__global__ void randint_kernel(T* out, int64_t n, uint64_t seed, uint64_t first, int64_t low,
                               uint64_t range) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        out[i] = math::cast<T>(int64_t(uint64_t(low) + math::randint_at(seed, first, i, range)));
}

}  // namespace

void uniform(const View& out, uint64_t seed, uint64_t first, double low, double high, StreamRef stream) {
    const int64_t n = out.numel();
    if (n == 0) return;
    visit_floating(out.dtype, "rand", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        uniform_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(out.ptr<T>(), n, seed, first, A(low),
                                                           A(high - low), low == 0 && high == 1);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void normal(const View& out, uint64_t seed, uint64_t first, double mean, double std, StreamRef stream) {
    const int64_t n = out.numel();
    if (n == 0) return;
    visit_floating(out.dtype, "randn", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        normal_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(out.ptr<T>(), n, seed, first, A(mean),
                                                          A(std), mean == 0 && std == 1);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void randint(const View& out, uint64_t seed, uint64_t first, int64_t low, uint64_t range,
             StreamRef stream) {
    const int64_t n = out.numel();
    if (n == 0) return;
    visit_dtype(out.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        randint_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(out.ptr<T>(), n, seed, first, low, range);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::kernels::cuda

// CUDA copies and casts between every pair of dtypes on any strides, fills,
// and cross-device memory moves.
// Math: dst[i] = math::cast<To>(src[i]) (kernels/math.h, shared with the CPU twin
// kernels/cpu/copy.cpp). Bytes: numel * (sizeof(src) + sizeof(dst)); FLOPs: 0.
// Launch: grid-stride, 256 threads; deterministic. Dense same-dtype copies use
// cudaMemcpyAsync. Test: tests/cuda (CUDA vs CPU); bench: `ember bench` cast.
#include "core/cuda_check.h"
#include "kernels/cuda/copy.h"
#include "kernels/cuda/offset.cuh"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kBlock = 256;

template <class To, class From>
__global__ void cast_kernel(To* dst, const From* src, int64_t n, OffsetCalc<2> calc, bool dense) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        if (dense) {
            dst[i] = math::cast<To>(src[i]);
        } else {
            int64_t off[2];
            calc.offsets(i, off);
            dst[off[0]] = math::cast<To>(src[off[1]]);
        }
    }
}

template <class T>
__global__ void fill_kernel(T* dst, T value, int64_t n, OffsetCalc<1> calc, bool dense) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        if (dense) {
            dst[i] = value;
        } else {
            int64_t off[1];
            calc.offsets(i, off);
            dst[off[0]] = value;
        }
    }
}

}  // namespace

void copy(const View& dst, const View& src, int device) {
    const int64_t n = dst.numel();
    if (n == 0) return;
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    const bool dense = dst.is_contiguous() && src.is_contiguous();
    if (dense && dst.dtype == src.dtype) {
        EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, size_t(n * dtype_size(dst.dtype)),
                                         cudaMemcpyDeviceToDevice, 0));
        return;
    }
    const View* ops[2] = {&dst, &src};
    const OffsetCalc<2> calc = make_offset_calc<2>(ops);
    visit_dtype(dst.dtype, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        visit_dtype(src.dtype, [&](auto from_tag) {
            using From = typename decltype(from_tag)::type;
            cast_kernel<To, From><<<grid_for(n, kBlock), kBlock>>>(
                dst.ptr<To>(), src.ptr<const From>(), n, calc, dense);
        });
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void fill(const View& dst, double value, int device) {
    const int64_t n = dst.numel();
    if (n == 0) return;
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    const View* ops[1] = {&dst};
    const OffsetCalc<1> calc = make_offset_calc<1>(ops);
    visit_dtype(dst.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        fill_kernel<T><<<grid_for(n, kBlock), kBlock>>>(dst.ptr<T>(), math::cast<T>(value), n,
                                                        calc, dst.is_contiguous());
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
            bool non_blocking) {
    if (nbytes == 0) return;
    const int dev = dst_device.is_cuda() ? dst_device.index : src_device.index;
    EMBER_CUDA_CHECK(cudaSetDevice(dev));
    if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
        EMBER_CUDA_CHECK(cudaMemcpyPeer(dst, dst_device.index, src, src_device.index, nbytes));
        return;
    }
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, 0));
    if (!non_blocking) EMBER_CUDA_CHECK(cudaStreamSynchronize(0));
}

}  // namespace ember::kernels::cuda

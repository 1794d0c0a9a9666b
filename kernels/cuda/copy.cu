// CUDA copies and casts between every pair of dtypes on any strides, fills,
// and cross-device memory moves.
// Math: dst[i] = math::cast<To>(src[i]) (kernels/math.h, shared with the CPU twin
// kernels/cpu/copy.cpp). Bytes: numel * (sizeof(src) + sizeof(dst)); FLOPs: 0.
// Launch: kernels/cuda/loop.cuh (vectorized when dense); deterministic. Dense same-dtype copies use
// cudaMemcpyAsync. Test: tests/cuda (CUDA vs CPU); bench: `ember bench` cast.
#include "core/cuda_check.h"
#include "kernels/cuda/copy.h"
#include "kernels/cuda/loop.cuh"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

template <class To>
struct CastTo {
    template <class From>
    EMBER_HD EMBER_INLINE To operator()(From v) const {
        return math::cast<To>(v);
    }
};

template <class T>
struct Constant {
    T value;
    EMBER_HD EMBER_INLINE T operator()() const { return value; }
};

}  // namespace

void copy(const View& dst, const View& src, StreamRef stream) {
    const int64_t n = dst.numel();
    if (n == 0) return;
    if (dst.dtype == src.dtype && dst.is_contiguous() && src.is_contiguous()) {
        EMBER_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, size_t(n * dtype_size(dst.dtype)),
                                         cudaMemcpyDeviceToDevice, stream.handle));
        return;
    }
    visit_dtype(dst.dtype, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        visit_dtype(src.dtype, [&](auto from_tag) {
            using From = typename decltype(from_tag)::type;
            map<To, From>(stream, dst, CastTo<To>{}, src);
        });
    });
}

void fill(const View& dst, double value, StreamRef stream) {
    if (dst.numel() == 0) return;
    visit_dtype(dst.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        map<T>(stream, dst, Constant<T>{math::cast<T>(value)});
    });
}

void memcpy(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes,
            bool non_blocking, StreamRef stream) {
    if (nbytes == 0) return;
    if (dst_device.is_cuda() && src_device.is_cuda() && dst_device.index != src_device.index) {
        // On the destination's stream, after the source's current stream has
        // produced src (an event it waits on).
        cudaEvent_t produced = nullptr;
        {
            const DeviceGuard on_src(src_device);
            EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&produced, cudaEventDisableTiming));
            EMBER_CUDA_CHECK(cudaEventRecord(produced, current_stream(src_device).handle));
        }
        EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream.handle, produced, 0));
        EMBER_CUDA_CHECK(cudaEventDestroy(produced));  // released once the wait is done
        EMBER_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device.index, src, src_device.index, nbytes,
                                             stream.handle));
        if (!non_blocking) synchronize(stream);
        return;
    }
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream.handle));
    if (!non_blocking) synchronize(stream);  // the host may read dst now: a sync point
}

}  // namespace ember::kernels::cuda

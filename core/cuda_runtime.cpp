// Device memory, pinned host memory and device queries through the CUDA runtime.
// The caching allocator (size classes, per-stream reuse) replaces the plain
// cudaMalloc here when the CUDA backend grows it.
#include <cuda_runtime_api.h>

#include "core/allocator.h"
#include "core/cuda_check.h"
#include "core/cuda_stream.h"
#include "core/device.h"

namespace ember {

bool cuda_built() { return true; }

int cuda_device_count() {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // clear the sticky "no device" error
        return 0;
    }
    return n;
}

namespace detail {

Allocation allocate_cuda(int device_index, size_t nbytes) {
    const int n = cuda_device_count();
    EMBER_CHECK(device_index >= 0 && device_index < n, "cuda:", device_index,
                " is not available (", n, " CUDA device(s) found)");
    EMBER_CUDA_CHECK(cudaSetDevice(device_index));
    void* p = nullptr;
    if (nbytes > 0) {
        const cudaError_t e = cudaMalloc(&p, nbytes);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            EMBER_FAIL("out of memory on cuda:", device_index, ": could not allocate ", nbytes,
                       " bytes (", cudaGetErrorString(e), ")");
        }
    }
    return {p, [device_index](void* q) {
                cudaSetDevice(device_index);
                cudaFree(q);  // destructors do not throw
            }};
}

Allocation allocate_pinned(size_t nbytes) {
    void* p = nullptr;
    const cudaError_t e = cudaMallocHost(&p, nbytes == 0 ? 1 : nbytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        EMBER_FAIL("could not allocate ", nbytes, " bytes of pinned host memory (",
                   cudaGetErrorString(e), ")");
    }
    return {p, [](void* q) { cudaFreeHost(q); }};
}

}  // namespace detail
// ---- Streams and events ----

CudaStream::CudaStream(Device device) : device_(device) {
    EMBER_CHECK(device.is_cuda(), "CudaStream: expected a CUDA device, got ", device);
    EMBER_CUDA_CHECK(cudaSetDevice(device.index));
    cudaStream_t s = nullptr;
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    handle_ = s;
}

CudaStream::~CudaStream() {
    if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));  // destructors do not throw
}

void CudaStream::copy_async(void* dst, const void* src, size_t nbytes) const {
    if (nbytes == 0) return;
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault,
                                     static_cast<cudaStream_t>(handle_)));
}

CudaEvent::CudaEvent(Device device) : device_(device) {
    EMBER_CHECK(device.is_cuda(), "CudaEvent: expected a CUDA device, got ", device);
    EMBER_CUDA_CHECK(cudaSetDevice(device.index));
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    handle_ = e;
}

CudaEvent::~CudaEvent() {
    if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

void CudaEvent::record(const CudaStream& stream) {
    EMBER_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_),
                                     static_cast<cudaStream_t>(stream.handle())));
}

void CudaEvent::block_default_stream() const {
    EMBER_CUDA_CHECK(cudaSetDevice(device_.index));
    // The legacy default stream: where ember's kernels and copies run today.
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(cudaStreamLegacy, static_cast<cudaEvent_t>(handle_), 0));
}

void CudaEvent::synchronize() const {
    EMBER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
}

}  // namespace ember

// Device memory (through the device's context), pinned host memory, device
// queries, and the streams and events of core/cuda_stream.h.
#include <cuda_runtime_api.h>

#include "core/allocator.h"
#include "core/cuda_check.h"
#include "core/cuda_context.h"
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
    return CudaContext::of(device_index).allocate(nbytes);
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
    CudaContext::of(device);  // checks the index
    const DeviceGuard guard(device);
    EMBER_CUDA_CHECK(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() {
    if (!handle_) return;
    CudaContext::of(device_).release_stream(ref());  // its workspace, once its work is done
    cudaStreamDestroy(handle_);                      // destructors do not throw
}

void CudaStream::copy_async(void* dst, const void* src, size_t nbytes) const {
    if (nbytes == 0) return;
    const DeviceGuard guard(device_);
    EMBER_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, handle_));
}

bool CudaStream::query() const {
    const cudaError_t e = cudaStreamQuery(handle_);
    if (e == cudaErrorNotReady) return false;
    EMBER_CUDA_CHECK(e);
    return true;
}

void CudaStream::synchronize() const { ember::synchronize(ref()); }

CudaEvent::CudaEvent(Device device, bool timing) : device_(device) {
    EMBER_CHECK(device.is_cuda(), "CudaEvent: expected a CUDA device, got ", device);
    CudaContext::of(device);
    const DeviceGuard guard(device);
    cudaEvent_t e = nullptr;
    EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    handle_ = e;
}

CudaEvent::~CudaEvent() {
    if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

void CudaEvent::record(StreamRef stream) {
    EMBER_CHECK(stream.device == device_, "CudaEvent::record: the event is on ", device_,
                " but the stream on ", stream.device);
    const DeviceGuard guard(device_);
    EMBER_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), stream.handle));
}

void CudaEvent::wait(StreamRef stream) const {
    const DeviceGuard guard(stream.device);
    EMBER_CUDA_CHECK(cudaStreamWaitEvent(stream.handle, static_cast<cudaEvent_t>(handle_), 0));
}

double CudaEvent::elapsed_ms(const CudaEvent& start, const CudaEvent& end) {
    float ms = 0;
    EMBER_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_),
                                          static_cast<cudaEvent_t>(end.handle_)));
    return double(ms);
}

void CudaEvent::synchronize() const {
    EMBER_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)));
    CudaContext::of(device_).error_flag().check();  // the host has just synchronized
}

bool CudaEvent::query() const {
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
    if (e == cudaErrorNotReady) return false;
    EMBER_CUDA_CHECK(e);
    return true;
}

}  // namespace ember

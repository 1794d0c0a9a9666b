// Device memory, pinned host memory and device queries through the CUDA runtime.
// The caching allocator (size classes, per-stream reuse) replaces the plain
// cudaMalloc here when the CUDA backend grows it.
#include <cuda_runtime_api.h>

#include "core/allocator.h"
#include "core/cuda_check.h"
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
}  // namespace ember

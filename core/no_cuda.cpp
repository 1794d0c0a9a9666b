// Stand-ins used when ember is built without its CUDA backend: every request
// for device memory is a clear error.
#include "core/allocator.h"
#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/error.h"

namespace ember {

bool cuda_built() { return false; }
int cuda_device_count() { return 0; }

namespace detail {
Allocation allocate_cuda(int device_index, size_t) {
    EMBER_FAIL("cannot allocate on cuda:", device_index,
               ": ember was built without CUDA (configure with -DEMBER_CUDA=ON)");
}
Allocation allocate_pinned(size_t) {
    EMBER_FAIL("internal error: pinned memory requested without the CUDA backend");
}
}  // namespace detail
CudaStream::CudaStream(Device device) : device_(device) {
    EMBER_FAIL("cannot create a stream on ", device,
               ": ember was built without CUDA (configure with -DEMBER_CUDA=ON)");
}
CudaStream::~CudaStream() = default;
void CudaStream::copy_async(void*, const void*, size_t) const {
    EMBER_FAIL("internal error: CudaStream without the CUDA backend");
}
CudaEvent::CudaEvent(Device device) : device_(device) {
    EMBER_FAIL("cannot create an event on ", device,
               ": ember was built without CUDA (configure with -DEMBER_CUDA=ON)");
}
CudaEvent::~CudaEvent() = default;
void CudaEvent::record(const CudaStream&) {}
void CudaEvent::block_default_stream() const {}
void CudaEvent::synchronize() const {}

}  // namespace ember

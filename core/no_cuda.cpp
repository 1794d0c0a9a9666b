// Stand-ins used when ember is built without its CUDA backend: every request
// for device memory, a stream, an event or a device context is a clear error.

#include "core/allocator.h"
#include "core/cuda_context.h"
#include "core/cuda_stream.h"
#include "core/device.h"
#include "core/error.h"

namespace ember {

namespace {
[[noreturn]] void no_cuda(const char* what, Device d) {
    EMBER_FAIL(what, " on ", d, ": ember was built without CUDA (configure with -DEMBER_CUDA=ON)");
}
}  // namespace

bool cuda_built() { return false; }

std::string cuda_versions() { return ""; }
int cuda_device_count() { return 0; }

namespace detail {
Allocation allocate_cuda(int device_index, size_t) {
    no_cuda("cannot allocate", Device::cuda(device_index));
}
Allocation allocate_pinned(size_t) {
    EMBER_FAIL("internal error: pinned memory requested without the CUDA backend");
}
}  // namespace detail

StreamRef current_stream(Device device) { no_cuda("no current stream", device); }
void set_current_stream(StreamRef stream) { no_cuda("cannot set a stream", stream.device); }
StreamGuard::StreamGuard(StreamRef stream) { no_cuda("cannot set a stream", stream.device); }
StreamGuard::~StreamGuard() = default;
DeviceGuard::DeviceGuard(Device device) {
    if (device.is_cuda()) no_cuda("cannot select", device);
}
DeviceGuard::~DeviceGuard() = default;
void synchronize(StreamRef stream) { no_cuda("cannot synchronize", stream.device); }
void synchronize(Device device) { no_cuda("cannot synchronize", device); }

struct CudaContext::Resources {};
CudaContext& CudaContext::of(int index) { no_cuda("no context", Device::cuda(index)); }
CudaContext::~CudaContext() = default;
Allocation CudaContext::allocate(size_t) { no_cuda("cannot allocate", device()); }
void* CudaContext::blas_handle(StreamRef) { no_cuda("no cuBLAS", device()); }
void* CudaContext::dnn_handle(StreamRef) { no_cuda("no cuDNN", device()); }
void* CudaContext::workspace(size_t, StreamRef) { no_cuda("no workspace", device()); }
void CudaContext::release_stream(StreamRef) noexcept {}
CudaDeviceProperties cuda_device_properties(int index) {
    no_cuda("no properties", Device::cuda(index));
}

CudaStream::CudaStream(Device device) : device_(device) { no_cuda("cannot create a stream", device); }
CudaStream::~CudaStream() = default;
void CudaStream::copy_async(void*, const void*, size_t) const {
    EMBER_FAIL("internal error: CudaStream without the CUDA backend");
}
bool CudaStream::query() const { return true; }
void CudaStream::synchronize() const {}
CudaEvent::CudaEvent(Device device, bool) : device_(device) {
    no_cuda("cannot create an event", device);
}
CudaEvent::~CudaEvent() = default;
void CudaEvent::record(StreamRef) {}
void CudaEvent::wait(StreamRef) const {}
void CudaEvent::synchronize() const {}
bool CudaEvent::query() const { return true; }
double CudaEvent::elapsed_ms(const CudaEvent&, const CudaEvent&) { return 0; }

}  // namespace ember

// Host allocation and storage construction. Device and pinned allocation live
// in core/cuda_runtime.cpp when the CUDA backend is built.
#include "core/storage.h"

#include "core/error.h"
#include "core/host_cache.h"

namespace ember {

namespace detail {
// Defined in core/cuda_runtime.cpp (CUDA builds) or core/no_cuda.cpp.
Allocation allocate_cuda(int device_index, size_t nbytes);
Allocation allocate_pinned(size_t nbytes);
}  // namespace detail

namespace {
Allocation allocate_cpu(size_t nbytes) {
    size_t capacity = 0;
    void* p = detail::host_cache_allocate(nbytes, &capacity);
    return {p, [capacity](void* q) { detail::host_cache_free(q, capacity); }};
}
}  // namespace

Allocation allocate(Device device, size_t nbytes, bool pinned) {
    if (device.is_cuda()) return detail::allocate_cuda(device.index, nbytes);
    if (pinned && cuda_built()) return detail::allocate_pinned(nbytes);
    return allocate_cpu(nbytes);
}

Storage make_storage(Device device, size_t nbytes, bool pinned) {
    const bool really_pinned = device.is_cpu() && pinned && cuda_built();
    return std::make_shared<StorageImpl>(allocate(device, nbytes, pinned), nbytes, device,
                                         really_pinned);
}

Storage wrap_storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter) {
    return std::make_shared<StorageImpl>(Allocation{data, std::move(deleter)}, nbytes, device,
                                         false);
}

}  // namespace ember

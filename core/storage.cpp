// Host allocation and storage construction. Device and pinned allocation live
// in core/cuda_runtime.cpp when the CUDA backend is built.
#include "core/storage.h"

#include <algorithm>

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

namespace {

// Process-wide statistics (they count; nothing reads them to decide anything).
struct MemoryCounter {
    std::atomic<size_t> now{0};
    std::atomic<size_t> peak{0};
};

MemoryCounter& memory_counter(Device d) {
    static MemoryCounter counters[1 + 16];  // the host, then cuda:0..15 (higher share the last)
    return counters[d.is_cpu() ? 0 : 1 + std::min(d.index, 15)];
}

void count_allocation(MemoryCounter& c, size_t nbytes) {
    const size_t now = c.now.fetch_add(nbytes, std::memory_order_relaxed) + nbytes;
    size_t peak = c.peak.load(std::memory_order_relaxed);
    while (now > peak && !c.peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
}

}  // namespace

MemoryStats memory_stats(Device device) {
    const MemoryCounter& c = memory_counter(device);
    return {c.now.load(std::memory_order_relaxed), c.peak.load(std::memory_order_relaxed)};
}

void reset_peak_memory_stats(Device device) {
    MemoryCounter& c = memory_counter(device);
    c.peak.store(c.now.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

Storage make_storage(Device device, size_t nbytes, bool pinned) {
    const bool really_pinned = device.is_cpu() && pinned && cuda_built();
    Allocation a = allocate(device, nbytes, pinned);
    MemoryCounter& counter = memory_counter(device);
    count_allocation(counter, nbytes);
    a.deleter = [&counter, nbytes, free = std::move(a.deleter)](void* p) {
        counter.now.fetch_sub(nbytes, std::memory_order_relaxed);
        if (free) free(p);
    };
    return std::make_shared<StorageImpl>(std::move(a), nbytes, device, really_pinned);
}

Storage wrap_storage(void* data, size_t nbytes, Device device, std::function<void(void*)> deleter) {
    return std::make_shared<StorageImpl>(Allocation{data, std::move(deleter)}, nbytes, device,
                                         false);
}

}  // namespace ember

// Storage: one reference-counted block of memory shared by a tensor and all its views.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "allocator.h"
#include "device.h"

namespace ember {

/// The memory behind tensors. Views share one StorageImpl. The version counter
/// is bumped by every in-place write so that autograd can detect that a tensor
/// it saved was modified.
class StorageImpl {
public:
    StorageImpl(Allocation a, size_t nbytes, Device device, bool pinned)
        : data_(a.ptr), nbytes_(nbytes), device_(device), pinned_(pinned),
          deleter_(std::move(a.deleter)) {}
    ~StorageImpl() {
        if (deleter_ && data_) deleter_(data_);
    }
    StorageImpl(const StorageImpl&) = delete;
    StorageImpl& operator=(const StorageImpl&) = delete;

    void* data() const { return data_; }
    size_t nbytes() const { return nbytes_; }
    Device device() const { return device_; }
    bool pinned() const { return pinned_; }
    uint64_t version() const { return version_.load(std::memory_order_relaxed); }
    void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

private:
    void* data_;
    size_t nbytes_;
    Device device_;
    bool pinned_;
    std::function<void(void*)> deleter_;
    std::atomic<uint64_t> version_{0};
};

using Storage = std::shared_ptr<StorageImpl>;

/// New storage of `nbytes` on `device` (uninitialized).
Storage make_storage(Device device, size_t nbytes, bool pinned = false);

/// Bytes of tensor storage ember allocated on a device and still holds, and
/// the most it held at once since the last reset (torch's memory_allocated /
/// max_memory_allocated). Requested sizes; caller-owned memory is not counted.
struct MemoryStats {
    size_t allocated_bytes = 0;
    size_t peak_allocated_bytes = 0;
};
MemoryStats memory_stats(Device device = Device::cpu());
/// Starts a new peak: peak_allocated_bytes = allocated_bytes.
void reset_peak_memory_stats(Device device = Device::cpu());

/// Storage over caller-owned memory; `deleter` (may be empty) runs when the last view dies.
Storage wrap_storage(void* data, size_t nbytes, Device device,
                     std::function<void(void*)> deleter);

}  // namespace ember

// Raw memory for storages: 64-byte aligned host memory, page-locked (pinned)
// host memory and device memory. Every failure is an ember::Error that says
// how much was asked for.
#pragma once

#include <cstddef>
#include <functional>

#include "device.h"

namespace ember {

/// A block of memory and the function that frees it.
struct Allocation {
    void* ptr = nullptr;
    std::function<void(void*)> deleter;
};

/// Host alignment: one cache line, and enough for any SIMD load.
inline constexpr size_t kCpuAlignment = 64;

/// Allocates `nbytes` on `device`. `pinned` asks for page-locked host memory
/// (only meaningful for the CPU when the CUDA backend is built; otherwise
/// ordinary aligned memory is returned).
Allocation allocate(Device device, size_t nbytes, bool pinned = false);

}  // namespace ember

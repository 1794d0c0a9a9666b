// The host block cache: large host blocks are kept on free and handed out
// again for the next request of the same size class. Without it every large
// tensor is fresh memory from the OS (glibc mmaps blocks above 32 MiB), and an
// op on 64 MB tensors pays more in page faults than in arithmetic.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember {

/// What the host cache holds and has done.
struct HostCacheStats {
    uint64_t hits = 0;            // requests served from the cache
    uint64_t misses = 0;          // requests that went to the OS
    size_t cached_bytes = 0;      // bytes held free in the cache now
    size_t limit_bytes = 0;       // the most it holds (EMBER_HOST_CACHE_MB, default 2048)
};

/// Blocks below this size go straight to malloc/free (glibc handles them
/// well). Above glibc's first mmap threshold (128 KiB) a freed block may go
/// back to the OS and the next one fault its pages in again: a resnet8
/// step's 0.8 MB activations (bf16 [128, 64, 7, 7]) made its ops on them
/// up to 3x slower than the same ops on reused memory, so from 64 KiB
/// blocks are kept.
inline constexpr size_t kHostCacheMinBytes = size_t(1) << 16;

HostCacheStats host_cache_stats();
/// Returns every cached block to the OS.
void empty_host_cache();

namespace detail {
/// A 64-byte aligned block of at least `nbytes` (rounded to its size class)
/// and its deleter argument; cached when large.
void* host_cache_allocate(size_t nbytes, size_t* capacity);
void host_cache_free(void* p, size_t capacity);
}  // namespace detail

}  // namespace ember

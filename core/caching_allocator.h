// A stream-ordered caching allocator: device memory is taken from the driver
// in segments and handed out as blocks that are split, cached on free and
// coalesced again, so that a training step after the first makes no driver
// call at all. The logic is device-agnostic — the driver is a DeviceMemory
// interface (CUDA's in core/cuda_context.cpp; a fake in the tests) — so
// every rule below is tested on the CPU. Guide: docs/cuda.md, "Memory".
//
// The rules:
// - Sizes round up to 512 bytes. Requests of at most 1 MiB come from the
//   small pool (2 MiB segments); larger ones from the large pool (segments of
//   20 MiB for requests under 10 MiB, else the request rounded up to 2 MiB).
// - A free block belongs to the stream it was allocated on: work queued on
//   that stream before the free is ordered before any later use on it, so the
//   block can be handed out again at once, but only for that stream.
// - A block used on other streams too (record_stream) is not reused at all
//   until an event recorded on each of those streams at free time has
//   completed.
// - A block larger than the request is split when the rest is worth keeping
//   (small pool: ≥ 512 bytes; large: > 1 MiB); adjacent free blocks of a
//   segment are merged on free.
// - When the driver is out of memory: release every cached segment that is
//   wholly free, retry once, then an ember::Error stating the request, the
//   driver's free memory, what is reserved and allocated, and the counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace ember {

/// The driver under the cache, and the events it orders streams with.
/// Streams and events are opaque handles (cudaStream_t, cudaEvent_t).
class DeviceMemory {
  public:
    using Stream = void*;
    using Event = void*;
    virtual ~DeviceMemory() = default;
    /// nullptr when the device is out of memory (other failures throw).
    virtual void* malloc(size_t bytes) = 0;
    virtual void free(void* p) = 0;
    /// Bytes the driver says are free now (for messages).
    virtual size_t free_bytes() = 0;
    /// An event recorded on `stream` now.
    virtual Event record(Stream stream) = 0;
    /// Whether `e` has completed; a completed event is destroyed by the caller
    /// through destroy().
    virtual bool query(Event e) = 0;
    virtual void destroy(Event e) = 0;
    /// A name for messages, "cuda:0".
    virtual std::string name() const = 0;
};

/// What a caching allocator holds and has done (cuda_memory_stats).
struct CacheStats {
    size_t allocated = 0;       ///< bytes in blocks handed out now
    size_t reserved = 0;        ///< bytes in segments taken from the driver
    size_t peak_allocated = 0;  ///< the most `allocated` has been (reset_peak)
    size_t peak_reserved = 0;
    uint64_t allocations = 0;   ///< blocks handed out, ever
    uint64_t device_mallocs = 0;  ///< segments taken from the driver
    uint64_t device_frees = 0;    ///< segments given back
    uint64_t oom_retries = 0;     ///< driver out of memory, cache released, tried again
    uint64_t ooms = 0;            ///< requests that failed even then
};

inline constexpr size_t kBlockRound = 512;
inline constexpr size_t kSmallRequest = size_t(1) << 20;  ///< at most this: the small pool
inline constexpr size_t kSmallSegment = size_t(2) << 20;
inline constexpr size_t kLargeSegment = size_t(20) << 20;
inline constexpr size_t kMidRequest = size_t(10) << 20;  ///< below this: a 20 MiB segment
inline constexpr size_t kSegmentRound = size_t(2) << 20;

class CachingAllocator {
  public:
    explicit CachingAllocator(std::unique_ptr<DeviceMemory> memory);
    /// Gives every segment back (blocks still handed out are leaked to the
    /// driver's teardown: their owners outlive nothing after this).
    ~CachingAllocator();
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    /// A block of at least `bytes` for use on `stream`; nullptr for 0 bytes.
    void* allocate(size_t bytes, DeviceMemory::Stream stream);
    /// Returns a block from allocate(). Unknown pointers are an Error.
    void free(void* p);
    /// Marks `p` as used on `stream` as well as its own: its reuse waits for
    /// the work queued there before the free (PyTorch's record_stream).
    void record_stream(void* p, DeviceMemory::Stream stream);
    /// Gives back every segment that is wholly free and not waiting on events.
    void empty_cache();
    CacheStats stats();
    void reset_peak();
    /// The usable size of the block at `p` (≥ what was asked).
    size_t block_size(void* p);

  private:
    struct Block;
    struct BySize {
        bool operator()(const Block* a, const Block* b) const;
    };
    using Pool = std::set<Block*, BySize>;

    Block* find_free(Pool& pool, size_t size, DeviceMemory::Stream stream);
    Block* new_segment(bool small, size_t request, size_t size, DeviceMemory::Stream stream);
    [[noreturn]] void out_of_memory(size_t request, size_t segment);
    void release_free_segments();
    void insert_free(Block* b);
    void process_events();
    Pool& pool_of(const Block* b);

    std::unique_ptr<DeviceMemory> memory_;
    std::mutex mu_;
    Pool small_, large_;
    std::map<void*, Block*> active_;          // handed out, by address
    std::vector<Block*> pending_;             // freed, waiting on events
    CacheStats stats_;
};

}  // namespace ember

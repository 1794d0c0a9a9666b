// Host block cache: size classes of 1/8 of a power of two (at most 12.5 %
// waste), a free list per class, a byte limit, one mutex.
#include "core/host_cache.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "core/allocator.h"
#include "core/error.h"

namespace ember {

namespace {

size_t size_class(size_t n) {
    if (n < kHostCacheMinBytes) return (n + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
    size_t pow2 = kHostCacheMinBytes;
    while (pow2 <= n / 2) pow2 *= 2;
    const size_t step = pow2 / 8;
    return (n + step - 1) / step * step;
}

size_t limit_from_env() {
    const char* s = std::getenv("EMBER_HOST_CACHE_MB");
    if (!s || !*s) return size_t(2048) << 20;
    char* end = nullptr;
    const long long mb = std::strtoll(s, &end, 10);
    EMBER_CHECK(end && *end == '\0' && mb >= 0 && mb < (1LL << 40),
                "EMBER_HOST_CACHE_MB must be a whole number of MiB (0 to 2^40), got '", s, "'");
    return size_t(mb) << 20;
}

class HostCache {
public:
    void* allocate(size_t nbytes, size_t* capacity) {
        EMBER_CHECK(nbytes <= size_t(PTRDIFF_MAX) / 2, "out of host memory: cannot allocate ",
                    nbytes, " bytes");
        const size_t cap = size_class(nbytes == 0 ? 1 : nbytes);
        EMBER_CHECK(cap >= nbytes, "allocation of ", nbytes, " bytes overflows");
        *capacity = cap;
        if (cap >= kHostCacheMinBytes) {
            std::lock_guard<std::mutex> lock(mutex_);
            auto it = free_.find(cap);
            if (it != free_.end()) {
                void* p = it->second;
                free_.erase(it);
                stats_.cached_bytes -= cap;
                ++stats_.hits;
                return p;
            }
            ++stats_.misses;
        }
        void* p = std::aligned_alloc(kCpuAlignment, cap);
        if (!p && cap >= kHostCacheMinBytes) {  // give the cache back and try once more
            empty();
            p = std::aligned_alloc(kCpuAlignment, cap);
        }
        EMBER_CHECK(p != nullptr, "out of host memory: could not allocate ", nbytes, " bytes");
        return p;
    }

    void free(void* p, size_t cap) {
        if (cap >= kHostCacheMinBytes) {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stats_.cached_bytes + cap <= limit_) {
                free_.emplace(cap, p);
                stats_.cached_bytes += cap;
                return;
            }
        }
        std::free(p);
    }

    void empty() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& [cap, p] : free_) std::free(p);
        free_.clear();
        stats_.cached_bytes = 0;
    }

    HostCacheStats stats() {
        std::lock_guard<std::mutex> lock(mutex_);
        HostCacheStats s = stats_;
        s.limit_bytes = limit_;
        return s;
    }

private:
    std::mutex mutex_;
    std::multimap<size_t, void*> free_;
    HostCacheStats stats_;
    size_t limit_ = limit_from_env();
};

HostCache& cache() {
    // Never destroyed: tensors in static storage may free into it at exit.
    static HostCache* c = new HostCache();
    return *c;
}

}  // namespace

HostCacheStats host_cache_stats() { return cache().stats(); }
void empty_host_cache() { cache().empty(); }

namespace detail {
void* host_cache_allocate(size_t nbytes, size_t* capacity) {
    return cache().allocate(nbytes, capacity);
}
void host_cache_free(void* p, size_t capacity) { cache().free(p, capacity); }
}  // namespace detail

}  // namespace ember

// The caching allocator's bookkeeping (rules: core/caching_allocator.h).
#include "core/caching_allocator.h"

#include <functional>

#include "core/error.h"

namespace ember {

struct CachingAllocator::Block {
    char* ptr = nullptr;
    size_t size = 0;
    DeviceMemory::Stream stream = nullptr;  // the segment's, shared by all its blocks
    bool small = false;
    bool allocated = false;
    bool in_pool = false;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
    std::set<DeviceMemory::Stream> uses;      // other streams (record_stream)
    std::vector<DeviceMemory::Event> events;  // to complete before reuse
};

bool CachingAllocator::BySize::operator()(const Block* a, const Block* b) const {
    const std::less<const void*> before;
    if (a->stream != b->stream) return before(a->stream, b->stream);
    if (a->size != b->size) return a->size < b->size;
    return before(a->ptr, b->ptr);
}

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

CachingAllocator::CachingAllocator(std::unique_ptr<DeviceMemory> memory)
    : memory_(std::move(memory)) {}

CachingAllocator::~CachingAllocator() {
    std::lock_guard<std::mutex> lock(mu_);
    for (Block* b : pending_)
        for (DeviceMemory::Event e : b->events) memory_->destroy(e);
    pending_.clear();
    release_free_segments();
}

CachingAllocator::Pool& CachingAllocator::pool_of(const Block* b) {
    return b->small ? small_ : large_;
}

CachingAllocator::Block* CachingAllocator::find_free(Pool& pool, size_t size,
                                                     DeviceMemory::Stream stream) {
    Block key;
    key.stream = stream;
    key.size = size;
    key.ptr = nullptr;
    const auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    pool.erase(it);
    b->in_pool = false;
    return b;
}

void* CachingAllocator::allocate(size_t bytes, DeviceMemory::Stream stream) {
    if (bytes == 0) return nullptr;
    EMBER_CHECK(bytes <= (size_t(1) << 50), "allocate: ", bytes, " bytes on ", memory_->name(),
                " is more than any device has");
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    const size_t size = round_up(bytes, kBlockRound);
    const bool small = size <= kSmallRequest;
    Block* b = find_free(small ? small_ : large_, size, stream);
    if (b == nullptr) b = new_segment(small, bytes, size, stream);
    const size_t rest = b->size - size;
    if (small ? rest >= kBlockRound : rest > kSmallRequest) {
        Block* r = new Block;
        r->ptr = b->ptr + size;
        r->size = rest;
        r->stream = stream;
        r->small = small;
        r->prev = b;
        r->next = b->next;
        if (b->next) b->next->prev = r;
        b->next = r;
        b->size = size;
        insert_free(r);
    }
    b->allocated = true;
    active_[b->ptr] = b;
    stats_.allocated += b->size;
    stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
    ++stats_.allocations;
    return b->ptr;
}

CachingAllocator::Block* CachingAllocator::new_segment(bool small, size_t request, size_t size,
                                                       DeviceMemory::Stream stream) {
    const size_t segment = small               ? kSmallSegment
                           : size < kMidRequest ? kLargeSegment
                                                : round_up(size, kSegmentRound);
    void* p = memory_->malloc(segment);
    if (p == nullptr) {
        ++stats_.oom_retries;
        release_free_segments();
        p = memory_->malloc(segment);
        if (p == nullptr) out_of_memory(request, segment);
    }
    ++stats_.device_mallocs;
    stats_.reserved += segment;
    stats_.peak_reserved = std::max(stats_.peak_reserved, stats_.reserved);
    Block* b = new Block;
    b->ptr = static_cast<char*>(p);
    b->size = segment;
    b->stream = stream;
    b->small = small;
    return b;
}

void CachingAllocator::out_of_memory(size_t request, size_t segment) {
    ++stats_.ooms;
    const CacheStats& s = stats_;
    EMBER_FAIL("out of memory on ", memory_->name(), ": could not allocate ", request,
               " bytes (a segment of ", segment, "); the device has ", memory_->free_bytes(),
               " bytes free; ember holds ", s.reserved, " bytes reserved, ", s.allocated,
               " allocated (peak ", s.peak_allocated, "); ", s.device_mallocs,
               " device allocations, ", s.device_frees, " frees, ", s.oom_retries,
               " out-of-memory retries. Free tensors that are no longer needed, use a smaller "
               "batch, or set EMBER_CUDA_ALLOC=direct to see the driver's own answer");
}

void CachingAllocator::free(void* p) {
    if (p == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = active_.find(p);
    EMBER_CHECK(it != active_.end(), "free: ", p, " was not allocated by the caching allocator of ",
                memory_->name());
    Block* b = it->second;
    active_.erase(it);
    stats_.allocated -= b->size;
    b->allocated = false;
    if (!b->uses.empty()) {
        for (DeviceMemory::Stream s : b->uses) b->events.push_back(memory_->record(s));
        b->uses.clear();
        pending_.push_back(b);
        return;
    }
    insert_free(b);
}

void CachingAllocator::record_stream(void* p, DeviceMemory::Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = active_.find(p);
    EMBER_CHECK(it != active_.end(), "record_stream: ", p, " is not an allocated block of ",
                memory_->name());
    if (stream != it->second->stream) it->second->uses.insert(stream);
}

size_t CachingAllocator::block_size(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = active_.find(p);
    EMBER_CHECK(it != active_.end(), "block_size: ", p, " is not an allocated block");
    return it->second->size;
}

// Merges `b` with free neighbours and files it in its pool.
void CachingAllocator::insert_free(Block* b) {
    Pool& pool = pool_of(b);
    for (Block* n : {b->prev, b->next}) {
        if (n == nullptr || !n->in_pool) continue;
        pool.erase(n);
        Block* first = n == b->prev ? n : b;
        Block* second = n == b->prev ? b : n;
        first->size += second->size;
        first->next = second->next;
        if (second->next) second->next->prev = first;
        delete second;
        b = first;
    }
    b->in_pool = true;
    pool.insert(b);
}

void CachingAllocator::process_events() {
    for (size_t i = 0; i < pending_.size();) {
        Block* b = pending_[i];
        bool done = true;
        for (DeviceMemory::Event e : b->events) done = done && memory_->query(e);
        if (!done) {
            ++i;
            continue;
        }
        for (DeviceMemory::Event e : b->events) memory_->destroy(e);
        b->events.clear();
        pending_[i] = pending_.back();
        pending_.pop_back();
        insert_free(b);
    }
}

void CachingAllocator::release_free_segments() {
    for (Pool* pool : {&small_, &large_})
        for (auto it = pool->begin(); it != pool->end();) {
            Block* b = *it;
            if (b->prev != nullptr || b->next != nullptr) {  // part of a segment in use
                ++it;
                continue;
            }
            it = pool->erase(it);
            memory_->free(b->ptr);
            stats_.reserved -= b->size;
            ++stats_.device_frees;
            delete b;
        }
}

void CachingAllocator::empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    process_events();
    release_free_segments();
}

CacheStats CachingAllocator::stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

void CachingAllocator::reset_peak() {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_allocated = stats_.allocated;
    stats_.peak_reserved = stats_.reserved;
}

}  // namespace ember

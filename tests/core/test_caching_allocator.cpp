// The caching allocator's rules (core/caching_allocator.h) against a fake
// driver: addresses from a counter (never dereferenced), a byte budget that
// makes it run out, and events that complete when the test says so.
#include <map>
#include <random>

#include "core/caching_allocator.h"
#include "support/support.h"

using namespace ember;

namespace {

struct FakeDriver {
    size_t budget = size_t(1) << 30;  // bytes the "device" has
    size_t in_use = 0;
    uintptr_t next = 1 << 20;
    std::map<void*, size_t> live;
    int mallocs = 0, frees = 0;
    std::map<void*, bool> events;  // event -> completed
    uintptr_t next_event = 1;
};

class FakeMemory : public DeviceMemory {
  public:
    explicit FakeMemory(FakeDriver& d) : d_(d) {}
    void* malloc(size_t bytes) override {
        if (d_.in_use + bytes > d_.budget) return nullptr;
        void* p = reinterpret_cast<void*>(d_.next);
        d_.next += bytes + 4096;
        d_.in_use += bytes;
        d_.live[p] = bytes;
        ++d_.mallocs;
        return p;
    }
    void free(void* p) override {
        REQUIRE(d_.live.count(p) == 1);
        d_.in_use -= d_.live[p];
        d_.live.erase(p);
        ++d_.frees;
    }
    size_t free_bytes() override { return d_.budget - d_.in_use; }
    Event record(Stream) override {
        void* e = reinterpret_cast<void*>(d_.next_event++);
        d_.events[e] = false;
        return e;
    }
    bool query(Event e) override { return d_.events.at(e); }
    void destroy(Event e) override { d_.events.erase(e); }
    std::string name() const override { return "fake:0"; }

  private:
    FakeDriver& d_;
};

DeviceMemory::Stream stream(int i) { return reinterpret_cast<DeviceMemory::Stream>(uintptr_t(i)); }

uintptr_t addr(void* p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST_CASE("caching allocator: blocks are reused on their stream and rounded", "[allocator]") {
    FakeDriver d;
    CachingAllocator a(std::make_unique<FakeMemory>(d));
    CHECK(a.allocate(0, stream(1)) == nullptr);
    void* p = a.allocate(1000, stream(1));
    CHECK(a.block_size(p) == 1024);
    CHECK(d.mallocs == 1);  // one 2 MiB small segment
    CHECK(a.stats().reserved == kSmallSegment);
    a.free(p);
    void* q = a.allocate(1000, stream(1));
    CHECK(q == p);  // the same block again, no driver call
    CHECK(d.mallocs == 1);
    void* other = a.allocate(1000, stream(2));  // another stream never gets stream 1's cache
    CHECK(d.mallocs == 2);
    a.free(q);
    a.free(other);
    const CacheStats s = a.stats();
    CHECK(s.allocated == 0);
    CHECK(s.peak_allocated == 2048);
    CHECK(s.allocations == 3);
}

TEST_CASE("caching allocator: splitting and coalescing within a segment", "[allocator]") {
    FakeDriver d;
    CachingAllocator a(std::make_unique<FakeMemory>(d));
    void* x = a.allocate(4096, stream(1));
    void* y = a.allocate(4096, stream(1));
    void* z = a.allocate(4096, stream(1));
    CHECK(d.mallocs == 1);  // all from one small segment, split in order
    CHECK(addr(y) == addr(x) + 4096);
    CHECK(addr(z) == addr(y) + 4096);
    a.free(y);
    a.free(x);  // merges with y's block
    a.free(z);  // and with z's and the segment's rest: the whole segment again
    void* whole = a.allocate(kSmallRequest, stream(1));
    CHECK(whole == x);  // the merged block starts where x did
    CHECK(d.mallocs == 1);
    a.free(whole);
    a.empty_cache();  // wholly free: given back
    CHECK(d.frees == 1);
    CHECK(a.stats().reserved == 0);
    CHECK(d.in_use == 0);
}

TEST_CASE("caching allocator: large requests, segment sizes and the split threshold",
          "[allocator]") {
    FakeDriver d;
    CachingAllocator a(std::make_unique<FakeMemory>(d));
    void* m = a.allocate(3 << 20, stream(1));  // under 10 MiB: a 20 MiB segment
    CHECK(a.stats().reserved == kLargeSegment);
    void* n = a.allocate(16 << 20, stream(1));  // the rest of that segment (17 MiB) serves it
    CHECK(d.mallocs == 1);
    CHECK(addr(n) == addr(m) + (3 << 20));
    void* big = a.allocate((51 << 20) + 1, stream(1));  // its own segment, rounded to 2 MiB
    CHECK(a.stats().reserved == kLargeSegment + (52u << 20));
    CHECK(a.block_size(big) == (52u << 20));  // a rest under 1 MiB is not split off
    void* huge = a.allocate((60 << 20) + 1, stream(1));  // 62 MiB: a rest of ~2 MiB is
    CHECK(a.block_size(huge) == (60u << 20) + kBlockRound);
    void* tail = a.allocate(1536u << 10, stream(1));  // and serves the next request
    CHECK(addr(tail) == addr(huge) + (60u << 20) + kBlockRound);
    a.free(tail);
    a.free(huge);
    a.free(m);
    a.free(n);
    a.free(big);
    a.empty_cache();
    CHECK(d.in_use == 0);
    CHECK(d.live.empty());
}

TEST_CASE("caching allocator: a block used on another stream waits for its event",
          "[allocator]") {
    FakeDriver d;
    CachingAllocator a(std::make_unique<FakeMemory>(d));
    void* p = a.allocate(8192, stream(1));
    a.record_stream(p, stream(2));
    a.free(p);
    REQUIRE(d.events.size() == 1);  // recorded on stream 2 at the free
    void* q = a.allocate(8192, stream(1));
    CHECK(q != p);  // not reused while stream 2 may still read it
    d.events.begin()->second = true;
    a.free(q);
    void* r = a.allocate(8192, stream(1));
    CHECK((r == p || r == q));  // p is back in the cache once the event completed
    CHECK(d.events.empty());    // and its event was destroyed
    a.free(r);
}

TEST_CASE("caching allocator: out of memory frees the cache, retries, then names everything",
          "[allocator]") {
    FakeDriver d;
    d.budget = 64u << 20;
    CachingAllocator a(std::make_unique<FakeMemory>(d));
    void* p = a.allocate(30u << 20, stream(1));  // 30 MiB segment
    void* q = a.allocate(12u << 20, stream(2));  // 12 MiB segment on another stream
    a.free(q);                                   // cached, wholly free
    // 30 + 12 + 24 > 64: the driver refuses, the cached 12 MiB goes back, retry fits.
    void* r = a.allocate(24u << 20, stream(1));
    CHECK(a.stats().oom_retries == 1);
    CHECK(d.frees == 1);
    // Now 54 MiB are in use: 20 more cannot fit even after a retry.
    REQUIRE_THROWS_WITH_MSG(a.allocate(20u << 20, stream(1)),
                            "out of memory on fake:0: could not allocate 20971520 bytes");
    try {
        a.allocate(20u << 20, stream(1));
    } catch (const Error& e) {
        const std::string msg = e.what();
        CHECK(msg.find("bytes free") != std::string::npos);
        CHECK(msg.find("56623104 bytes reserved") != std::string::npos);
        CHECK(msg.find("out-of-memory retries") != std::string::npos);
    }
    CHECK(a.stats().ooms == 2);
    // The allocator still works afterwards.
    a.free(r);
    void* s = a.allocate(20u << 20, stream(1));
    CHECK(s != nullptr);
    a.free(s);
    a.free(p);
}

TEST_CASE("caching allocator: random traffic keeps blocks disjoint and the counts right",
          "[allocator]") {
    FakeDriver d;
    CachingAllocator a(std::make_unique<FakeMemory>(d));
    std::mt19937_64 rng(12);
    std::map<uintptr_t, size_t> live;  // start -> usable size
    size_t expect_allocated = 0;
    for (int i = 0; i < 5000; ++i) {
        if (live.empty() || (live.size() < 200 && rng() % 2 == 0)) {
            const size_t bytes = rng() % 2 ? 1 + rng() % 200000 : 1 + rng() % (6u << 20);
            void* p = a.allocate(bytes, stream(1 + int(rng() % 2)));
            const size_t size = a.block_size(p);
            REQUIRE(size >= bytes);
            REQUIRE(size % kBlockRound == 0);
            const uintptr_t s = addr(p);
            auto after = live.lower_bound(s);
            if (after != live.end()) REQUIRE(s + size <= after->first);
            if (after != live.begin()) {
                auto before = std::prev(after);
                REQUIRE(before->first + before->second <= s);
            }
            live[s] = size;
            expect_allocated += size;
        } else {
            auto it = live.begin();
            std::advance(it, rng() % live.size());
            expect_allocated -= it->second;
            a.free(reinterpret_cast<void*>(it->first));
            live.erase(it);
        }
        REQUIRE(a.stats().allocated == expect_allocated);
    }
    for (auto& [s, size] : live) a.free(reinterpret_cast<void*>(s));
    a.empty_cache();
    CHECK(a.stats().reserved == 0);
    CHECK(d.live.empty());  // every segment went back: coalescing made them whole
    REQUIRE_THROWS_WITH_MSG(a.free(reinterpret_cast<void*>(uintptr_t(12345))),
                            "was not allocated by the caching allocator of fake:0");
}

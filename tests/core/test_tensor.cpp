// Tensor construction, element access, from_blob and error paths.
#include <thread>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("factories fill with the right values and dtypes", "[factories]") {
    Tensor a = zeros({2, 3}, {.dtype = DType::i32});
    CHECK(a.dtype() == DType::i32);
    CHECK(a.is_contiguous());
    for (double v : values(a)) CHECK(v == 0);
    for (double v : values(ones({4}, {.dtype = DType::bf16}))) CHECK(v == 1);
    for (double v : values(full({3}, -7.25, {.dtype = DType::f16}))) CHECK(v == -7.25);
    CHECK(values(arange(5)) == std::vector<double>{0, 1, 2, 3, 4});
    CHECK(values(arange(1, 2, 0.25, {.dtype = DType::f64})) == std::vector<double>{1, 1.25, 1.5, 1.75});
    CHECK(arange(3, 0).numel() == 0);
    CHECK(values(arange(5, 0, -2, {.dtype = DType::i64})) == std::vector<double>{5, 3, 1});
    const std::vector<double> l = values(linspace(-1, 1, 5, {.dtype = DType::f64}));
    CHECK(l == std::vector<double>{-1, -0.5, 0, 0.5, 1});
    CHECK(linspace(0, 1, 1).item() == 0);
    REQUIRE_THROWS_WITH_MSG(arange(0, 1, 0), "arange: need finite start, end and a nonzero step");
    REQUIRE_THROWS_WITH_MSG(linspace(0, 1, -1), "linspace: steps must be non-negative");
    REQUIRE_THROWS_WITH_MSG(zeros({2, -1}), "negative size");
    REQUIRE_THROWS_WITH_MSG(empty({int64_t(1) << 40, int64_t(1) << 40}), "too");
}

TEST_CASE("from_vector copies; from_blob does not", "[factories]") {
    std::vector<float> host = {1, 2, 3, 4, 5, 6};
    Tensor c = from_vector(host, {2, 3});
    host[0] = 100;
    CHECK(c.at({0, 0}) == 1);
    Tensor b = from_blob(host.data(), {2, 3});
    CHECK(b.at({0, 0}) == 100);
    b.set({1, 2}, -1);
    CHECK(host[5] == -1);
    // A custom deleter runs when the last view dies.
    int deleted = 0;
    {
        Tensor d = from_blob(host.data(), {6}, {}, [&](void*) { ++deleted; });
        Tensor v = d.view({3, 2});
        d = Tensor();
        CHECK(deleted == 0);
    }
    CHECK(deleted == 1);
    // Strided blobs.
    Tensor s = from_blob(host.data(), {3}, {2});
    CHECK(values(s) == std::vector<double>{100, 3, 5});
    REQUIRE_THROWS_WITH_MSG(from_vector(host, {4}), "6 values do not fill shape [4]");
    REQUIRE_THROWS_WITH_MSG(from_blob(nullptr, {2}), "from_blob: null data");
}

TEST_CASE("element access validates indices and dtypes", "[tensor]") {
    Tensor x = arange(0, 6, 1, {.dtype = DType::i64}).reshape({2, 3});
    CHECK(x.at({1, -1}) == 5);
    REQUIRE_THROWS_WITH_MSG(x.at({2, 0}), "at: index [2, 0] out of range for shape [2, 3]");
    REQUIRE_THROWS_WITH_MSG(x.at({0}), "has 1 entries");
    REQUIRE_THROWS_WITH_MSG(x.data<float>(), "data<f32>() called on a tensor of dtype i64");
    REQUIRE_THROWS_WITH_MSG(Tensor().numel(), "undefined tensor");
    REQUIRE_THROWS_WITH_MSG(x.size(2), "size: dim 2 out of range");
    CHECK(x.size(-1) == 3);
    x.set({0, 1}, 42);
    CHECK(x.at({0, 1}) == 42);
}

TEST_CASE("version counter bumps on writes", "[tensor]") {
    Tensor x = zeros({4});
    const uint64_t v0 = x.storage()->version();
    x.fill_(1);
    x.slice(0, 0, 2).copy_(ones({2}));
    CHECK(x.storage()->version() == v0 + 2);
}

TEST_CASE("CUDA tensors give a clear error without a device", "[tensor][device]") {
    if (cuda_device_count() > 0) return;  // covered by the CUDA tests
    REQUIRE_THROWS_WITH_MSG(zeros({2}, {.device = Device::cuda(0)}), "cuda:0");
    REQUIRE_THROWS_WITH_MSG(ones({2}).to(Device::cuda(1)), "cuda:1");
}

TEST_CASE("printing shows dtype, device, shape and values", "[tensor]") {
    std::ostringstream os;
    os << arange(3);
    CHECK(os.str() == "Tensor(f32, cpu, [3])\n[0., 1., 2.]");
}

TEST_CASE("large host blocks are reused through the host cache", "[tensor][allocator]") {
    empty_host_cache();
    const HostCacheStats before = host_cache_stats();
    void* first;
    {
        Tensor a = empty({3 << 20});  // 12 MiB
        first = a.data_ptr();
    }
    CHECK(host_cache_stats().cached_bytes >= size_t(12) << 20);
    Tensor b = empty({3 << 20});
    CHECK(b.data_ptr() == first);
    const HostCacheStats after = host_cache_stats();
    CHECK(after.hits == before.hits + 1);
    CHECK(after.misses == before.misses + 1);
    // A slightly smaller request falls in the same size class.
    Tensor c = empty({(3 << 20) - 1000});
    CHECK(c.data_ptr() != first);  // b still holds the first block
    b = Tensor();
    Tensor d = empty({(3 << 20) - 1000});
    CHECK(d.data_ptr() == first);
    CHECK(reinterpret_cast<uintptr_t>(d.data_ptr()) % kCpuAlignment == 0);
    d = Tensor();
    c = Tensor();
    // From 64 KiB blocks are kept: a bf16 [128, 64, 7, 7] activation (784 KiB).
    void* mid;
    {
        Tensor e = empty({128, 64, 7, 7}, {DType::bf16});
        mid = e.data_ptr();
    }
    const HostCacheStats kept = host_cache_stats();
    Tensor f = empty({128, 64, 7, 7}, {DType::bf16});
    CHECK(f.data_ptr() == mid);
    CHECK(host_cache_stats().hits == kept.hits + 1);
    f = Tensor();
    // Below 64 KiB they go to malloc: no hit, no miss.
    Tensor small = empty({1000});
    CHECK(host_cache_stats().hits == kept.hits + 1);
    CHECK(host_cache_stats().misses == kept.misses);
    small = Tensor();
    empty_host_cache();
    CHECK(host_cache_stats().cached_bytes == 0);
}

TEST_CASE("host-sync counter: CPU reads never count; counts are per op and reset on read",
          "[tensor][host_sync]") {
    (void)host_syncs();  // start from zero
    const Tensor t = random_tensor({3, 4}, DType::f32, 9);
    (void)t.at({1, 2});
    (void)sum(t).item();
    (void)t.to_vector<float>();
    (void)t.to(Device::cpu());
    CHECK(host_sync_total() == 0);
    CHECK(host_syncs().empty());
    count_host_sync("item");
    count_host_sync("item");
    count_host_sync("to");
    CHECK(host_sync_total() == 3);
    const std::map<std::string, int64_t> c = host_syncs();
    CHECK(c.at("item") == 2);
    CHECK(c.at("to") == 1);
    CHECK(host_syncs().empty());  // reset by the read
    // Per thread: another thread's syncs are its own.
    std::thread other([] { count_host_sync("at"); });
    other.join();
    CHECK(host_sync_total() == 0);
}

// The per-device context: current streams and their guards, the device guard,
// the error flag raised by a real kernel and reported at the next
// synchronization (or at once in sync-debug mode), and ops on a user stream.
#include <cuda_runtime_api.h>

#include "core/cuda_stream.h"
#include "kernels/dispatch.h"
#include "support/support.h"
#include "tests/cuda/raise_kernel.h"

using namespace ember;
using namespace ember::test;

namespace {
const Device kGpu = Device::cuda(0);

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}
}  // namespace

TEST_CASE("cuda context: properties are read once and make sense", "[cuda][context]") {
    const CudaDeviceProperties& p = CudaContext::of(0).properties();
    CHECK(!p.name.empty());
    CHECK(p.major >= 7);
    CHECK(p.sm_count > 0);
    CHECK(p.l2_bytes > 0);
    CHECK(p.total_memory > size_t(1) << 30);
    CHECK(&CudaContext::of(0) == &CudaContext::of(kGpu));
    CHECK_THROWS_WITH(CudaContext::of(cuda_device_count()), Catch::Contains("is not available"));
}

TEST_CASE("cuda context: a stream guard makes ops run on its stream", "[cuda][context]") {
    CHECK(current_stream(kGpu).handle == nullptr);  // the legacy default stream
    CudaStream s(kGpu);
    const Tensor x = random_tensor({1 << 20}, DType::f32, 3).to(kGpu);
    Tensor y;
    {
        StreamGuard guard(s.ref());
        CHECK(current_stream(kGpu) == s.ref());
        y = mul(x, 3.0);  // queued on s
        synchronize(s.ref());
    }
    CHECK(current_stream(kGpu).handle == nullptr);
    check_close(y.to(Device::cpu()), mul(x.to(Device::cpu()), 3.0), 0, 0);
}

TEST_CASE("cuda context: the device guard restores the previous device", "[cuda][context]") {
    int before = -1, inside = -1, after = -1;
    REQUIRE(cudaGetDevice(&before) == cudaSuccess);
    {
        DeviceGuard g(Device::cuda(cuda_device_count() - 1));
        REQUIRE(cudaGetDevice(&inside) == cudaSuccess);
    }
    REQUIRE(cudaGetDevice(&after) == cudaSuccess);
    CHECK(inside == cuda_device_count() - 1);
    CHECK(after == before);
}

TEST_CASE("cuda context: a raised error flag becomes an Error at the next sync", "[cuda][context]") {
    std::vector<int64_t> v(100000, 3);
    v[77777] = 42;
    const Tensor values = from_vector(v).to(kGpu);
    ErrorFlag& flag = CudaContext::of(0).error_flag();
    const StreamRef s = current_stream(kGpu);
    launch_check_kernel(values.data<int64_t>(), values.numel(), 10,
                        flag.arm("test_gather", "index", 10), s);
    const std::string msg = error_of([&] { synchronize(s); });
    INFO(msg);
    CHECK(msg.find("test_gather: index 42 at position 77777 is out of range [0, 10)") !=
          std::string::npos);
    // The context is not poisoned: later work and checks succeed.
    CHECK_NOTHROW(synchronize(s));
    check_close(add(values, 1.0).to(Device::cpu()), add(values.to(Device::cpu()), 1.0), 0, 0);
    // A blocking copy to the host is a synchronization point too.
    launch_check_kernel(values.data<int64_t>(), values.numel(), 10,
                        flag.arm("test_gather", "index", 10), s);
    CHECK(error_of([&] { (void)values.to(Device::cpu()); }).find("index 42") != std::string::npos);
}

TEST_CASE("cuda context: sync-debug mode names the op that raised at once", "[cuda][context]") {
    std::vector<int64_t> v(1000, 0);
    v[5] = -7;
    const Tensor values = from_vector(v).to(kGpu);
    ErrorFlag& flag = CudaContext::of(0).error_flag();
    set_sync_debug(true);
    const std::string msg = error_of([&] {
        kernels::dispatch({"test_check", kGpu, {&values}}, kernels::no_kernel, [&](auto stream) {
            launch_check_kernel(values.data<int64_t>(), values.numel(), 4,
                                flag.arm("test_check", "index", 4), stream);
        });
    });
    set_sync_debug(false);
    INFO(msg);
    CHECK(msg.find("sync-debug: test_check(i64 [1000] on cuda:0) failed") != std::string::npos);
    CHECK(msg.find("index -7 at position 5") != std::string::npos);
}

TEST_CASE("cuda context: sync-debug mode names a real op that read a bad index",
          "[cuda][context]") {
    const Tensor table = random_tensor({10, 4}, DType::f32, 3).to(kGpu);
    const Tensor index = from_vector(std::vector<int64_t>{1, 2, 10, 3}).to(kGpu);
    set_sync_debug(true);
    const std::string msg = error_of([&] { (void)kernels::index_select(table, 0, index); });
    set_sync_debug(false);
    INFO(msg);
    CHECK(msg.find("sync-debug: index_select(") != std::string::npos);
    CHECK(msg.find("index 10 at position 2 is out of range [0, 10)") != std::string::npos);
    synchronize(kGpu);  // the flag was cleared by the report: nothing more to raise
}

TEST_CASE("cuda context: an op without a CUDA kernel says so", "[cuda][context]") {
    // Every op has a CUDA kernel now: the dispatch's own answer for a slot left empty.
    const Tensor x = random_tensor({4, 5}, DType::f32, 1).to(kGpu);
    CHECK_THROWS_WITH(kernels::dispatch({"test_op", kGpu, {&x}}, [] {}, kernels::no_kernel),
                      Catch::Contains("test_op: not implemented for cuda:0"));
}

TEST_CASE("cuda context: many threads raising at once report one consistent raise", "[cuda][context]") {
    // Every value is bad: thousands of threads race for the flag in mapped
    // host memory; the one that wins must publish its own position and value.
    std::vector<int64_t> v(1 << 20);
    for (size_t i = 0; i < v.size(); ++i) v[i] = 1000 + int64_t(i);
    const Tensor values = from_vector(v).to(kGpu);
    ErrorFlag& flag = CudaContext::of(0).error_flag();
    const StreamRef s = current_stream(kGpu);
    launch_check_kernel(values.data<int64_t>(), values.numel(), 10,
                        flag.arm("test_all_bad", "index", 10), s);
    const std::string msg = error_of([&] { synchronize(s); });
    INFO(msg);
    const size_t at = msg.find("index ");
    REQUIRE(at != std::string::npos);
    long long value = -1, position = -1;
    REQUIRE(std::sscanf(msg.c_str() + at, "index %lld at position %lld", &value, &position) == 2);
    CHECK(value == 1000 + position);
    CHECK_NOTHROW(synchronize(s));  // reported once, then cleared
}

TEST_CASE("cuda caching allocator: reuse, streams, and out of memory that leaves it usable",
          "[cuda][allocator]") {
    cuda_empty_cache(kGpu);
    const CacheStats before = cuda_memory_stats(kGpu);
    { Tensor a = empty({1 << 20}, {.device = kGpu}); }  // 4 MiB, freed at once
    const CacheStats once = cuda_memory_stats(kGpu);
    CHECK(once.device_mallocs == before.device_mallocs + 1);
    { Tensor b = empty({1 << 20}, {.device = kGpu}); }  // the same block again
    CHECK(cuda_memory_stats(kGpu).device_mallocs == once.device_mallocs);
    CHECK(cuda_memory_stats(kGpu).allocated == before.allocated);

    // Memory used on a side stream is not reused before that stream's work is done.
    CudaStream side(kGpu);
    Tensor c = empty({1 << 20}, {.device = kGpu});
    CudaContext::of(kGpu).record_stream(c.data_ptr(), side.ref());
    c = Tensor();
    synchronize(side.ref());
    Tensor d = full({1 << 20}, 3.0, {.device = kGpu});
    check_close(d.to(Device::cpu()), std::vector<double>(1 << 20, 3.0), 0, 0);

    // Far more than the device has: an Error with the figures, then business as usual.
    const size_t too_much = CudaContext::of(kGpu).properties().total_memory * 2;
    const std::string msg = error_of([&] { empty({int64_t(too_much / 4)}, {.device = kGpu}); });
    CHECK(msg.find("out of memory on cuda:0") != std::string::npos);
    CHECK(msg.find("bytes reserved") != std::string::npos);
    CHECK(cuda_memory_stats(kGpu).oom_retries >= 1);
    Tensor e = ones({1000}, {.device = kGpu});
    check_close(e.to(Device::cpu()), std::vector<double>(1000, 1.0), 0, 0);
    cuda_empty_cache(kGpu);
}

TEST_CASE("host-sync counter: reads of device values count under their op's name",
          "[cuda][host_sync]") {
    (void)host_syncs();
    const Tensor t = full({8}, 2.0, {.device = kGpu});
    CHECK(sum(t).item() == 16.0);
    CHECK(t.at({3}) == 2.0);
    (void)t.to_vector<float>();
    (void)t.to(Device::cpu());
    const std::map<std::string, int64_t> c = host_syncs();
    CHECK(c.at("item") == 1);
    CHECK(c.at("at") == 1);
    CHECK(c.at("to_vector") == 1);
    CHECK(c.at("to") == 1);
    (void)t.to(Device::cpu(), /*non_blocking=*/true);  // lands in pinned memory: no wait
    CHECK(host_sync_total() == 0);
}

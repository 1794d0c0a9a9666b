// The loader with a CUDA target: batches copied on the loader's stream equal
// the CPU loader's bit for bit, also while the consumer keeps the GPU busy,
// with pinned staging; and a stream + event order work across streams.
#include "support/support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("cuda: loader batches on the GPU equal the CPU loader's", "[cuda][loader]") {
    auto ds = std::make_shared<data::SyntheticDataset>(1000, Shape{1, 28, 28}, 10, 3);
    const data::Compose aug{data::RandomCrop(28, 4), data::RandomHorizontalFlip()};
    data::Loader cpu(ds, {.batch_size = 64, .seed = 9, .workers = 2}, aug);
    data::Loader gpu(ds, {.batch_size = 64, .seed = 9, .workers = 2, .device = Device::cuda(0)},
                     aug);
    CHECK(gpu.pinned());
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
        cpu.begin_epoch(epoch);
        gpu.begin_epoch(epoch);
        while (auto c = cpu.next()) {
            auto g = gpu.next();
            REQUIRE(g.has_value());
            REQUIRE(g->input.device() == Device::cuda(0));
            // Work queued on the current stream after the batch arrives sees its data.
            Tensor busy = randn({1 << 22}, {.device = Device::cuda(0)});
            for (int i = 0; i < 4; ++i) busy = exp(mul(busy, 0.5));
            check_close(g->input.to(Device::cpu()), c->input, 0, 0);
            check_close(g->target.to(Device::cpu()), c->target, 0, 0);
        }
        REQUIRE_FALSE(gpu.next().has_value());
    }
}

TEST_CASE("cuda: an event orders a copy stream before the current stream", "[cuda][stream]") {
    const Device d = Device::cuda(0);
    Tensor host = random_tensor({1 << 20}, DType::f32, 5);
    Tensor pinned = empty(host.shape(), {DType::f32, Device::cpu(), true});
    pinned.copy_(host);
    Tensor dev = empty(host.shape(), {DType::f32, d});
    CudaStream stream(d);
    CudaEvent done(d);
    stream.copy_async(dev.data_ptr(), pinned.data_ptr(), size_t(host.numel()) * 4);
    done.record(stream.ref());
    done.wait(current_stream(d));
    Tensor twice = mul(dev, 2.0);  // on the current stream, after the event
    check_close(twice.to(Device::cpu()), mul(host, 2.0), 0, 0);
    done.synchronize();
}

TEST_CASE("cuda: stream and event queries report finished work", "[cuda][stream]") {
    const Device d = Device::cuda(0);
    CudaStream stream(d);
    CudaEvent never(d), done(d, true), start(d, true);
    CHECK(never.query());  // an event never recorded counts as reached
    Tensor x = random_tensor({1 << 22}, DType::f32, 6).to(d);
    start.record(stream.ref());
    {
        const StreamGuard guard(stream.ref());
        for (int i = 0; i < 20; ++i) x = mul(x, 1.0001);  // queued on `stream`
    }
    done.record(stream.ref());
    stream.synchronize();
    CHECK(stream.query());
    CHECK(done.query());
    CHECK(CudaEvent::elapsed_ms(start, done) > 0);
}

// CUDA against the CPU backend: copies and casts between every dtype pair on
// strided layouts, fills, host<->device moves (pinned and not), and the Philox
// stream (uniform bit-identical, normal within a few ulp).
#include "support/support.h"

#include <cmath>

using namespace ember;
using namespace ember::test;

namespace {
const DType kAll[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                      DType::i32, DType::i64, DType::u8,  DType::boolean};
const Device kGpu = Device::cuda(0);
}  // namespace

TEST_CASE("cuda: host <-> device round trips keep every byte", "[cuda][copy]") {
    for (DType t : kAll) {
        Tensor a = random_tensor({257, 3}, t, 1, -50, 50);
        Tensor back = a.to(kGpu).to(Device::cpu());
        check_close(back, a, 0, 0);
        Tensor pinned = empty(a.shape(), {t, Device::cpu(), true});
        pinned.copy_(a);
        CHECK(pinned.storage()->pinned());
        Tensor g = pinned.to(kGpu, /*non_blocking=*/true);
        check_close(g.to(Device::cpu()), a, 0, 0);
    }
}

TEST_CASE("cuda: casts and strided copies equal the CPU's", "[cuda][copy]") {
    for (DType from : kAll) {
        Tensor a = random_tensor({33, 17, 5}, from, 2, -300, 300);
        Tensor ga = a.to(kGpu);
        for (DType to : kAll) {
            INFO(dtype_name(from) << " -> " << dtype_name(to));
            check_close(ga.to(to).to(Device::cpu()), a.to(to), 0, 0);
            check_close(ga.permute({2, 0, 1}).to(to).contiguous().to(Device::cpu()),
                        a.permute({2, 0, 1}).to(to).contiguous(), 0, 0);
        }
    }
    // Broadcast copy into a strided device destination.
    Tensor row = random_tensor({7}, DType::f32, 3);
    Tensor dst = zeros({5, 14}, {.device = kGpu}).slice(1, 0, 14, 2);
    dst.copy_(row.to(kGpu));
    for (int64_t i = 0; i < 5; ++i) check_close(dst.select(0, i).to(Device::cpu()), row, 0, 0);
    // Host tensor into a device view and back.
    Tensor host = random_tensor({5, 7}, DType::f64, 4);
    dst.copy_(host);
    check_close(dst.to(Device::cpu()), host.to(DType::f32), 0, 0);
}

TEST_CASE("cuda: fills and factories", "[cuda][factories]") {
    for (DType t : kAll) {
        Tensor f = full({1000, 3}, 3.0, {t, kGpu});
        for (double v : values(f)) REQUIRE(v == 3.0);
    }
    check_close(arange(0, 100, 3, {.device = kGpu}), arange(0, 100, 3), 0, 0);
    check_close(linspace(-2, 2, 17, {.device = kGpu}), linspace(-2, 2, 17), 0, 0);
}

TEST_CASE("cuda: the Philox stream matches the CPU", "[cuda][rng]") {
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        Generator gc(99), gg(99);
        check_close(rand({100003}, {t, kGpu}, &gg), rand({100003}, {t}, &gc), 0, 0);
        CHECK(gc.state() == gg.state());
        // randn: log/sin/cos differ in the last bits between libraries.
        const double tol = t == DType::f64 ? 1e-13 : t == DType::f32 ? 2e-6 : rtol_for(t);
        check_close(randn({100003}, {t, kGpu}, &gg), randn({100003}, {t}, &gc), tol, tol);
    }
    Generator a(5), b(5);
    check_close(randint(-7, 1000, {4099}, {DType::i64, kGpu}, &a),
                randint(-7, 1000, {4099}, {DType::i64}, &b), 0, 0);
}

// CUDA dropout against the CPU backend: the same (seed, block) gives the same
// mask bit for bit and the same output, for every floating dtype, odd sizes
// (a last partial Philox block), p = 0, strided inputs and any first block;
// the backward equals the CPU's; repeated runs give the same bits; and the
// differentiable ember::dropout draws the same mask on both devices.
#include "kernels/dropout.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {
const Device kGpu = Device::cuda(0);
const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor host(const Tensor& t) { return t.to(Device::cpu()); }
}  // namespace

TEST_CASE("cuda dropout: same seed, same mask and output as the CPU", "[cuda][dropout]") {
    const Shape shapes[] = {{1}, {3}, {4}, {5}, {7, 9}, {2, 3, 37}, {(1 << 20) + 3}, {0, 4}};
    uint64_t seed = 1;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats)
            for (double p : {0.0, 0.1, 0.5, 0.9}) {
                const uint64_t first = seed * 977 + (uint64_t(1) << 33);  // past 32 bits too
                const Tensor x = random_tensor(shape, dt, ++seed, -3, 3);
                const auto want = kernels::dropout_forward(x, p, 1234, first);
                for (bool strided : {false, true}) {
                    INFO(dtype_name(dt) << " " << shape_str(shape) << " p " << p
                                        << (strided ? " strided" : ""));
                    const Tensor gx = strided ? non_contiguous(gpu(x)) : gpu(x);
                    const auto got = kernels::dropout_forward(gx, p, 1234, first);
                    REQUIRE(got.output.device() == kGpu);
                    CHECK(host(got.mask).to_vector<uint8_t>() == want.mask.to_vector<uint8_t>());
                    check_close(host(got.output), want.output, 0, 0);
                    const auto again = kernels::dropout_forward(gx, p, 1234, first);
                    CHECK(host(again.mask).to_vector<uint8_t>() == want.mask.to_vector<uint8_t>());
                    // The backward with that mask.
                    const Tensor g = random_tensor(shape, dt, seed + 1000);
                    const Tensor dg = strided ? non_contiguous(gpu(g)) : gpu(g);
                    check_close(host(kernels::dropout_backward(dg, got.mask, p)),
                                kernels::dropout_backward(g, want.mask, p), 0, 0);
                }
            }
}

TEST_CASE("cuda dropout: the mask is rand() >= p at the same generator state", "[cuda][dropout]") {
    const int64_t n = 100003;
    const Tensor x = gpu(ones({n}));
    const auto f = kernels::dropout_forward(x, 0.3, 42, 17);
    Generator gen(42);
    gen.set_state({42, 17});
    const std::vector<float> u = rand({n}, {DType::f32}, &gen).to_vector<float>();
    const std::vector<uint8_t> m = host(f.mask).to_vector<uint8_t>();
    int64_t wrong = 0, kept = 0;
    for (int64_t i = 0; i < n; ++i) {
        wrong += m[size_t(i)] != (double(u[size_t(i)]) >= 0.3);
        kept += m[size_t(i)];
    }
    CHECK(wrong == 0);
    CHECK(std::abs(double(kept) / double(n) - 0.7) < 0.01);
}

TEST_CASE("cuda dropout: ember::dropout and its gradient agree across devices", "[cuda][dropout]") {
    const Tensor x0 = random_tensor({33, 65}, DType::f32, 5);
    const Tensor g0 = random_tensor({33, 65}, DType::f32, 6);
    Tensor outs[2], grads[2];
    for (int dev = 0; dev < 2; ++dev) {
        Generator gen(99);
        Tensor x = dev ? gpu(x0) : x0.clone();
        x.set_requires_grad(true);
        const Tensor y = dropout(x, 0.25, /*training=*/true, &gen);
        y.backward(dev ? gpu(g0) : g0);
        outs[dev] = host(y.detach());
        grads[dev] = host(x.grad());
    }
    check_close(outs[1], outs[0], 0, 0);
    check_close(grads[1], grads[0], 0, 0);
}

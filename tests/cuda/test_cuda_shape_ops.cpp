// cat, stack, split and chunk of CUDA tensors against the CPU's: cat copies
// each input into its slice of the output on the current stream (mixed
// dtypes promoted, strided inputs), stack is cat of unsqueezed views, split
// and chunk are views; and the gradient of cat flows back on the device.
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {
const Device kGpu = Device::cuda(0);
Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }
}  // namespace

TEST_CASE("cuda: cat and stack equal the CPU's", "[cuda][shape]") {
    const Tensor a = random_tensor({3, 5}, DType::f32, 1);
    const Tensor b = random_tensor({5, 4}, DType::f32, 2).t();  // strided [4, 5]
    const Tensor c = random_tensor({2, 5}, DType::bf16, 3);     // promoted to f32
    const Tensor ga = a.to(kGpu), gb = b.to(kGpu).t().contiguous().t(), gc = c.to(kGpu);
    REQUIRE(!gb.is_contiguous());
    for (int64_t dim : {0, -2}) {
        INFO("dim " << dim);
        check_close(cpu(cat({ga, gb, gc}, dim)), cat({a, b, c}, dim), 0, 0);
    }
    const Tensor d = random_tensor({3, 5}, DType::f32, 4);
    for (int64_t dim : {0, 1, 2}) {
        INFO("stack dim " << dim);
        check_close(cpu(stack({ga, d.to(kGpu)}, dim)), stack({a, d}, dim), 0, 0);
    }
}

TEST_CASE("cuda: split and chunk are views of the device tensor", "[cuda][shape]") {
    const Tensor x = random_tensor({7, 6}, DType::f32, 5);
    const Tensor g = x.to(kGpu);
    const auto want = split(x, 3, 0);
    const auto got = split(g, 3, 0);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
        CHECK(got[i].device() == kGpu);
        check_close(cpu(got[i]), want[i], 0, 0);
    }
    const auto parts = chunk(g, 4, 1);
    const auto host = chunk(x, 4, 1);
    REQUIRE(parts.size() == host.size());
    for (size_t i = 0; i < parts.size(); ++i) check_close(cpu(parts[i]), host[i], 0, 0);
}

TEST_CASE("cuda: the gradient of cat reaches each input on the device", "[cuda][shape]") {
    Tensor a = random_tensor({2, 3}, DType::f32, 6).to(kGpu), b = random_tensor({4, 3}, DType::f32, 7).to(kGpu);
    a.set_requires_grad();
    b.set_requires_grad();
    const Tensor w = random_tensor({6, 3}, DType::f32, 8);
    sum(mul(cat({a, b}, 0), w.to(kGpu))).backward();
    check_close(cpu(a.grad()), w.slice(0, 0, 2), 0, 0);
    check_close(cpu(b.grad()), w.slice(0, 2, 6), 0, 0);
}

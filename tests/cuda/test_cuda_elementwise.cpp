// CUDA elementwise special cases beside the op table's CUDA-vs-CPU test
// (test_cuda_ops.cpp): an in-place op on a strided device view, and mixing
// devices as a clear error.
#include "kernels/elementwise.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {
const Device kGpu = Device::cuda(0);
Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }
}  // namespace

TEST_CASE("cuda: in place on a strided device view equals the CPU's", "[cuda][elementwise]") {
    Tensor base = random_tensor({8, 16}, DType::f32, 5);
    Tensor g = gpu(base);
    Tensor view = g.slice(1, 0, 16, 2);
    kernels::add_(view, gpu(random_tensor({8}, DType::f32, 6)).unsqueeze(1));
    Tensor host = base.clone();
    kernels::add_(host.slice(1, 0, 16, 2), random_tensor({8}, DType::f32, 6).unsqueeze(1));
    check_close(cpu(g), host, 0, 0);
}

TEST_CASE("cuda: mixing devices is a clear error", "[cuda][elementwise]") {
    REQUIRE_THROWS_WITH_MSG(kernels::add(ones({2}), ones({2}, {.device = kGpu})), "cuda:0");
}

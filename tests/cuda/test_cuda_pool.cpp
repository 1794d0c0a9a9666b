// CUDA pooling beyond the op table. The comparisons with the CPU backend on
// random inputs (every pooling front and backward, every floating dtype, odd
// sizes, 3-d inputs, transposed and channels-last layouts, arbitrary max
// indices, a large batch) are the op table's, bit for bit
// (tests/ops/entries_pool.cpp, run by tests/cuda/test_cuda_ops.cpp). Here:
// max's pick among ties, NaN and -inf; run-to-run determinism of the
// backwards; a bad max index as an Error at the next synchronization; and the
// differentiable ops' gradients on the device.
#include <limits>

#include "kernels/pool.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor host(const Tensor& t) { return t.to(Device::cpu()); }

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

struct Window {
    Int2 kernel, stride, padding, dilation;
    bool ceil_mode;
};

const Window kWindows[] = {
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},  // ResNet's stem: overlapping
    {{2, 2}, {0, 0}, {0, 0}, {1, 1}, false},  // stride = kernel
    {{3, 2}, {1, 2}, {1, 0}, {1, 1}, true},   // stride-1 rows, ceil mode
    {{3, 3}, {2, 1}, {0, 1}, {1, 1}, true},   // a last window past the input
    {{5, 3}, {3, 2}, {2, 1}, {1, 1}, false},
    {{2, 3}, {1, 1}, {1, 1}, {2, 2}, false},  // dilation (max only)
};

}  // namespace

TEST_CASE("cuda pool: max_pool2d picks the CPU's element among ties and NaN", "[cuda][pool]") {
    // Values from {0, 1, 2}: ties everywhere; NaN in a few windows; -inf too.
    Tensor x = random_tensor({2, 3, 9, 10}, DType::f32, 5, 0, 3).to(DType::i64).to(DType::f32);
    std::vector<float> v = x.to_vector<float>();
    v[7] = std::numeric_limits<float>::quiet_NaN();
    v[8] = std::numeric_limits<float>::quiet_NaN();
    v[100] = -std::numeric_limits<float>::infinity();
    x = from_vector(v, x.shape());
    for (DType dt : kFloats)
        for (const Window& w : kWindows) {
            const Tensor cx = x.to(dt);
            const auto want =
                kernels::max_pool2d(cx, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode);
            const auto got = kernels::max_pool2d(gpu(cx), w.kernel, w.stride, w.padding, w.dilation,
                                                 w.ceil_mode);
            check_close(host(got.values), want.values, 0, 0);
            CHECK(host(got.indices).to_vector<int64_t>() == want.indices.to_vector<int64_t>());
        }
}

TEST_CASE("cuda pool: the backwards give the same bits every run", "[cuda][pool]") {
    uint64_t seed = 100;
    for (DType dt : kFloats)
        for (const Shape& shape : {Shape{3, 2, 13, 11}, Shape{4, 8, 33, 31}})
            for (const Window& w : kWindows) {
                INFO(dtype_name(dt)
                     << " " << shape_str(shape) << " kernel " << w.kernel[0] << "x" << w.kernel[1]);
                const Tensor x = gpu(random_tensor(shape, dt, ++seed));
                const kernels::MaxPool2dResult m =
                    kernels::max_pool2d(x, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode);
                const Tensor g = gpu(random_tensor(m.values.shape(), dt, ++seed));
                // The forward's indices, then arbitrary in-plane ones (many
                // outputs adding into one element).
                const int64_t hw = shape[2] * shape[3];
                const Tensor any =
                    gpu(random_tensor(m.indices.shape(), DType::i64, ++seed, 0, double(hw)));
                for (const Tensor& idx : {m.indices, any})
                    check_close(host(kernels::max_pool2d_backward(g, x, idx)),
                                host(kernels::max_pool2d_backward(g, x, idx)), 0, 0);
                if (w.dilation[0] != 1) continue;
                for (bool cip : {true, false}) {
                    const Shape out =
                        kernels::avg_pool2d(x, w.kernel, w.stride, w.padding, w.ceil_mode, cip)
                            .shape();
                    const Tensor gy = gpu(random_tensor(out, dt, ++seed));
                    const auto run = [&] {
                        return host(kernels::avg_pool2d_backward(gy, x, w.kernel, w.stride,
                                                                 w.padding, w.ceil_mode, cip));
                    };
                    check_close(run(), run(), 0, 0);
                }
            }
    for (Int2 out : {Int2{1, 1}, Int2{3, 4}, Int2{13, 2}}) {
        const Tensor x = gpu(random_tensor({4, 8, 33, 31}, DType::f32, ++seed));
        const Tensor g = gpu(random_tensor({4, 8, out[0], out[1]}, DType::f32, ++seed));
        check_close(host(kernels::adaptive_avg_pool2d_backward(g, x)),
                    host(kernels::adaptive_avg_pool2d_backward(g, x)), 0, 0);
    }
}

TEST_CASE("cuda pool: a max index outside the plane is an Error at the next sync", "[cuda][pool]") {
    const Tensor x = random_tensor({2, 3, 6, 5}, DType::f32, 1);
    const auto m = kernels::max_pool2d(x, {2, 2});
    std::vector<int64_t> idx = m.indices.to_vector<int64_t>();
    idx[7] = 30;  // H·W = 30: one past the plane
    const Tensor bad = gpu(from_vector(idx, m.indices.shape()));
    const Tensor g = gpu(random_tensor(m.values.shape(), DType::f32, 2));
    std::string msg = error_of([&] {
        const Tensor dx = kernels::max_pool2d_backward(g, gpu(x), bad);
        (void)host(dx);
    });
    INFO(msg);
    CHECK(msg.find("max_pool2d_backward: index 30 at position 7 is out of range [0, 30)") !=
          std::string::npos);
    // Negative too; and the device stays usable.
    idx[7] = m.indices.to_vector<int64_t>()[7];
    idx[20] = -1;
    msg = error_of([&] {
        (void)kernels::max_pool2d_backward(g, gpu(x), gpu(from_vector(idx, m.indices.shape())));
        synchronize(kGpu);
    });
    CHECK(msg.find("max_pool2d_backward: index -1 at position 20") != std::string::npos);
    CHECK_NOTHROW(synchronize(kGpu));
    check_close(host(kernels::max_pool2d_backward(g, gpu(x), gpu(m.indices))),
                kernels::max_pool2d_backward(host(g), x, m.indices), 0, 0);
}

TEST_CASE("cuda pool: the differentiable ops' gradients on the device equal the CPU's",
          "[cuda][pool]") {
    const Tensor x0 = random_tensor({2, 3, 11, 10}, DType::f32, 3);
    const Tensor g0 = random_tensor({2, 3, 6, 5}, DType::f32, 4);
    for (int op = 0; op < 3; ++op) {
        Tensor grads[2];
        for (int dev = 0; dev < 2; ++dev) {
            Tensor x = dev ? gpu(x0) : x0.clone();
            x.set_requires_grad(true);
            const Tensor y = op == 0   ? max_pool2d(x, {3, 3}, {2, 2}, {1, 1})
                             : op == 1 ? avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, false)
                                       : adaptive_avg_pool2d(x, {6, 5});
            REQUIRE(y.shape() == g0.shape());
            y.backward(dev ? gpu(g0) : g0);
            grads[dev] = host(x.grad());
        }
        INFO("op " << op);
        check_close(grads[1], grads[0], 0, 0);
    }
}

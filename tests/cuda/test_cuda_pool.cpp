// CUDA pooling against the CPU backend, bit for bit: max (values and
// indices, ties and NaN), average (both divisor rules), adaptive average and
// the three backwards, every floating dtype, odd sizes, strided inputs and
// gradients, 3-d inputs; arbitrary max indices; run-to-run determinism of
// the backwards; a bad max index as an Error at the next synchronization; and
// the differentiable ops' gradients on the device.
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

const Shape kShapes[] = {{1, 1, 1, 1}, {2, 3, 7, 9}, {3, 2, 13, 11}, {5, 17, 6}, {4, 8, 33, 31}};

// The input in the layout under test: contiguous, or H and W transposed in memory.
Tensor in_layout(const Tensor& t, bool strided) { return strided ? non_contiguous(t) : t; }

}  // namespace

TEST_CASE("cuda pool: forwards equal the CPU's bits", "[cuda][pool]") {
    uint64_t seed = 1;
    for (DType dt : kFloats)
        for (const Shape& shape : kShapes)
            for (bool strided : {false, true}) {
                const Tensor x = random_tensor(shape, dt, ++seed);
                const Tensor gx = in_layout(gpu(x), strided), cx = in_layout(x, strided);
                for (const Window& w : kWindows) {
                    INFO(dtype_name(dt) << " " << shape_str(shape) << (strided ? " strided" : "")
                                        << " kernel " << w.kernel[0] << "x" << w.kernel[1]);
                    kernels::MaxPool2dResult want;
                    try {  // windows larger than the smallest inputs
                        want = kernels::max_pool2d(cx, w.kernel, w.stride, w.padding, w.dilation,
                                                   w.ceil_mode);
                    } catch (const Error&) {
                        continue;
                    }
                    const kernels::MaxPool2dResult got = kernels::max_pool2d(
                        gx, w.kernel, w.stride, w.padding, w.dilation, w.ceil_mode);
                    REQUIRE(got.values.device() == kGpu);
                    check_close(host(got.values), want.values, 0, 0);
                    CHECK(host(got.indices).to_vector<int64_t>() ==
                          want.indices.to_vector<int64_t>());
                    if (w.dilation[0] != 1) continue;
                    for (bool cip : {true, false})
                        check_close(host(kernels::avg_pool2d(gx, w.kernel, w.stride, w.padding,
                                                             w.ceil_mode, cip)),
                                    kernels::avg_pool2d(cx, w.kernel, w.stride, w.padding,
                                                        w.ceil_mode, cip),
                                    0, 0);
                }
                for (Int2 out : {Int2{1, 1}, Int2{3, 4}, Int2{5, 5}, Int2{13, 2}})
                    check_close(host(kernels::adaptive_avg_pool2d(gx, out)),
                                kernels::adaptive_avg_pool2d(cx, out), 0, 0);
            }
}

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

TEST_CASE("cuda pool: backwards equal the CPU's bits and repeat exactly", "[cuda][pool]") {
    uint64_t seed = 100;
    for (DType dt : kFloats)
        for (const Shape& shape : kShapes)
            for (const Window& w : kWindows) {
                const Tensor x = random_tensor(shape, dt, ++seed);
                kernels::MaxPool2dResult m;
                try {
                    m = kernels::max_pool2d(x, w.kernel, w.stride, w.padding, w.dilation,
                                            w.ceil_mode);
                } catch (const Error&) {
                    continue;
                }
                INFO(dtype_name(dt) << " " << shape_str(shape) << " kernel " << w.kernel[0] << "x"
                                    << w.kernel[1]);
                const Tensor gy = random_tensor(m.values.shape(), dt, ++seed);
                for (bool strided : {false, true}) {
                    const Tensor cg = in_layout(gy, strided), dg = in_layout(gpu(gy), strided);
                    // The forward's indices, then arbitrary in-plane ones.
                    const int64_t hw = shape[shape.size() - 2] * shape.back();
                    const Tensor any = random_tensor(m.indices.shape(), DType::i64, ++seed, 0,
                                                     double(hw));
                    for (const Tensor& idx : {m.indices, any}) {
                        const Tensor want = kernels::max_pool2d_backward(cg, x, idx);
                        const Tensor got =
                            kernels::max_pool2d_backward(dg, gpu(x), in_layout(gpu(idx), strided));
                        const Tensor again = kernels::max_pool2d_backward(dg, gpu(x), gpu(idx));
                        check_close(host(got), want, 0, 0);
                        check_close(host(again), host(got), 0, 0);
                    }
                    if (w.dilation[0] != 1) continue;
                    for (bool cip : {true, false}) {
                        const Tensor y =
                            kernels::avg_pool2d(x, w.kernel, w.stride, w.padding, w.ceil_mode, cip);
                        const Tensor g = in_layout(random_tensor(y.shape(), dt, ++seed), strided);
                        const Tensor want = kernels::avg_pool2d_backward(
                            g, x, w.kernel, w.stride, w.padding, w.ceil_mode, cip);
                        const Tensor got = kernels::avg_pool2d_backward(
                            gpu(g), gpu(x), w.kernel, w.stride, w.padding, w.ceil_mode, cip);
                        check_close(host(got), want, 0, 0);
                    }
                }
            }
    for (DType dt : kFloats)
        for (const Shape& shape : kShapes)
            for (Int2 out : {Int2{1, 1}, Int2{3, 4}, Int2{5, 5}, Int2{13, 2}}) {
                const Tensor x = random_tensor(shape, dt, ++seed);
                const Tensor y = kernels::adaptive_avg_pool2d(x, out);
                const Tensor g = non_contiguous(random_tensor(y.shape(), dt, ++seed));
                const Tensor got = kernels::adaptive_avg_pool2d_backward(gpu(g), gpu(x));
                check_close(host(got), kernels::adaptive_avg_pool2d_backward(g, x), 0, 0);
                check_close(host(kernels::adaptive_avg_pool2d_backward(gpu(g), gpu(x))), host(got),
                            0, 0);
            }
}

TEST_CASE("cuda pool: a large batch (many blocks, grid-stride) equals the CPU", "[cuda][pool]") {
    const Tensor x = random_tensor({16, 64, 57, 55}, DType::bf16, 9);
    const auto want = kernels::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    const auto got = kernels::max_pool2d(gpu(x), {3, 3}, {2, 2}, {1, 1});
    CHECK(host(got.indices).to_vector<int64_t>() == want.indices.to_vector<int64_t>());
    const Tensor g = random_tensor(want.values.shape(), DType::bf16, 10);
    check_close(host(kernels::max_pool2d_backward(gpu(g), gpu(x), got.indices)),
                kernels::max_pool2d_backward(g, x, want.indices), 0, 0);
    check_close(
        host(kernels::avg_pool2d_backward(gpu(g), gpu(x), {3, 3}, {2, 2}, {1, 1}, false, true)),
        kernels::avg_pool2d_backward(g, x, {3, 3}, {2, 2}, {1, 1}, false, true), 0, 0);
}

TEST_CASE("cuda pool: a max index outside the plane is an Error at the next sync",
          "[cuda][pool]") {
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

// Channels-last convolution: the NHWC kernels (kernels/cpu/conv_nhwc.cpp) —
// forward, grad_input (by stride phase) and grad_weight — against naive f64
// loops written from the definitions: 1 to 4 vectors of channels per tile,
// strides (phases reached by no tap included), paddings (none, narrow,
// wide), dilations, non-square and even kernels, rows cut into several tiles
// and rows of one pixel, batches of several grad_weight chunks; every
// output overwritten; bit-identical for 1, 2 and 3 threads; the rule; and
// the fronts on channels-last operands (results keep the format, match the
// NCHW path where the kernels fit and where they do not, and gradients
// through autograd equal the NCHW input's).
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/conv_cases.h"
#include "kernels/conv.h"
#include "kernels/cpu/conv_nhwc.h"

using namespace ember;
using namespace ember::kernels;
using namespace ember::test;
using Case = ConvCase;

namespace {

struct Outputs {
    std::vector<float> out, dx, dw;
};

// The kernels that fit, on `threads` threads, into NaN-poisoned buffers
// ([N, OH, OW, O], [N, H, W, C], [O, C, kH, kW]).
Outputs run_nhwc(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                 const float* bias, const std::vector<float>& dy, int threads) {
    using cpu::nhwc::Pass;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    constexpr float nan = std::numeric_limits<float>::quiet_NaN();
    Outputs r{std::vector<float>(dy.size(), nan), std::vector<float>(x.size(), nan),
              std::vector<float>(w.size(), nan)};
    if (cpu::nhwc::fits(s, Pass::forward))
        cpu::nhwc::forward(s, x.data(), w.data(), bias, r.out.data());
    if (cpu::nhwc::fits(s, Pass::grad_input))
        cpu::nhwc::grad_input(s, dy.data(), w.data(), r.dx.data());
    if (cpu::nhwc::fits(s, Pass::grad_weight))
        cpu::nhwc::grad_weight(s, dy.data(), x.data(), r.dw.data());
    omp_set_num_threads(saved);
    return r;
}

// Checks the kernels that fit against the definitions on x [N, H, W, C] and
// dy [N, OH, OW, O], in f64.
void check_reference(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                     const float* bias, const std::vector<float>& dy, const Outputs& got) {
    using cpu::nhwc::Pass;
    const auto [out, dx, dw] = nhwc_reference(s, x, w, bias, dy, [](float v) { return double(v); });
    if (cpu::nhwc::fits(s, Pass::forward)) check(got.out, out, "forward");
    if (cpu::nhwc::fits(s, Pass::grad_input)) check(got.dx, dx, "grad_input");
    if (cpu::nhwc::fits(s, Pass::grad_weight)) check(got.dw, dw, "grad_weight");
}

}  // namespace

TEST_CASE("channels-last conv2d matches the definition", "[conv][nhwc]") {
    uint64_t seed = 4100;
    for (const Case& k : channels_last_cases()) {
        const Conv2dShape s = shape_of(k);
        INFO(describe(k));
        REQUIRE(cpu::nhwc::fits(s, cpu::nhwc::Pass::forward));
        REQUIRE(cpu::nhwc::fits(s, cpu::nhwc::Pass::grad_weight));
        REQUIRE(cpu::nhwc::fits(s, cpu::nhwc::Pass::grad_input) == (k.c % 16 == 0));
        const std::vector<float> x = random_floats(s.n * s.h * s.w * s.c, ++seed);
        const std::vector<float> w = random_floats(s.o * s.c * s.kh * s.kw, ++seed);
        const std::vector<float> b = random_floats(s.o, ++seed);
        const std::vector<float> dy = random_floats(s.n * s.oh * s.ow * s.o, ++seed);
        for (const float* bias : {b.data(), static_cast<const float*>(nullptr)}) {
            INFO((bias ? "bias" : "no bias"));
            const Outputs one = run_nhwc(s, x, w, bias, dy, 1);
            check_reference(s, x, w, bias, dy, one);
            for (int threads : {2, 3}) {
                INFO(threads << " threads");
                const Outputs many = run_nhwc(s, x, w, bias, dy, threads);
                REQUIRE(std::memcmp(many.out.data(), one.out.data(), one.out.size() * 4) == 0);
                REQUIRE(std::memcmp(many.dx.data(), one.dx.data(), one.dx.size() * 4) == 0);
                REQUIRE(std::memcmp(many.dw.data(), one.dw.data(), one.dw.size() * 4) == 0);
            }
        }
    }
}

TEST_CASE("channels-last conv2d's rule", "[conv][nhwc]") {
    using cpu::nhwc::Pass;
    const Conv2dShape base = shape_of({2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1});
    for (Pass p : {Pass::forward, Pass::grad_input, Pass::grad_weight})
        REQUIRE(cpu::nhwc::fits(base, p));
    Conv2dShape s = base;
    s.o = 24;  // output channels not in whole 16-lane vectors
    REQUIRE_FALSE(cpu::nhwc::fits(s, Pass::forward));
    REQUIRE_FALSE(cpu::nhwc::fits(s, Pass::grad_weight));
    REQUIRE(cpu::nhwc::fits(s, Pass::grad_input));
    s = base;
    s.c = 24;  // input channels: grad_input's vectors
    REQUIRE(cpu::nhwc::fits(s, Pass::forward));
    REQUIRE_FALSE(cpu::nhwc::fits(s, Pass::grad_input));
    s = base;
    s.groups = 2;
    for (Pass p : {Pass::forward, Pass::grad_input, Pass::grad_weight})
        REQUIRE_FALSE(cpu::nhwc::fits(s, p));
    s = base;
    s.c = cpu::nhwc::kMaxChannels + 16;
    REQUIRE_FALSE(cpu::nhwc::fits(s, Pass::forward));
    s = base;
    s.o = cpu::nhwc::kMaxChannels + 16;
    REQUIRE_FALSE(cpu::nhwc::fits(s, Pass::grad_input));
}

TEST_CASE("conv2d of a channels-last input keeps the format", "[conv][nhwc]") {
    struct Front {
        Shape x, w;
        Int2 stride, padding;
        DType dtype;
    };
    // The kernel's shape; one it does not take (8 output channels); f64 (NCHW kernels).
    const Front fronts[] = {{{2, 16, 10, 10}, {32, 16, 3, 3}, {2, 2}, {1, 1}, DType::f32},
                            {{2, 16, 9, 9}, {8, 16, 3, 3}, {1, 1}, {1, 1}, DType::f32},
                            {{2, 4, 6, 7}, {16, 4, 3, 3}, {1, 1}, {0, 1}, DType::f64}};
    uint64_t seed = 4300;
    for (const Front& f : fronts) {
        INFO(shape_str(f.x) << " * " << shape_str(f.w) << " " << dtype_name(f.dtype));
        const Tensor x = test::random_tensor(f.x, f.dtype, ++seed);
        const Tensor w = test::random_tensor(f.w, f.dtype, ++seed);
        const Tensor b = test::random_tensor({f.w[0]}, f.dtype, ++seed);
        const Tensor cl = x.contiguous(MemoryFormat::channels_last);
        REQUIRE(cl.suggest_memory_format() == MemoryFormat::channels_last);
        const Tensor want = kernels::conv2d(x, w, b, f.stride, f.padding);
        const Tensor got = kernels::conv2d(cl, w, b, f.stride, f.padding);
        REQUIRE(got.shape() == want.shape());
        REQUIRE(got.is_contiguous(MemoryFormat::channels_last));
        test::check_close(got, want, f.dtype == DType::f64 ? 1e-12 : 1e-5, 1e-5);
    }
}

TEST_CASE("gradients through a channels-last conv2d equal the NCHW ones", "[conv][nhwc]") {
    const Tensor x0 = test::random_tensor({2, 16, 8, 8}, DType::f32, 4401),
                 w0 = test::random_tensor({32, 16, 3, 3}, DType::f32, 4402);
    auto grads = [&](bool channels_last) {
        const Tensor x = x0.clone().set_requires_grad();
        const Tensor w = w0.clone().set_requires_grad();
        const Tensor in = channels_last ? x.contiguous(MemoryFormat::channels_last) : x;
        const Tensor y = ember::conv2d(in, w, {}, {1, 1}, {1, 1});
        const Tensor g = test::random_tensor(y.shape(), DType::f32, 4403);
        ember::sum(ember::mul(y, g)).backward();
        return std::pair{x.grad(), w.grad()};
    };
    const auto [dx, dw] = grads(false);
    const auto [cx, cw] = grads(true);
    test::check_close(cx, dx, 1e-5, 1e-5);
    test::check_close(cw, dw, 1e-5, 1e-5);
}

TEST_CASE("conv2d_backward of channels-last operands", "[conv][nhwc]") {
    uint64_t seed = 4500;
    for (const ConvFront& f : channels_last_fronts()) {
        INFO(shape_str(f.x) << " * " << shape_str(f.w));
        const Tensor x = test::random_tensor(f.x, DType::f32, ++seed);
        const Tensor w = test::random_tensor(f.w, DType::f32, ++seed);
        const Tensor y = kernels::conv2d(x, w, {}, f.stride, f.padding);
        const Tensor dy = test::random_tensor(y.shape(), DType::f32, ++seed);
        const Conv2dGrads want =
            kernels::conv2d_backward(dy, x, w, f.stride, f.padding, {1, 1}, 1, {true, true, true});
        const Conv2dGrads got = kernels::conv2d_backward(
            dy.contiguous(MemoryFormat::channels_last), x.contiguous(MemoryFormat::channels_last),
            w, f.stride, f.padding, {1, 1}, 1, {true, true, true});
        REQUIRE(got.input.is_contiguous(MemoryFormat::channels_last));
        test::check_close(got.input, want.input, 1e-5, 1e-5);
        test::check_close(got.weight, want.weight, 1e-5, 1e-4);
        test::check_close(got.bias, want.bias, 1e-5, 1e-4);
    }
}

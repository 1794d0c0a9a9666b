// Elementwise special cases beside the op table (tests/ops): gelu at known
// values, the NaN/inf policies, a raw-View kernel call, and every documented
// error.
#include <cmath>
#include <limits>

#include "kernels/cpu/elementwise.h"
#include "kernels/elementwise.h"
#include "kernels/front.h"
#include "ops/reference.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;
using kernels::BinaryOp;
using kernels::UnaryOp;

TEST_CASE("gelu: exact and tanh forms", "[elementwise][gelu]") {
    const Tensor x = from_vector(std::vector<double>{-3, -1, -0.5, 0, 0.5, 1, 3});
    check_close(
        kernels::gelu(x),
        {-0.004049694095, -0.1586552539, -0.1542687694, 0, 0.3457312306, 0.8413447461, 2.995950306},
        1e-7, 1e-9);
    check_close(
        kernels::gelu(x, GeluApprox::tanh),
        {-0.003637392082, -0.1588080094, -0.1542859902, 0, 0.3457140098, 0.8411919906, 2.996362608},
        1e-7, 1e-9);
}

TEST_CASE("NaN and infinity behaviour", "[elementwise][nan]") {
    const float inf = std::numeric_limits<float>::infinity();
    const Tensor x = from_vector(std::vector<float>{NAN, inf, -inf, 0.0f, -1.0f});
    check_close(kernels::log(x), {NAN, INFINITY, NAN, -INFINITY, NAN});
    check_close(kernels::sqrt(x), {NAN, INFINITY, NAN, 0, NAN});
    check_close(kernels::rsqrt(x), {NAN, 0, NAN, INFINITY, NAN});
    check_close(kernels::exp(x), {NAN, INFINITY, 0, 1, std::exp(-1.0)});
    check_close(kernels::relu(x), {NAN, INFINITY, 0, 0, 0});  // relu(NaN) = NaN
    check_close(kernels::sigmoid(x), {NAN, 1, 0, 0.5, 1 / (1 + std::exp(1.0))});
    check_close(kernels::tanh(x), {NAN, 1, -1, 0, std::tanh(-1.0)});
    check_close(kernels::gelu(x), {NAN, INFINITY, NAN, 0, ref::unary(UnaryOp::gelu, -1)});
    check_close(kernels::gelu(x, GeluApprox::tanh),
                {NAN, INFINITY, NAN, 0, ref::unary(UnaryOp::gelu_tanh, -1)});
    // Far left tail: the tanh form rounds to -0; exp(-2u) overflows to inf here (or
    // nearly), giving -0 or a negligible negative.
    check_close(kernels::gelu(from_vector(std::vector<float>{-60.0f, -10.0f}), GeluApprox::tanh),
                {0, 0}, 0, 1e-30);
    check_close(kernels::clamp(x, -0.5, 0.5), {NAN, 0.5, -0.5, 0, -0.5});
    check_close(kernels::maximum(x, 0.0), {NAN, INFINITY, 0, 0, 0});
    check_close(kernels::minimum(from_vector(std::vector<float>{1, 2}),
                                 from_vector(std::vector<float>{NAN, 1})),
                {NAN, 1});
    check_close(kernels::div(x, 0.0), {NAN, INFINITY, -INFINITY, NAN, -INFINITY});
    check_close(kernels::div(from_vector(std::vector<int32_t>{1, 0, -2}),
                             from_vector(std::vector<int32_t>{0, 0, 0})),
                {INFINITY, NAN, -INFINITY});
}

TEST_CASE("the CPU kernel runs on raw Views and writes only its elements",
          "[elementwise][kernel]") {
    std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(8, NAN);
    kernels::View va, vb, vo;
    va.data = reinterpret_cast<char*>(a.data());
    vb.data = reinterpret_cast<char*>(b.data());
    vo.data = reinterpret_cast<char*>(out.data());
    va.ndim = vb.ndim = vo.ndim = 1;
    va.shape[0] = vb.shape[0] = vo.shape[0] = 4;
    va.strides[0] = vb.strides[0] = 1;
    vo.strides[0] = 2;  // every other element; the rest stay poisoned
    kernels::cpu::binary(BinaryOp::sub, vo, vb, va);
    CHECK(out[0] == 9);
    CHECK(out[2] == 18);
    CHECK(out[4] == 27);
    CHECK(out[6] == 36);
    for (int i = 1; i < 8; i += 2) CHECK(std::isnan(out[size_t(i)]));
}

TEST_CASE("elementwise errors name the op, shapes and dtypes", "[elementwise][errors]") {
    const Tensor a = random_tensor({3}, DType::f32, 1), b = random_tensor({4}, DType::f32, 2);
    REQUIRE_THROWS_WITH_MSG(kernels::add(a, b), "add: shapes [3] and [4] cannot be broadcast");
    REQUIRE_THROWS_WITH_MSG(kernels::lt(a, b), "lt: shapes [3] and [4]");
    REQUIRE_THROWS_WITH_MSG(kernels::mul(a, Tensor()), "mul: undefined tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::exp(Tensor()), "exp: undefined tensor");
    const Tensor bo = random_tensor({3}, DType::boolean, 3);
    REQUIRE_THROWS_WITH_MSG(kernels::neg(bo),
                            "neg: not supported for bool tensors, got bool [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::abs(bo), "abs: not supported for bool");
    REQUIRE_THROWS_WITH_MSG(kernels::relu(bo), "relu: not supported for bool");
    REQUIRE_THROWS_WITH_MSG(kernels::sub(bo, bo), "sub: not supported for bool tensors");
    REQUIRE_THROWS_WITH_MSG(kernels::pow(bo, bo), "pow: not supported for bool tensors");
    REQUIRE_THROWS_WITH_MSG(kernels::clamp(bo, 0.0, 1.0), "clamp: not supported for bool");
    REQUIRE_THROWS_WITH_MSG(kernels::where(a, a, a),
                            "where: the condition must be a bool tensor, got f32 [3]");
    REQUIRE_THROWS_WITH_MSG(kernels::where(bo, a, b),
                            "where: condition bool [3] on cpu, a f32 [3] on cpu and b f32 [4]");
    REQUIRE_THROWS_WITH_MSG(kernels::clamp(a, std::nullopt, std::nullopt),
                            "clamp: at least one of min and max");
    REQUIRE_THROWS_WITH_MSG(kernels::clamp(a, NAN, 1.0), "clamp: a bound is NaN");
    // In place: the destination must hold the broadcast shape and the result dtype.
    Tensor d = random_tensor({2, 3}, DType::f32, 4);
    REQUIRE_THROWS_WITH_MSG(kernels::add_(d, random_tensor({2, 1, 3}, DType::f32, 5)),
                            "add_: operand of shape [2, 1, 3] does not broadcast to the shape of "
                            "the destination f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::sub_(d, b), "sub_: operand of shape [4]");
    Tensor di = random_tensor({3}, DType::i32, 6, -5, 5);
    REQUIRE_THROWS_WITH_MSG(kernels::div_(di, di),
                            "div_: result dtype f32 cannot be written into i32 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::add_(di, a),
                            "add_: result dtype f32 cannot be written into i32");
    REQUIRE_THROWS_WITH_MSG(kernels::mul_(di, 2.0),
                            "mul_: result dtype f32 cannot be written into i32");
    Tensor dbo = random_tensor({3}, DType::boolean, 7);
    REQUIRE_THROWS_WITH_MSG(kernels::add_(dbo, di),
                            "add_: result dtype i32 cannot be written into bool");
    REQUIRE_THROWS_WITH_MSG(kernels::add_(random_tensor({1}, DType::f32, 8).expand({4}),
                                          random_tensor({4}, DType::f32, 9)),
                            "add_: the destination has broadcast (stride 0) dims");
    const Tensor i64 = from_vector<int64_t>({1, 2}, {2});
    REQUIRE_THROWS_WITH_MSG(kernels::relu_backward(i64, i64),
                            "relu_backward: expected floating tensors");
    // Device mismatch (check_same_device) needs a CUDA build and a GPU: tests/cuda.
}

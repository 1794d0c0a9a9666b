// The fused batch norm ops (Note [Fused batch norm + ReLU], kernels/norm.h):
// batch_norm_relu and batch_norm_add_relu against the unfused ops bit for bit,
// signed zeros and NaNs, central differences of the fused backward, and
// their errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/norm.h"
#include "support/norm_reference.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;


// Note [Fused batch norm + ReLU] (kernels/norm.h): the fused op is the same
// kernel with the ReLU in the apply pass and the mask in the backward's sums
// and apply pass, so it must give relu(batch_norm(x)) and batch_norm's
// backward of relu_backward(g, y) exactly, bits and signed zeros included.
TEST_CASE("batch_norm_relu equals batch_norm then relu bit for bit", "[norm][batch_norm]") {
    const Shape shapes[] = {{2, 1, 3},  {5, 3},         {7, 5, 3, 3},   {3, 6, 9, 13},
                            {2048, 40}, {8, 3, 64, 64}, {4, 16, 28, 28}};
    uint64_t seed = 400;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                FusedCase c = fused_case(shape, dt, affine, seed, -1, 1);
                const Tensor &x = c.x, &g = c.other, &w = c.w, &b = c.b;
                Tensor &rm = c.rm, &rv = c.rv, &rm2 = c.rm2, &rv2 = c.rv2;
                const auto ref = kernels::batch_norm_forward(x, w, b, rm, rv, 0.1, 1e-5);
                const Tensor want_y = kernels::relu(ref.output);
                const auto f =
                    kernels::batch_norm_relu_forward(non_contiguous(x), w, b, rm2, rv2, 0.1, 1e-5);
                CHECK(same_bits(f.output, want_y));
                CHECK(same_bits(f.save_mean, ref.save_mean));
                CHECK(same_bits(f.save_invstd, ref.save_invstd));
                CHECK(same_bits(rm2, rm));
                CHECK(same_bits(rv2, rv));
                const std::array<bool, 3> all = {true, true, true};
                const auto want = kernels::batch_norm_backward(
                    kernels::relu_backward(g, want_y), x, w, ref.save_mean, ref.save_invstd, all);
                const auto got = kernels::batch_norm_relu_backward(
                    non_contiguous(g), f.output, x, w, f.save_mean, f.save_invstd, all);
                CHECK(same_bits(got.input, want.input));
                CHECK(same_bits(got.weight, want.weight));
                CHECK(same_bits(got.bias, want.bias));
                // Against f64: relu of the reference output, and the reference
                // gradient of grad_y masked where the op's output is 0.
                const std::vector<double> yv = values(f.output);
                std::vector<double> gm = values(g);
                for (size_t i = 0; i < gm.size(); ++i) gm[i] = yv[i] > 0 ? gm[i] : 0;
                const Tensor gmask = from_vector(gm, shape);
                RefNorm r = ref_batch_norm(x, w, b, gmask, 1e-5);
                for (double& v : r.y) v = std::max(v, 0.0);
                check_close(f.output, r.y, rtol_for(dt), rtol_for(dt));
                check_scaled(got.input, r.gx, grad_rtol(dt));
                check_scaled(got.weight, r.gw, std::max(rtol_for(got.weight.dtype()), 1e-5));
                check_scaled(got.bias, r.gb, std::max(rtol_for(got.bias.dtype()), 1e-5));
            }
}

// batch_norm_add_relu_forward (Note [Fused batch norm + ReLU]): batch norm's
// value rounded, the residual added and rounded, then the ReLU, as
// relu(add(batch_norm(x), r)) gives bit for bit.
TEST_CASE("batch_norm_add_relu equals batch_norm, add, relu bit for bit", "[norm][batch_norm]") {
    const Shape shapes[] = {{2, 1, 3}, {5, 3}, {7, 5, 3, 3}, {3, 6, 9, 13}, {4, 16, 28, 28}};
    uint64_t seed = 900;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                FusedCase c = fused_case(shape, dt, affine, seed, -2, 2);
                const Tensor &x = c.x, &r = c.other, &w = c.w, &b = c.b;
                Tensor &rm = c.rm, &rv = c.rv, &rm2 = c.rm2, &rv2 = c.rv2;
                const auto ref = kernels::batch_norm_forward(x, w, b, rm, rv, 0.1, 1e-5);
                const Tensor want = kernels::relu(kernels::add(ref.output, r));
                const auto f = kernels::batch_norm_add_relu_forward(
                    non_contiguous(x), non_contiguous(r), w, b, rm2, rv2, 0.1, 1e-5);
                CHECK(same_bits(f.output, want));
                CHECK(same_bits(f.save_mean, ref.save_mean));
                CHECK(same_bits(f.save_invstd, ref.save_invstd));
                CHECK(same_bits(rm2, rm));
                CHECK(same_bits(rv2, rv));
                // Against f64: max(y + r, 0) of the reference y.
                RefNorm rn = ref_batch_norm(x, w, b, r, 1e-5);
                const std::vector<double> rr = values(r);
                for (size_t i = 0; i < rn.y.size(); ++i) rn.y[i] = std::max(rn.y[i] + rr[i], 0.0);
                check_close(f.output, rn.y, 2 * rtol_for(dt), 2 * rtol_for(dt));
            }
}

TEST_CASE("batch_norm_add_relu errors name the op and the residual", "[norm][errors]") {
    const Tensor x = ones({4, 3, 2});
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_add_relu_forward(x, ones({4, 3}), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_add_relu_forward: residual f32 [4, 3] on cpu must have "
        "the shape and dtype of input f32 [4, 3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_add_relu_forward(x, ones({4, 3, 2}, {DType::f64}),
                                                                 {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_add_relu_forward: residual f64 [4, 3, 2]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_add_relu_forward(x, Tensor(), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_add_relu_forward: residual undefined must have the shape");
}

TEST_CASE("batch_norm_relu keeps relu's signed zeros and NaNs", "[norm][batch_norm]") {
    // A weight of 1e-9 makes every f16 output round to ±0: relu(−0) is −0
    // (−0 < 0 is false), and the fused op must write the same −0.
    const Tensor x = random_tensor({6, 2, 5}, DType::f16, 420, -3, 3);
    const Tensor w = full({2}, 1e-9);
    const Tensor want =
        kernels::relu(kernels::batch_norm_forward(x, w, {}, {}, {}, 0.1, 1e-5).output);
    const Tensor got = kernels::batch_norm_relu_forward(x, w, {}, {}, {}, 0.1, 1e-5).output;
    CHECK(same_bits(got, want));
    int64_t negative_zeros = 0;
    for (double v : values(got)) negative_zeros += v == 0 && std::signbit(v);
    CHECK(negative_zeros > 0);
    // A NaN input makes its channel NaN in both (relu(NaN) = NaN).
    Tensor xn = random_tensor({4, 2, 3}, DType::f32, 421);
    xn.set({1, 0, 2}, NAN);
    const auto fn = kernels::batch_norm_relu_forward(xn, {}, {}, {}, {}, 0.1, 1e-5);
    CHECK(same_bits(
        fn.output,
        kernels::relu(kernels::batch_norm_forward(xn, {}, {}, {}, {}, 0.1, 1e-5).output)));
    CHECK(std::isnan(fn.output.at({0, 0, 0})));
}

TEST_CASE("batch_norm_relu backward agrees with central differences", "[norm][batch_norm]") {
    const DType f64 = DType::f64;
    for (const Shape& shape : {Shape{3, 2, 2}, Shape{4, 3}, Shape{2, 3, 2, 1}}) {
        INFO(shape_str(shape));
        const int64_t C = shape[1];
        const Tensor x = random_tensor(shape, f64, 430, -2, 2), r = random_tensor(shape, f64, 431);
        const Tensor w = random_tensor({C}, f64, 432, 0.5, 2), b = random_tensor({C}, f64, 433);
        auto out = [&](const Tensor& xx, const Tensor& ww, const Tensor& bb) {
            return kernels::batch_norm_relu_forward(xx, ww, bb, {}, {}, 0.1, 1e-3).output;
        };
        const auto f = kernels::batch_norm_relu_forward(x, w, b, {}, {}, 0.1, 1e-3);
        int64_t zeros = 0;  // the ReLU must cut somewhere, or this tests batch norm alone
        for (double v : values(f.output)) zeros += v == 0;
        CHECK(zeros > 0);
        const auto gr = kernels::batch_norm_relu_backward(r, f.output, x, w, f.save_mean,
                                                          f.save_invstd, {true, true, true});
        check_affine_grads(gr, x, w, b, r, out);
    }
}

TEST_CASE("batch_norm_relu errors name the op and the tensors", "[norm][errors]") {
    const Tensor x = random_tensor({4, 3, 2}, DType::f32, 440);
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_forward(ones({1, 3}), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_relu_forward: expected more than 1 value per channel");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_relu_forward(x, ones({4}), {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_relu_forward: expected weight of shape [3]");
    const auto f = kernels::batch_norm_relu_forward(x, {}, {}, {}, {}, 0.1, 1e-5);
    const std::array<bool, 3> all = {true, true, true};
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(x, Tensor(), x, {}, f.save_mean, f.save_invstd, all),
        "batch_norm_relu_backward: output undefined (the forward's) must have the shape and "
        "dtype of input f32 [4, 3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(x, f.output.to(DType::f64), x, {}, f.save_mean,
                                          f.save_invstd, all),
        "batch_norm_relu_backward: output f64 [4, 3, 2] on cpu (the forward's)");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(ones({4, 3}), f.output, x, {}, f.save_mean, f.save_invstd,
                                          all),
        "batch_norm_relu_backward: grad_y f32 [4, 3] on cpu must have the shape");
}


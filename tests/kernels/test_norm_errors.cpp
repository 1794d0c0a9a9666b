// batch_norm's and layer_norm's errors: each names the op, the tensors and
// the problem.
#include <catch2/catch.hpp>

#include "kernels/norm.h"
#include "support/norm_reference.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("batch_norm errors name the op, the tensors and the problem", "[norm][errors]") {
    const Tensor x = random_tensor({4, 3, 2}, DType::f32, 300);
    const Tensor c3 = ones({3}), c4 = ones({4});
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(Tensor(), {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: undefined input");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(ones({5}), {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: expected input [N, C, *], got f32 [5] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_forward(x.to(DType::i32), {}, {}, {}, {}, 0.1, 1e-5),
        "batch_norm_forward: expected a floating-point tensor, got i32");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, c4, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: expected weight of shape [3] (floating) for input "
                            "f32 [4, 3, 2] on cpu, got f32 [4] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_forward(x, {}, c3.to(DType::i64), {}, {}, 0.1, 1e-5),
        "expected bias of shape [3] (floating) for input f32 [4, 3, 2] on cpu, got i64 [3]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_forward(x, {}, {}, c3, {}, 0.1, 1e-5),
        "batch_norm_forward: running_mean and running_var must be given together, "
        "got f32 [3] on cpu and undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, c3, ones({3, 1}), 0.1, 1e-5),
                            "expected running_var of shape [3] (floating)");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, 0),
                            "batch_norm_forward: eps must be > 0, got 0");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, -1e-5),
                            "eps must be > 0");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, {}, {}, {}, {}, 1.5, 1e-5),
                            "batch_norm_forward: momentum must be in [0, 1], got 1.5");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(ones({1, 3}), {}, {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward: expected more than 1 value per channel when "
                            "training, got input f32 [1, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_inference(x, {}, {}, {}, {}, 1e-5),
        "batch_norm_inference: eval mode needs running_mean and running_var, got "
        "undefined and undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_inference(x, {}, {}, c3, c4, 1e-5),
                            "batch_norm_inference: expected running_var of shape [3]");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_inference(x, {}, {}, c3, c3, 0), "eps must be > 0");
    const auto f = kernels::batch_norm_forward(x, {}, {}, {}, {}, 0.1, 1e-5);
    const std::array<bool, 3> all = {true, true, true};
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_backward(ones({4, 3}), x, {}, f.save_mean, f.save_invstd, all),
        "batch_norm_backward: grad_y f32 [4, 3] on cpu must have the shape and "
        "dtype of input f32 [4, 3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_backward(x.to(DType::f64), x, {}, f.save_mean, f.save_invstd, all),
        "batch_norm_backward: grad_y f64 [4, 3, 2]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_backward(x, x, {}, f.save_mean.to(DType::f64), f.save_invstd, all),
        "batch_norm_backward: expected save_mean f32 [3] (the forward's) for input "
        "f32 [4, 3, 2] on cpu, got f64 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_backward(x, x, {}, f.save_mean, Tensor(), all),
                            "expected save_invstd f32 [3] (the forward's) for input f32 [4, 3, 2] "
                            "on cpu, got undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_backward(x, x, c4, f.save_mean, f.save_invstd, all),
                            "batch_norm_backward: expected weight of shape [3]");
}

TEST_CASE("layer_norm errors name the op, the tensors and the problem", "[norm][errors]") {
    const Tensor x = random_tensor({2, 3, 4}, DType::f32, 310);
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(Tensor(), {4}, {}, {}, 1e-5),
                            "layer_norm_forward: undefined input");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x.to(DType::u8), {4}, {}, {}, 1e-5),
                            "layer_norm_forward: expected a floating-point tensor, got u8");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {3}, {}, {}, 1e-5),
                            "layer_norm_forward: normalized_shape [3] must be non-empty and equal "
                            "the trailing dims of input f32 [2, 3, 4] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {}, {}, {}, 1e-5),
                            "normalized_shape [] must be non-empty");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {1, 2, 3, 4}, {}, {}, 1e-5),
                            "normalized_shape [1, 2, 3, 4] must be non-empty");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {3, 4}, ones({12}), {}, 1e-5),
                            "layer_norm_forward: expected weight of shape [3, 4] (floating) for "
                            "input f32 [2, 3, 4] on cpu, got f32 [12] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {4}, {}, ones({4}, {DType::i32}), 1e-5),
                            "expected bias of shape [4] (floating)");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {4}, {}, {}, 0),
                            "layer_norm_forward: eps must be > 0, got 0");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {4}, {}, {}, NAN), "eps must be > 0");
    const auto f = kernels::layer_norm_forward(x, {4}, {}, {}, 1e-5);
    const std::array<bool, 3> all = {true, true, true};
    REQUIRE_THROWS_WITH_MSG(
        kernels::layer_norm_backward(ones({2, 3}), x, {4}, {}, f.mean, f.rstd, all),
        "layer_norm_backward: grad_y f32 [2, 3] on cpu must have the shape and dtype");
    REQUIRE_THROWS_WITH_MSG(
        kernels::layer_norm_backward(x, x, {4}, {}, f.mean.view({2, 3}), f.rstd, all),
        "layer_norm_backward: expected mean f32 [2, 3, 1] (the forward's) for "
        "input f32 [2, 3, 4] on cpu, got f32 [2, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::layer_norm_backward(x, x, {4}, {}, f.mean, f.rstd.to(DType::f64), all),
        "expected rstd f32 [2, 3, 1] (the forward's)");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_backward(x, x, {3, 4}, {}, f.mean, f.rstd, all),
                            "expected mean f32 [2, 1, 1]");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_backward(x, x, {2, 4}, {}, f.mean, f.rstd, all),
                            "layer_norm_backward: normalized_shape [2, 4] must be non-empty");
}

// Note [Channels-last batch norm] (kernels/cpu/norm.cpp): a channels-last
// input is normalized as it lies and its results keep the format; the values
// are the NCHW kernels' (tested above against f64 loops) up to the order of
// the channel sums, and bit-identical for any thread count.

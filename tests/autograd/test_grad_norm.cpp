// Gradients of batch norm (training and eval), batch norm + ReLU (and + a
// residual), layer norm
// and dropout by gradcheck, plus batch norm's running-statistics update
// against an f64 reference, batch_norm_relu and ConvBNReLU against the
// unfused ops, and dropout's mask rules (identity cases, keep fraction, seeding).
#include <cmath>

#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

// Per-channel mean and biased variance of x [N, C, *] (f64 reference).
void channel_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var,
                   int64_t& n) {
    const int64_t c = x.size(1);
    const std::vector<double> v = values(x);
    n = x.numel() / c;
    const int64_t inner = n / x.size(0);  // elements per (sample, channel)
    mean.assign(size_t(c), 0.0);
    var.assign(size_t(c), 0.0);
    for (size_t i = 0; i < v.size(); ++i) mean[size_t(int64_t(i) / inner % c)] += v[i];
    for (double& m : mean) m /= double(n);
    for (size_t i = 0; i < v.size(); ++i) {
        const size_t ch = size_t(int64_t(i) / inner % c);
        var[ch] += (v[i] - mean[ch]) * (v[i] - mean[ch]);
    }
    for (double& s : var) s /= double(n);
}

}  // namespace

TEST_CASE("grad: batch_norm in training mode", "[grad][norm]") {
    const Shape shapes[] = {{4, 3}, {2, 3, 3, 2}, {3, 2, 5}, {2, 3, 1, 1}};
    uint64_t seed = 200;
    for (const Shape& s : shapes) {
        const int64_t c = s[1];
        const Tensor x = leaf(s, seed++), w = leaf({c}, seed++, 0.5, 2.0), b = leaf({c}, seed++);
        // Running stats undefined: each forward would otherwise update them.
        const GradFn fn = [](const std::vector<Tensor>& in) {
            return batch_norm(in[0], {}, {}, in[1], in[2], true, 0.1, 1e-5);
        };
        INFO("x " << shape_str(s));
        check_grad(fn, {x, w, b});
        check_grad(fn, {x, Tensor(), Tensor()});                              // no weight, bias
        check_grad(fn, {constant(s, seed - 3), w, constant({c}, seed - 1)});  // weight only
    }
    INFO("strided input view");
    check_grad(
        [](const std::vector<Tensor>& in) {
            return batch_norm(in[0].transpose(0, 1), {}, {}, in[1], in[2], true);
        },
        {leaf({3, 5}, 210), leaf({3}, 211), leaf({3}, 212)});
}

TEST_CASE("batch_norm training updates the running statistics", "[grad][norm]") {
    const Tensor x = leaf({3, 2, 2, 2}, 220);
    const Tensor w = leaf({2}, 221), b = leaf({2}, 222);
    const Tensor rm = random_tensor({2}, DType::f64, 223);
    const Tensor rv = random_tensor({2}, DType::f64, 224, 0.5, 2.0);
    std::vector<double> m0 = values(rm), v0 = values(rv);
    std::vector<double> mean, var;
    int64_t n = 0;
    channel_stats(x, mean, var, n);
    const double momentum = 0.3, eps = 1e-5;
    const Tensor y = batch_norm(x, rm, rv, w, b, true, momentum, eps);
    std::vector<double> want_m(2), want_v(2);
    for (size_t c = 0; c < 2; ++c) {
        want_m[c] = (1 - momentum) * m0[c] + momentum * mean[c];
        // PyTorch's rule: the running variance takes the unbiased batch variance.
        want_v[c] = (1 - momentum) * v0[c] + momentum * var[c] * double(n) / double(n - 1);
    }
    check_close(rm, want_m, 1e-12, 1e-12);
    check_close(rv, want_v, 1e-12, 1e-12);
    CHECK_FALSE(rm.requires_grad());
    // The output normalizes with the biased batch variance, not the running one.
    const std::vector<double> xv = values(x), wv = values(w), bv = values(b);
    std::vector<double> want_y(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
        const size_t c = i / 4 % 2;
        want_y[i] = (xv[i] - mean[c]) / std::sqrt(var[c] + eps) * wv[c] + bv[c];
    }
    check_close(y, want_y, 1e-10, 1e-12);
    // A second forward moves them again from the updated values.
    batch_norm(x, rm, rv, w, b, true, momentum, eps);
    for (size_t c = 0; c < 2; ++c) {
        want_m[c] = (1 - momentum) * want_m[c] + momentum * mean[c];
        want_v[c] = (1 - momentum) * want_v[c] + momentum * var[c] * double(n) / double(n - 1);
    }
    check_close(rm, want_m, 1e-12, 1e-12);
    check_close(rv, want_v, 1e-12, 1e-12);
    // f32 running stats with a 2-d input (n = N).
    const Tensor x2 = leaf({5, 3}, 225);
    const Tensor rm32 = zeros({3}, {DType::f32}), rv32 = ones({3}, {DType::f32});
    batch_norm(x2, rm32, rv32, {}, {}, true, 0.1, eps);
    channel_stats(x2, mean, var, n);
    std::vector<double> wm(3), wv2(3);
    for (size_t c = 0; c < 3; ++c) {
        wm[c] = 0.1 * mean[c];
        wv2[c] = 0.9 + 0.1 * var[c] * 5.0 / 4.0;
    }
    check_close(rm32, wm, 1e-6, 1e-7);
    check_close(rv32, wv2, 1e-6, 1e-7);
}

TEST_CASE("grad: batch_norm in eval mode uses the running statistics", "[grad][norm]") {
    const Shape shapes[] = {{4, 3}, {2, 3, 3, 2}};
    uint64_t seed = 230;
    for (const Shape& s : shapes) {
        const int64_t c = s[1];
        const Tensor rm = random_tensor({c}, DType::f64, seed++);
        const Tensor rv = random_tensor({c}, DType::f64, seed++, 0.5, 2.0);
        const std::vector<double> m0 = values(rm), v0 = values(rv);
        const Tensor x = leaf(s, seed++), w = leaf({c}, seed++), b = leaf({c}, seed++);
        const GradFn fn = [&](const std::vector<Tensor>& in) {
            return batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-3);
        };
        INFO("x " << shape_str(s));
        check_grad(fn, {x, w, b});
        check_grad(fn, {x, Tensor(), Tensor()});
        check_grad(fn, {constant(s, seed - 3), w, b});
        // Eval mode leaves the running statistics alone.
        check_close(rm, m0, 0, 0);
        check_close(rv, v0, 0, 0);
    }
    REQUIRE_THROWS_WITH_MSG(batch_norm(leaf({2, 3}, 240), {}, {}, {}, {}, false),
                            "batch_norm: evaluation mode needs running_mean and running_var");
    INFO("strided input view");
    const Tensor rm = random_tensor({3}, DType::f64, 241);
    const Tensor rv = random_tensor({3}, DType::f64, 242, 0.5, 2.0);
    check_grad(
        [&](const std::vector<Tensor>& in) {
            return batch_norm(in[0].transpose(0, 1), rm, rv, in[1], in[2], false);
        },
        {leaf({3, 5}, 243), leaf({3}, 244), leaf({3}, 245)});
}

TEST_CASE("grad: batch_norm_add_relu in training and eval mode", "[grad][norm]") {
    const Shape shapes[] = {{4, 3}, {2, 3, 3, 2}, {3, 2, 5}};
    uint64_t seed = 700;
    for (const Shape& s : shapes) {
        const int64_t c = s[1];
        const Tensor x = leaf(s, seed++), r = leaf(s, seed++);
        const Tensor w = leaf({c}, seed++, -2.0, 2.0), b = leaf({c}, seed++);
        const GradFn fn = [](const std::vector<Tensor>& in) {
            return batch_norm_add_relu(in[0], in[1], {}, {}, in[2], in[3], true, 0.1, 1e-5);
        };
        INFO("x " << shape_str(s));
        check_grad(fn, {x, r, w, b});
        check_grad(fn, {x, r, Tensor(), Tensor()});
        check_grad(fn, {constant(s, seed - 4), r, w, b});  // only the residual and affine
        check_grad(fn, {x, constant(s, seed - 3), w, b});  // the residual constant
        const Tensor rm = random_tensor({c}, DType::f64, seed++);
        const Tensor rv = random_tensor({c}, DType::f64, seed++, 0.5, 2.0);
        check_grad(
            [&](const std::vector<Tensor>& in) {
                return batch_norm_add_relu(in[0], in[1], rm, rv, in[2], in[3], false, 0.1, 1e-3);
            },
            {x, r, w, b});
    }
}

TEST_CASE("grad: batch_norm_relu in training and eval mode", "[grad][norm]") {
    const Shape shapes[] = {{4, 3}, {2, 3, 3, 2}, {3, 2, 5}, {2, 3, 1, 1}};
    uint64_t seed = 300;
    for (const Shape& s : shapes) {
        const int64_t c = s[1];
        const Tensor x = leaf(s, seed++), w = leaf({c}, seed++, -2.0, 2.0), b = leaf({c}, seed++);
        const GradFn fn = [](const std::vector<Tensor>& in) {
            return batch_norm_relu(in[0], {}, {}, in[1], in[2], true, 0.1, 1e-5);
        };
        INFO("x " << shape_str(s));
        check_grad(fn, {x, w, b});
        check_grad(fn, {x, Tensor(), Tensor()});
        check_grad(fn, {constant(s, seed - 3), w, b});
        const Tensor rm = random_tensor({c}, DType::f64, seed++);
        const Tensor rv = random_tensor({c}, DType::f64, seed++, 0.5, 2.0);
        check_grad(
            [&](const std::vector<Tensor>& in) {
                return batch_norm_relu(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-3);
            },
            {x, w, b});
    }
    INFO("strided input view");
    check_grad(
        [](const std::vector<Tensor>& in) {
            return batch_norm_relu(in[0].transpose(0, 1), {}, {}, in[1], in[2], true);
        },
        {leaf({3, 5}, 320), leaf({3}, 321), leaf({3}, 322)});
}

TEST_CASE("batch_norm_relu equals relu(batch_norm) through autograd", "[grad][norm]") {
    // f32, as training runs: values, running statistics and every gradient
    // the same bits (Note [Fused batch norm + ReLU] in kernels/norm.h).
    auto f32_leaf = [](const Shape& s, uint64_t seed, double lo, double hi) {
        Tensor t = random_tensor(s, DType::f32, seed, lo, hi);
        t.set_requires_grad(true);
        return t;
    };
    const Shape s{8, 5, 6, 7};
    const Tensor x = f32_leaf(s, 330, -2, 3), w = f32_leaf({5}, 331, -2, 2),
                 b = f32_leaf({5}, 332, -1, 1);
    const Tensor g = random_tensor(s, DType::f32, 333);
    Tensor rm1 = zeros({5}), rv1 = ones({5}), rm2 = zeros({5}), rv2 = ones({5});
    const Tensor y1 = batch_norm_relu(x, rm1, rv1, w, b, true, 0.1, 1e-5);
    REQUIRE(y1.grad_fn() != nullptr);
    CHECK(y1.grad_fn()->name == "batch_norm_relu");
    y1.backward(g);
    const std::vector<Tensor> g1 = {x.grad(), w.grad(), b.grad()};
    for (const Tensor& t : {x, w, b}) t.set_grad({});
    const Tensor y2 = relu(batch_norm(x, rm2, rv2, w, b, true, 0.1, 1e-5));
    y2.backward(g);
    const std::vector<Tensor> g2 = {x.grad(), w.grad(), b.grad()};
    check_close(y1, y2, 0, 0);
    check_close(rm1, rm2, 0, 0);
    check_close(rv1, rv2, 0, 0);
    for (size_t i = 0; i < 3; ++i) {
        INFO("gradient " << i);
        check_close(g1[i], g2[i], 0, 0);
    }
    // Eval mode: batch_norm from the running statistics, then relu.
    NoGradGuard no_grad;
    check_close(batch_norm_relu(x, rm1, rv1, w, b, false, 0.1, 1e-5),
                relu(batch_norm(x, rm1, rv1, w, b, false, 0.1, 1e-5)), 0, 0);
}

TEST_CASE("ConvBNReLU trains as Conv2d, BatchNorm2d, ReLU would", "[grad][norm][convbn]") {
    // The block uses batch_norm_relu in training; a Sequential of the three
    // layers with the same weights is the reference (bit for bit on the CPU).
    nn::ConvBNReLU block(3, 6, 3, {.padding = 1});
    nn::Sequential ref(nn::Conv2d(3, 6, 3, {.padding = 1, .bias = false}), nn::BatchNorm2d(6),
                       nn::ReLU());
    const auto ref_conv = std::dynamic_pointer_cast<nn::Conv2d>(ref[0]);
    const auto ref_bn = std::dynamic_pointer_cast<nn::BatchNorm2d>(ref[1]);
    {
        NoGradGuard no_grad;
        ref_conv->weight.copy_(block.conv->weight);
        block.bn->weight.copy_(random_tensor({6}, DType::f32, 341, 0.5, 2));
        block.bn->bias.copy_(random_tensor({6}, DType::f32, 342, -1, 1));
        ref_bn->weight.copy_(block.bn->weight);
        ref_bn->bias.copy_(block.bn->bias);
    }
    for (int step = 0; step < 2; ++step) {
        INFO("step " << step);
        const Tensor x = random_tensor({4, 3, 9, 9}, DType::f32, 343 + uint64_t(step));
        const Tensor g = random_tensor({4, 6, 9, 9}, DType::f32, 345 + uint64_t(step));
        block.zero_grad();
        ref.zero_grad();
        const Tensor y = block(x), want = ref(x);
        CHECK(y.grad_fn()->name == "batch_norm_relu");
        check_close(y, want, 0, 0);
        y.backward(g);
        want.backward(g);
        check_close(block.conv->weight.grad(), ref_conv->weight.grad(), 0, 0);
        check_close(block.bn->weight.grad(), ref_bn->weight.grad(), 0, 0);
        check_close(block.bn->bias.grad(), ref_bn->bias.grad(), 0, 0);
        check_close(block.bn->running_mean, ref_bn->running_mean, 0, 0);
        check_close(block.bn->running_var, ref_bn->running_var, 0, 0);
        CHECK(block.bn->num_batches_tracked.item() == double(step + 1));
    }
    // Eval: running statistics, then relu, as the reference.
    block.eval();
    ref.eval();
    NoGradGuard no_grad;
    const Tensor x = random_tensor({2, 3, 9, 9}, DType::f32, 350);
    check_close(block(x), ref(x), 0, 0);
    CHECK(block.bn->num_batches_tracked.item() == 2);
}

TEST_CASE("grad: layer_norm over 1, 2 and 3 trailing dims", "[grad][norm]") {
    struct Case {
        Shape x, normalized;
    };
    const Case cases[] = {
        {{3, 4}, {4}}, {{2, 3, 4}, {3, 4}}, {{2, 2, 3, 2}, {2, 3, 2}},
        {{5}, {5}},    {{4, 1}, {1}},  // one element per row: x̂ = 0
        {{0, 3}, {3}},                 // no rows: zero gradients for weight and bias
    };
    uint64_t seed = 250;
    for (const Case& c : cases) {
        const Tensor x = leaf(c.x, seed++);
        const Tensor w = leaf(c.normalized, seed++), b = leaf(c.normalized, seed++);
        const GradFn fn = [&](const std::vector<Tensor>& in) {
            return layer_norm(in[0], c.normalized, in[1], in[2], 1e-5);
        };
        INFO("x " << shape_str(c.x) << " over " << shape_str(c.normalized));
        check_grad(fn, {x, w, b});
        check_grad(fn, {x, Tensor(), Tensor()});
        check_grad(fn, {x, w, Tensor()});
        check_grad(fn, {constant(c.x, seed), w, b});
    }
    INFO("strided input view");
    check_grad(
        [](const std::vector<Tensor>& in) {
            return layer_norm(in[0].transpose(0, 1), {3}, in[1], in[2]);
        },
        {leaf({3, 4}, 260), leaf({3}, 261), leaf({3}, 262)});
}

TEST_CASE("grad: dropout with a re-seeded generator", "[grad][dropout]") {
    for (double p : {0.3, 0.6}) {
        INFO("p = " << p);
        const Tensor x = leaf_away_from_zero({3, 4, 5}, 270);
        const GradFn fn = [p](const std::vector<Tensor>& in) {
            Generator g(7);  // the same mask on every call
            return dropout(in[0], p, true, &g);
        };
        check_grad(fn, {x});
        // d y / d x is 1 / (1 − p) where kept, 0 where dropped.
        const Tensor y = fn({x});
        const std::vector<double> yv = values(y), xv = values(x);
        const std::vector<double> g = values(grads_of(fn, {x})[0]);
        int64_t kept = 0;
        for (size_t i = 0; i < g.size(); ++i) {
            const bool k = yv[i] != 0;
            kept += k;
            CHECK(g[i] == (k ? 1 / (1 - p) : 0.0));
            if (k) CHECK(yv[i] == Approx(xv[i] / (1 - p)).epsilon(1e-14));
        }
        CHECK(kept > 0);
        CHECK(kept < x.numel());
    }
}

TEST_CASE("dropout: identity and all-dropped cases", "[grad][dropout]") {
    const Tensor x = leaf({4, 5}, 280);
    const std::vector<double> xv = values(x);
    const GradFn eval = [](const std::vector<Tensor>& in) { return dropout(in[0], 0.5, false); };
    const GradFn p0 = [](const std::vector<Tensor>& in) { return dropout(in[0], 0.0, true); };
    for (const GradFn& fn : {eval, p0}) {
        check_close(fn({x}), xv, 0, 0);
        check_close(grads_of(fn, {x})[0], std::vector<double>(xv.size(), 1.0), 0, 0);
        check_grad(fn, {x});
    }
    const GradFn p1 = [](const std::vector<Tensor>& in) { return dropout(in[0], 1.0, true); };
    const Tensor y = p1({x});
    CHECK(y.requires_grad());
    check_close(y, std::vector<double>(xv.size(), 0.0), 0, 0);
    check_close(grads_of(p1, {x})[0], std::vector<double>(xv.size(), 0.0), 0, 0);
    check_grad(p1, {x});
    for (double bad : {-0.1, 1.5, double(NAN)})
        REQUIRE_THROWS_WITH_MSG(dropout(x, bad, true), "dropout: p must be in [0, 1], got");
}

TEST_CASE("dropout: keep fraction, fresh masks and manual_seed", "[grad][dropout]") {
    const Tensor x = ones({200000}, {DType::f32});
    const double p = 0.3;
    manual_seed(1234);
    const std::vector<float> a = dropout(x, p, true).to_vector<float>();
    const std::vector<float> b = dropout(x, p, true).to_vector<float>();
    int64_t kept = 0, differ = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        kept += a[i] != 0;
        differ += (a[i] != 0) != (b[i] != 0);
        if (a[i] != 0) REQUIRE(a[i] == float(1 / (1 - p)));
    }
    // The kept fraction has standard deviation sqrt(p(1−p)/n) ≈ 0.001.
    CHECK(std::abs(double(kept) / double(a.size()) - (1 - p)) < 0.01);
    // Two independent masks disagree on a fraction 2p(1−p) = 0.42 of elements.
    CHECK(std::abs(double(differ) / double(a.size()) - 2 * p * (1 - p)) < 0.01);
    manual_seed(1234);
    const std::vector<float> c = dropout(x, p, true).to_vector<float>();
    const bool repeats = c == a;
    CHECK(repeats);
    // An explicit generator does not touch the default one's stream.
    Generator g(99);
    const std::vector<float> d = dropout(x, p, true, &g).to_vector<float>();
    const bool other_stream = d != a;
    CHECK(other_stream);
    const bool default_untouched = dropout(x, p, true).to_vector<float>() == b;
    CHECK(default_untouched);
}

TEST_CASE("grad: a channels-last conv, batch norm, ReLU and residual block", "[grad][norm][format]") {
    // f64 leaves made channels-last: conv2d (NCHW kernels, converted back),
    // then batch norm's channels-last kernels (fused ReLU, fused residual).
    const Tensor x = leaf({2, 3, 5, 4}, 70), w = leaf({4, 3, 3, 3}, 71);
    const Tensor g = leaf({4}, 72), b = leaf({4}, 73), r = leaf({2, 4, 5, 4}, 74);
    check_grad(
        [](const std::vector<Tensor>& in) {
            const Tensor y = conv2d(in[0].contiguous(MemoryFormat::channels_last), in[1], {},
                                    {1, 1}, {1, 1});
            REQUIRE(y.suggest_memory_format() == MemoryFormat::channels_last);
            const Tensor h = batch_norm_relu(y, {}, {}, in[2], in[3], true);
            return batch_norm_add_relu(h, in[4].contiguous(MemoryFormat::channels_last), {}, {},
                                       in[2], in[3], true);
        },
        {x, w, g, b, r});
}

// The parametric layers against naive f64 loops written here: Linear,
// Conv2d (padding, stride, dilation, groups), BatchNorm2d (batch and running
// statistics, momentum, eval), LayerNorm and Embedding, plus their errors.
#include <cmath>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// y[r, o] = Σ_i x[r, i]·W[o, i] + b[o] over the rows of x [..., in].
std::vector<double> reference_linear(const Tensor& x, const Tensor& w, const Tensor& b) {
    const int64_t in = w.size(1), out = w.size(0), rows = x.numel() / in;
    const std::vector<double> vx = values(x), vw = values(w);
    const std::vector<double> vb = b.defined() ? values(b) : std::vector<double>(size_t(out), 0.0);
    std::vector<double> y;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t o = 0; o < out; ++o) {
            double acc = vb[size_t(o)];
            for (int64_t i = 0; i < in; ++i) acc += vx[size_t(r * in + i)] * vw[size_t(o * in + i)];
            y.push_back(acc);
        }
    return y;
}

struct ConvGeom {
    int64_t stride, padding, dilation, groups;
};

// Direct convolution: out[n, o, y, x] = b[o] + Σ over the group's input
// channels and the kernel taps that land inside the input.
std::vector<double> reference_conv(const Tensor& x, const Tensor& w, const Tensor& b, ConvGeom g,
                                   Shape* out_shape) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3);
    const int64_t OH = (H + 2 * g.padding - g.dilation * (KH - 1) - 1) / g.stride + 1;
    const int64_t OW = (W + 2 * g.padding - g.dilation * (KW - 1) - 1) / g.stride + 1;
    *out_shape = {N, O, OH, OW};
    const std::vector<double> vx = values(x), vw = values(w);
    std::vector<double> out;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o) {
            const int64_t c0 = (o / (O / g.groups)) * CG;
            for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OW; ++ox) {
                    double acc = b.defined() ? b.at({o}) : 0.0;
                    for (int64_t c = 0; c < CG; ++c)
                        for (int64_t i = 0; i < KH; ++i)
                            for (int64_t j = 0; j < KW; ++j) {
                                const int64_t iy = oy * g.stride - g.padding + i * g.dilation;
                                const int64_t ix = ox * g.stride - g.padding + j * g.dilation;
                                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                                acc += vx[size_t(((n * C + c0 + c) * H + iy) * W + ix)] *
                                       vw[size_t(((o * CG + c) * KH + i) * KW + j)];
                            }
                    out.push_back(acc);
                }
        }
    (void)C;
    return out;
}

// Per-channel mean and variance (biased when `unbiased` is false) of x [N, C, H, W].
std::pair<std::vector<double>, std::vector<double>> channel_stats(const Tensor& x, bool unbiased) {
    const int64_t N = x.size(0), C = x.size(1), HW = x.size(2) * x.size(3);
    const std::vector<double> v = values(x);
    std::vector<double> mean(size_t(C), 0.0), var(size_t(C), 0.0);
    for (int64_t c = 0; c < C; ++c) {
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < HW; ++k) mean[size_t(c)] += v[size_t((n * C + c) * HW + k)];
        mean[size_t(c)] /= double(N * HW);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < HW; ++k) {
                const double d = v[size_t((n * C + c) * HW + k)] - mean[size_t(c)];
                var[size_t(c)] += d * d;
            }
        var[size_t(c)] /= double(N * HW - (unbiased ? 1 : 0));
    }
    return {mean, var};
}

}  // namespace

TEST_CASE("Linear: x·Wᵀ + b against loops", "[nn][layers]") {
    for (DType dt : {DType::f32, DType::f64}) {
        nn::Linear lin(7, 5, {.dtype = dt});
        CHECK(lin.weight.shape() == Shape{5, 7});
        CHECK(lin.bias.shape() == Shape{5});
        CHECK(lin.weight.dtype() == dt);
        const Tensor x = random_tensor({6, 7}, dt, 10);
        check_close(lin(x), reference_linear(x, lin.weight, lin.bias), rtol_for(dt), 1e-6);
        const Tensor xs = non_contiguous(x);
        REQUIRE_FALSE(xs.is_contiguous());
        check_close(lin(xs), reference_linear(x, lin.weight, lin.bias), rtol_for(dt), 1e-6);
        const Tensor x3 = random_tensor({2, 1, 3, 7}, dt, 11);  // leading dims kept
        const Tensor y3 = lin(x3);
        CHECK(y3.shape() == Shape{2, 1, 3, 5});
        check_close(y3, reference_linear(x3, lin.weight, lin.bias), rtol_for(dt), 1e-6);
    }
    nn::Linear nobias(4, 1, {.bias = false});
    CHECK_FALSE(nobias.bias.defined());
    CHECK(nobias.named_parameters().size() == 1);
    const Tensor x = random_tensor({3, 4}, DType::f32, 12);
    check_close(nobias(x), reference_linear(x, nobias.weight, {}));
    CHECK(nobias(zeros({0, 4})).shape() == Shape{0, 1});
    CHECK(nobias.describe() == "Linear(in=4, out=1, bias=false)");
}

TEST_CASE("Linear: relu option is one fused op with the same parameters", "[nn][layers]") {
    nn::Linear plain(7, 5), fused(7, 5, {.relu = true});
    CHECK(fused.describe() == "Linear(in=7, out=5, bias=true, relu=true)");
    CHECK(fused.named_parameters().size() == plain.named_parameters().size());
    fused.weight.detach().copy_(plain.weight.detach());
    fused.bias.detach().copy_(plain.bias.detach());
    const Tensor x = random_tensor({6, 7}, DType::f32, 20);
    const Tensor want = relu(plain(x));
    const Tensor y = fused(x);
    check_close(y, want, 0, 0);
    bool some_zero = false, some_positive = false;
    for (double v : values(y)) (v == 0 ? some_zero : some_positive) = true;
    CHECK((some_zero && some_positive));  // the ReLU cuts somewhere
    REQUIRE(y.grad_fn() != nullptr);
}

TEST_CASE("Sequential: a Linear followed by a ReLU runs as one op", "[nn][layers]") {
    nn::Sequential seq(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 3), nn::ReLU());
    CHECK(seq.named_parameters().size() == 4);  // names and parameters as before: 0.*, 2.*
    const auto l0 = std::dynamic_pointer_cast<nn::Linear>(seq[0]);
    const auto l2 = std::dynamic_pointer_cast<nn::Linear>(seq[2]);
    REQUIRE((l0 && l2));
    const Tensor x = random_tensor({5, 6}, DType::f32, 21);
    const Tensor y = seq(x);
    REQUIRE(y.grad_fn() != nullptr);
    CHECK(y.grad_fn()->name == "linear_relu");
    // The same bits as the two ops one by one, forward and backward.
    const Tensor want = relu(linear(relu(linear(x, l0->weight, l0->bias)), l2->weight, l2->bias));
    check_close(y, want, 0, 0);
    const Tensor g = random_tensor({5, 3}, DType::f32, 22);
    y.backward(g);
    const Tensor gw0 = l0->weight.grad().clone(), gb2 = l2->bias.grad().clone();
    seq.zero_grad();
    want.backward(g);
    check_close(l0->weight.grad(), gw0, 0, 0);
    check_close(l2->bias.grad(), gb2, 0, 0);
}

TEST_CASE("Sequential: a Linear followed by a GELU(tanh) runs as one op", "[nn][layers]") {
    nn::Sequential seq(nn::Linear(6, 8), nn::GELU(GeluApprox::tanh), nn::Linear(8, 3), nn::GELU());
    const auto l0 = std::dynamic_pointer_cast<nn::Linear>(seq[0]);
    const auto l2 = std::dynamic_pointer_cast<nn::Linear>(seq[2]);
    REQUIRE((l0 && l2));
    const Tensor x = random_tensor({5, 6}, DType::f32, 23);
    const Tensor y = seq(x);
    CHECK(y.grad_fn()->name == "gelu");  // the exact GELU is not fused
    const Tensor want =
        gelu(linear(gelu(linear(x, l0->weight, l0->bias), GeluApprox::tanh), l2->weight, l2->bias));
    check_close(y, want, 0, 0);
    const Tensor g = random_tensor({5, 3}, DType::f32, 24);
    y.backward(g);
    const Tensor gw0 = l0->weight.grad().clone(), gb0 = l0->bias.grad().clone();
    seq.zero_grad();
    want.backward(g);
    check_close(l0->weight.grad(), gw0, 0, 0);
    check_close(l0->bias.grad(), gb0, 0, 0);
    // The fused pair is one node.
    nn::Sequential pair(nn::Linear(6, 8), nn::GELU(GeluApprox::tanh));
    CHECK(pair(x).grad_fn()->name == "linear_gelu");
}

TEST_CASE("Linear: errors name the sizes", "[nn][layers]") {
    nn::Linear lin(3, 4);
    REQUIRE_THROWS_WITH_MSG(lin(zeros({5, 7})),
                            "Linear(in=3, out=4): input of shape [5, 7] does not end in 3");
    REQUIRE_THROWS_WITH_MSG(lin(zeros({})),
                            "Linear(in=3, out=4): input of shape [] does not end in 3");
    REQUIRE_THROWS_WITH_MSG(lin(Tensor()),
                            "Linear(in=3, out=4): input of shape undefined does not end in 3");
    REQUIRE_THROWS_WITH_MSG(nn::Linear(0, 4), "Linear: in_features must be positive, got 0");
    REQUIRE_THROWS_WITH_MSG(nn::Linear(3, -1), "Linear: out_features must be positive, got -1");
}

TEST_CASE("Conv2d: one channel, 3×3, against loops", "[nn][layers]") {
    nn::Conv2d conv(1, 1, 3, {.padding = 1});
    CHECK(conv.weight.shape() == Shape{1, 1, 3, 3});
    REQUIRE(conv.bias.defined());
    const Tensor x = random_tensor({2, 1, 5, 6}, DType::f32, 20);
    Shape shape;
    const std::vector<double> want =
        reference_conv(x, conv.weight, conv.bias, {1, 1, 1, 1}, &shape);
    const Tensor y = conv(x);
    CHECK(y.shape() == Shape{2, 1, 5, 6});
    check_close(y, want);
    check_close(conv(non_contiguous(x)), want);
    CHECK(conv(zeros({0, 1, 5, 6})).shape() == Shape{0, 1, 5, 6});

    // Spelled out for one interior and one corner element, independent of the loop above.
    const double b = conv.bias.at({0});
    double interior = b, corner = b;
    for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 3; ++j) {
            interior += x.at({1, 0, 1 + i, 2 + j}) * conv.weight.at({0, 0, i, j});
            if (i >= 1 && j >= 1)
                corner += x.at({1, 0, i - 1, j - 1}) * conv.weight.at({0, 0, i, j});
        }
    CHECK(y.at({1, 0, 2, 3}) == Approx(interior).epsilon(1e-5));
    CHECK(y.at({1, 0, 0, 0}) == Approx(corner).epsilon(1e-5));
}

TEST_CASE("Conv2d: channels, stride, dilation and groups against loops", "[nn][layers]") {
    struct Case {
        int64_t in, out, k;
        ConvGeom g;
        bool bias;
        Shape input;
    };
    const Case cases[] = {
        {3, 4, 3, {2, 1, 1, 1}, true, {2, 3, 7, 8}},
        {4, 6, 3, {1, 2, 2, 2}, false, {1, 4, 6, 5}},
        {2, 2, 1, {1, 0, 1, 2}, true, {3, 2, 1, 1}},
        {1, 3, 5, {1, 0, 1, 1}, true, {1, 1, 5, 5}},
    };
    for (const Case& c : cases) {
        INFO("in " << c.in << " out " << c.out << " k " << c.k << " groups " << c.g.groups);
        nn::Conv2d conv(c.in, c.out, c.k,
                        {.stride = c.g.stride,
                         .padding = c.g.padding,
                         .dilation = c.g.dilation,
                         .groups = c.g.groups,
                         .bias = c.bias,
                         .dtype = DType::f64});
        CHECK(conv.weight.shape() == Shape{c.out, c.in / c.g.groups, c.k, c.k});
        CHECK(conv.bias.defined() == c.bias);
        const Tensor x = random_tensor(c.input, DType::f64, 21);
        Shape shape;
        const std::vector<double> want = reference_conv(x, conv.weight, conv.bias, c.g, &shape);
        const Tensor y = conv(x);
        CHECK(y.shape() == shape);
        check_close(y, want, 1e-12, 1e-12);
    }
    nn::Conv2d rect(2, 3, {1, 3}, {.stride = {1, 2}, .padding = {0, 1}});
    CHECK(rect.weight.shape() == Shape{3, 2, 1, 3});
    CHECK(rect(zeros({1, 2, 4, 6})).shape() == Shape{1, 3, 4, 3});
    CHECK(rect.describe() ==
          "Conv2d(2, 3, kernel=(1, 3), stride=(1, 2), padding=(0, 1), bias=true)");
}

TEST_CASE("Conv2d: errors", "[nn][layers]") {
    REQUIRE_THROWS_WITH_MSG(nn::Conv2d(4, 6, 3, {.groups = 3}),
                            "Conv2d: groups = 3 must divide in_channels = 4 and out_channels = 6");
    REQUIRE_THROWS_WITH_MSG(nn::Conv2d(6, 4, 3, {.groups = 3}),
                            "Conv2d: groups = 3 must divide in_channels = 6 and out_channels = 4");
    REQUIRE_THROWS_WITH_MSG(nn::Conv2d(4, 4, 3, {.groups = 0}),
                            "Conv2d: groups must be positive, got 0");
    REQUIRE_THROWS_WITH_MSG(nn::Conv2d(0, 4, 3), "Conv2d: in_channels must be positive, got 0");
    REQUIRE_THROWS_WITH_MSG(nn::Conv2d(1, 4, {3, 0}), "Conv2d: kernel size must be positive");
    nn::Conv2d conv(3, 4, 3);
    REQUIRE_THROWS_WITH_MSG(conv(zeros({1, 2, 5, 5})),
                            "expects 3 input channels, got input f32 [1, 2, 5, 5]");
}

TEST_CASE("BatchNorm2d: batch statistics, running statistics, eval", "[nn][layers]") {
    nn::BatchNorm2d bn(3);
    CHECK(values(bn.weight) == std::vector<double>{1, 1, 1});
    CHECK(values(bn.bias) == std::vector<double>{0, 0, 0});
    CHECK(values(bn.running_mean) == std::vector<double>{0, 0, 0});
    CHECK(values(bn.running_var) == std::vector<double>{1, 1, 1});
    CHECK(bn.num_batches_tracked.dtype() == DType::i64);
    CHECK(bn.num_batches_tracked.item() == 0);

    // Training: the output has per-channel mean 0 and (biased) variance 1.
    std::vector<double> rm(3, 0.0), rv(3, 1.0);
    for (int step = 0; step < 2; ++step) {
        const Tensor x = random_tensor({4, 3, 5, 6}, DType::f32, uint64_t(30 + step), -1.0, 3.0);
        const Tensor y = bn(x);
        auto [ym, yv] = channel_stats(y, false);
        for (int c = 0; c < 3; ++c) {
            CHECK(ym[size_t(c)] == Approx(0).margin(1e-5));
            CHECK(yv[size_t(c)] == Approx(1).epsilon(1e-3));  // eps = 1e-5 shrinks it a little
        }
        // running = 0.9·running + 0.1·stat, with the unbiased variance.
        auto [m, v] = channel_stats(x, true);
        for (size_t c = 0; c < 3; ++c) {
            rm[c] = 0.9 * rm[c] + 0.1 * m[c];
            rv[c] = 0.9 * rv[c] + 0.1 * v[c];
        }
        check_close(bn.running_mean, rm, 1e-5, 1e-6);
        check_close(bn.running_var, rv, 1e-5, 1e-6);
        CHECK(bn.num_batches_tracked.item() == step + 1);
    }

    // Eval: (x − running_mean)/√(running_var + eps)·γ + β; nothing is updated.
    bn.weight.detach().copy_(from_vector<float>({0.5f, -2.0f, 1.5f}));
    bn.bias.detach().copy_(from_vector<float>({0.25f, 1.0f, -3.0f}));
    bn.eval();
    const Tensor x = random_tensor({2, 3, 3, 4}, DType::f32, 40);
    const std::vector<double> vx = values(x), g = values(bn.weight), b = values(bn.bias);
    std::vector<double> want;
    for (size_t i = 0; i < vx.size(); ++i) {
        const size_t c = (i / 12) % 3;
        want.push_back((vx[i] - rm[c]) / std::sqrt(rv[c] + 1e-5) * g[c] + b[c]);
    }
    check_close(bn(x), want, 1e-5, 1e-5);
    check_close(bn(non_contiguous(x)), want, 1e-5, 1e-5);
    check_close(bn.running_mean, rm, 1e-5, 1e-6);
    CHECK(bn.num_batches_tracked.item() == 2);

    REQUIRE_THROWS_WITH_MSG(bn(zeros({2, 4, 5, 5})),
                            "BatchNorm2d(3): expected input [N, 3, H, W], got [2, 4, 5, 5]");
    REQUIRE_THROWS_WITH_MSG(bn(zeros({3, 5})),
                            "BatchNorm2d(3): expected input [N, 3, H, W], got [3, 5]");
    // A batch the op rejects (one value per channel) leaves the statistics and the count alone.
    bn.train();
    REQUIRE_THROWS_WITH_MSG(bn(ones({1, 3, 1, 1})), "expected more than 1 value per channel");
    CHECK(bn.num_batches_tracked.item() == 2);
    check_close(bn.running_mean, rm, 1e-5, 1e-6);
    REQUIRE_THROWS_WITH_MSG(nn::BatchNorm2d(2, {.eps = 0}), "BatchNorm2d: eps must be positive");
}

TEST_CASE("BatchNorm2d: without running statistics or affine parameters", "[nn][layers]") {
    nn::BatchNorm2d bn(2, {.affine = false, .track_running_stats = false});
    CHECK(bn.state_dict().empty());
    bn.eval();  // no running statistics: batch statistics even in eval
    const Tensor x = random_tensor({3, 2, 2, 2}, DType::f64, 41);
    auto [m, v] = channel_stats(x, false);
    const std::vector<double> vx = values(x);
    std::vector<double> want;
    for (size_t i = 0; i < vx.size(); ++i) {
        const size_t c = (i / 4) % 2;
        want.push_back((vx[i] - m[c]) / std::sqrt(v[c] + 1e-5));
    }
    check_close(bn(x.to(DType::f32)), want, 1e-5, 1e-5);
}

TEST_CASE("LayerNorm: each row normalized, then scaled and shifted", "[nn][layers]") {
    nn::LayerNorm ln({6});
    CHECK(values(ln.weight) == std::vector<double>(6, 1.0));
    CHECK(values(ln.bias) == std::vector<double>(6, 0.0));
    Tensor x = random_tensor({4, 6}, DType::f32, 50, -3.0, 5.0);
    auto row_stats = [](const std::vector<double>& v, size_t r, size_t n) {
        double m = 0, s = 0;
        for (size_t i = 0; i < n; ++i) m += v[r * n + i];
        m /= double(n);
        for (size_t i = 0; i < n; ++i) s += (v[r * n + i] - m) * (v[r * n + i] - m);
        return std::pair{m, s / double(n)};
    };
    const std::vector<double> y = values(ln(x));
    for (size_t r = 0; r < 4; ++r) {
        auto [m, v] = row_stats(y, r, 6);
        CHECK(m == Approx(0).margin(1e-6));
        CHECK(v == Approx(1).epsilon(1e-3));
    }
    ln.weight.detach().copy_(random_tensor({6}, DType::f32, 51));
    ln.bias.detach().copy_(random_tensor({6}, DType::f32, 52));
    const std::vector<double> vx = values(x), g = values(ln.weight), b = values(ln.bias);
    std::vector<double> want;
    for (size_t r = 0; r < 4; ++r) {
        auto [m, v] = row_stats(vx, r, 6);
        for (size_t i = 0; i < 6; ++i)
            want.push_back((vx[r * 6 + i] - m) / std::sqrt(v + 1e-5) * g[i] + b[i]);
    }
    check_close(ln(x), want, 1e-5, 1e-5);
    check_close(ln(non_contiguous(x)), want, 1e-5, 1e-5);

    nn::LayerNorm plain({2, 3}, {.elementwise_affine = false});
    CHECK(plain.parameters().empty());
    const std::vector<double> y2 = values(plain(x.reshape({4, 2, 3})));
    for (size_t r = 0; r < 4; ++r) CHECK(row_stats(y2, r, 6).first == Approx(0).margin(1e-6));
    REQUIRE_THROWS_WITH_MSG(ln(zeros({2, 5})),
                            "normalized_shape [6] must be non-empty and equal the trailing dims");
    REQUIRE_THROWS_WITH_MSG(nn::LayerNorm(Shape{}),
                            "LayerNorm: normalized_shape must be non-empty");
}

TEST_CASE("Embedding: picks rows of the table", "[nn][layers]") {
    nn::Embedding emb(10, 4);
    CHECK(emb.weight.shape() == Shape{10, 4});
    CHECK(emb.weight.requires_grad());
    const Tensor idx = from_vector<int64_t>({3, 0, 9, 3, 7, 1}, {2, 3});
    const Tensor y = emb(idx);
    REQUIRE(y.shape() == Shape{2, 3, 4});
    const std::vector<int64_t> vi = idx.to_vector<int64_t>();
    for (int64_t k = 0; k < 6; ++k)
        for (int64_t d = 0; d < 4; ++d)
            CHECK(y.at({k / 3, k % 3, d}) == emb.weight.at({vi[size_t(k)], d}));
    CHECK(emb.describe() == "Embedding(10, 4)");
    REQUIRE_THROWS_WITH_MSG(emb(from_vector<int64_t>({10})), "embedding: index 10 is out of range");
    REQUIRE_THROWS_WITH_MSG(nn::Embedding(0, 4),
                            "Embedding: num_embeddings must be positive, got 0");
}

// The layers without parameters, against values worked out here: Dropout
// (train and eval), ReLU, GELU (exact and tanh), SiLU, the three poolings, Flatten,
// Identity, and Sequential chaining its children.
#include <cmath>
#include <sstream>
#include <type_traits>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("Dropout: identity in eval, zeros about p of the elements in train", "[nn][layers]") {
    nn::Dropout drop(0.3);
    CHECK(drop.is_training());
    const Tensor x = random_tensor({200, 500}, DType::f32, 60, 0.5, 2.0);  // never zero
    const std::vector<double> vx = values(x);
    const std::vector<double> vy = values(drop(x));
    int64_t zeros_seen = 0;
    for (size_t i = 0; i < vx.size(); ++i) {
        if (vy[i] == 0) {
            ++zeros_seen;
        } else {
            INFO("element " << i);
            REQUIRE(vy[i] == Approx(vx[i] / 0.7).epsilon(1e-6));  // survivors scaled by 1/(1 − p)
        }
    }
    // 100,000 Bernoulli(0.3) draws: the standard deviation of the fraction is 0.0014.
    CHECK(double(zeros_seen) / double(vx.size()) == Approx(0.3).margin(0.01));
    // A fresh mask each call.
    CHECK(values(drop(x)) != vy);

    drop.eval();
    CHECK(values(drop(x)) == vx);
    nn::Dropout none(0.0);
    CHECK(values(none(x)) == vx);
    nn::Dropout all(1.0);
    CHECK(values(all(x)) == std::vector<double>(vx.size(), 0.0));
    CHECK(drop.describe() == "Dropout(p=0.3)");
    REQUIRE_THROWS_WITH_MSG(nn::Dropout(1.5), "Dropout: p must be in [0, 1], got 1.5");
    REQUIRE_THROWS_WITH_MSG(nn::Dropout(-0.1), "Dropout: p must be in [0, 1], got -0.1");
}

TEST_CASE("ReLU, GELU and SiLU: values", "[nn][layers]") {
    const Tensor x = random_tensor({3, 7}, DType::f64, 61, -4.0, 4.0);
    const std::vector<double> vx = values(x);
    std::vector<double> relu, gelu, gelu_tanh, silu;
    for (double v : vx) {
        relu.push_back(v > 0 ? v : 0.0);
        gelu.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
        const double k = std::sqrt(2.0 / M_PI);
        gelu_tanh.push_back(0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v))));
        silu.push_back(v / (1 + std::exp(-v)));
    }
    nn::ReLU r;
    nn::GELU g;
    nn::GELU gt(GeluApprox::tanh);
    check_close(r(x), relu, 1e-15, 0);
    check_close(g(x), gelu, 1e-12, 1e-15);
    check_close(gt(x), gelu_tanh, 1e-12, 1e-15);
    nn::SiLU s;
    check_close(s(x), silu, 1e-14, 1e-15);
    CHECK(s.type_name() == "SiLU");
    check_close(r(non_contiguous(x)), relu, 1e-15, 0);
    CHECK(r(zeros({0, 3})).shape() == Shape{0, 3});
}

TEST_CASE("MaxPool2d, AvgPool2d, AdaptiveAvgPool2d: shapes and values", "[nn][layers]") {
    // x[0, 0] = 0..19 over 4×5; channel 1 is its negation.
    std::vector<double> v;
    for (int c = 0; c < 2; ++c)
        for (int i = 0; i < 20; ++i) v.push_back(c == 0 ? i : -i);
    const Tensor x = from_vector(v, {1, 2, 4, 5});

    nn::MaxPool2d max2(2);  // stride defaults to the kernel: windows at columns 0-1, 2-3
    const Tensor ym = max2(x);
    CHECK(ym.shape() == Shape{1, 2, 2, 2});
    CHECK(values(ym) == std::vector<double>{6, 8, 16, 18, 0, -2, -10, -12});
    nn::MaxPool2d max3(3, {.stride = 1, .padding = 1});
    CHECK(max3(x).shape() == Shape{1, 2, 4, 5});
    CHECK(max3(x).at({0, 0, 0, 0}) == 6);
    CHECK(max3(x).at({0, 1, 3, 4}) == -13);

    nn::AvgPool2d avg2(2);
    const Tensor ya = avg2(x);
    CHECK(ya.shape() == Shape{1, 2, 2, 2});
    CHECK(values(ya) == std::vector<double>{3, 5, 13, 15, -3, -5, -13, -15});
    nn::AvgPool2d avg_pad(3, {.stride = 2, .padding = 1, .count_include_pad = false});
    const Tensor yp = avg_pad(x);
    CHECK(yp.shape() == Shape{1, 2, 2, 3});
    CHECK(yp.at({0, 0, 0, 0}) == Approx((0 + 1 + 5 + 6) / 4.0));  // 2×2 taps inside

    nn::AdaptiveAvgPool2d gap(1);
    const Tensor yg = gap(x);
    CHECK(yg.shape() == Shape{1, 2, 1, 1});
    CHECK(values(yg) == std::vector<double>{9.5, -9.5});
    nn::AdaptiveAvgPool2d rows({2, 1});
    CHECK(values(rows(x)) == std::vector<double>{4.5, 14.5, -4.5, -14.5});
}

TEST_CASE("Flatten and Identity", "[nn][layers]") {
    const Tensor x = random_tensor({2, 3, 4, 5}, DType::f32, 62);
    nn::Flatten f;
    const Tensor y = f(x);
    CHECK(y.shape() == Shape{2, 60});
    CHECK(values(y) == values(x));
    CHECK(nn::Flatten(0)(x).shape() == Shape{120});
    CHECK(nn::Flatten(1, 2)(x).shape() == Shape{2, 12, 5});
    CHECK(nn::Flatten(-2)(x).shape() == Shape{2, 3, 20});
    CHECK(f(zeros({0, 3, 2})).shape() == Shape{0, 6});
    nn::Identity id;
    CHECK(id(x).is_same(x));
}

// Copying a model is not possible (it would alias the parameters); a
// non-const Sequential lvalue must not be taken as "a child" either.
static_assert(!std::is_constructible_v<nn::Sequential, nn::Sequential&>);
static_assert(!std::is_constructible_v<nn::Sequential, const nn::Sequential&>);
static_assert(std::is_constructible_v<nn::Sequential, nn::Sequential&&>);

TEST_CASE("Sequential: runs its children in order", "[nn][layers]") {
    nn::Sequential seq(nn::Linear(4, 6), nn::ReLU(), nn::Linear(6, 3));
    REQUIRE(seq.size() == 3);
    auto l0 = std::dynamic_pointer_cast<nn::Linear>(seq[0]);
    auto l2 = std::dynamic_pointer_cast<nn::Linear>(seq[2]);
    REQUIRE(l0);
    REQUIRE(l2);
    CHECK(dynamic_cast<nn::ReLU*>(seq[1].get()));
    CHECK(seq.named_children()[2].first == "2");

    // By hand: relu(x·W0ᵀ + b0)·W2ᵀ + b2.
    const Tensor x = random_tensor({5, 4}, DType::f32, 63);
    const std::vector<double> vx = values(x), w0 = values(l0->weight), b0 = values(l0->bias),
                              w2 = values(l2->weight), b2 = values(l2->bias);
    std::vector<double> want;
    for (size_t r = 0; r < 5; ++r) {
        std::vector<double> h(6);
        for (size_t o = 0; o < 6; ++o) {
            h[o] = b0[o];
            for (size_t i = 0; i < 4; ++i) h[o] += vx[r * 4 + i] * w0[o * 4 + i];
            h[o] = std::max(h[o], 0.0);
        }
        for (size_t o = 0; o < 3; ++o) {
            double acc = b2[o];
            for (size_t i = 0; i < 6; ++i) acc += h[i] * w2[o * 6 + i];
            want.push_back(acc);
        }
    }
    check_close(seq(x), want, 1e-5, 1e-6);

    // push_back by value and by shared_ptr; the shared one is the same module.
    auto tail = std::make_shared<nn::Linear>(3, 2);
    seq.push_back(nn::ReLU());
    seq.push_back(tail);
    CHECK(seq.size() == 5);
    CHECK(seq[4].get() == tail.get());
    CHECK(seq(x).shape() == Shape{5, 2});
    CHECK(seq.named_parameters().back().first == "4.bias");

    nn::Sequential empty_seq;
    CHECK(empty_seq(x).is_same(x));
    std::ostringstream os;
    os << empty_seq;
    CHECK(os.str() == "Sequential\n");
}

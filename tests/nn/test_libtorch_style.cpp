// The tensor API as a libtorch user writes it: reductions and softmax as
// methods, comparison operators, item<T>(), pooling with one number for the
// window, printing of shapes and modules. Each result is checked against
// naive f64 loops over the same random inputs.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// A model of one's own that does not override type_name().
struct Net : nn::Module {
    std::shared_ptr<nn::Linear> fc1 = register_module("fc1", nn::Linear(784, 32));
    std::shared_ptr<nn::Linear> fc2 = register_module("fc2", nn::Linear(32, 10));
    Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))); }
};

}  // namespace

TEST_CASE("libtorch style: the README's flow with methods and operators", "[nn][api]") {
    manual_seed(0);
    Tensor x = randn({64, 784});
    Tensor labels = randint(0, 10, {64});
    Net model;
    optim::SGD opt(model.parameters(), {.lr = 0.1});
    Tensor logits = model(x);
    Tensor loss = cross_entropy(logits, labels);
    opt.zero_grad();
    loss.backward();
    opt.step();

    const std::vector<double> z = logits.to_vector<double>();
    const std::vector<int64_t> y = labels.to_vector<int64_t>();
    // argmax(1), ==, a bool tensor's mean: the batch accuracy.
    Tensor pred = logits.argmax(1);
    Tensor correct = pred == labels;
    CHECK(correct.dtype() == DType::boolean);
    int64_t hits = 0;
    for (int64_t i = 0; i < 64; ++i) {
        int64_t best = 0;
        for (int64_t j = 1; j < 10; ++j)
            if (z[size_t(i * 10 + j)] > z[size_t(i * 10 + best)]) best = j;
        CHECK(pred.at({i}) == best);
        CHECK(correct.at({i}) == double(best == y[size_t(i)]));
        hits += best == y[size_t(i)];
    }
    CHECK(correct.to(DType::f32).mean().item<float>() == Approx(double(hits) / 64));
    // softmax(-1), sum(1), sum(), mean(): against the loops.
    Tensor p = logits.softmax(-1);
    Tensor row_sums = p.sum(1);
    double total = 0;
    for (int64_t i = 0; i < 64; ++i) {
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < 10; ++j) m = std::max(m, z[size_t(i * 10 + j)]);
        for (int64_t j = 0; j < 10; ++j) s += std::exp(z[size_t(i * 10 + j)] - m);
        for (int64_t j = 0; j < 10; ++j) {
            CHECK(p.at({i, j}) == Approx(std::exp(z[size_t(i * 10 + j)] - m) / s).epsilon(1e-5));
            total += z[size_t(i * 10 + j)];
        }
        CHECK(row_sums.at({i}) == Approx(1).epsilon(1e-6));
    }
    CHECK(logits.sum().item<double>() == Approx(total).epsilon(1e-5));
    CHECK(logits.mean().item() == Approx(total / 640).epsilon(1e-5));
    CHECK(logits.log_softmax(1).at({3, 4}) == Approx(std::log(p.at({3, 4}))).epsilon(1e-5));
    CHECK(logits.sum({0, 1}).item() == Approx(total).epsilon(1e-5));
}

TEST_CASE("libtorch style: reductions as methods match the loops and record backward",
          "[nn][api]") {
    manual_seed(1);
    Tensor x = randn({5, 7}).set_requires_grad();
    const std::vector<double> v = x.to_vector<double>();
    auto at = [&](int64_t i, int64_t j) { return v[size_t(i * 7 + j)]; };
    Tensor col_mean = x.mean(0, /*keepdim=*/true);
    REQUIRE(col_mean.shape() == Shape{1, 7});
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t j = 0; j < 7; ++j) {
        double s = 0;
        for (int64_t i = 0; i < 5; ++i) s += at(i, j);
        CHECK(col_mean.at({0, j}) == Approx(s / 5).epsilon(1e-6));
    }
    for (double e : v) lo = std::min(lo, e), hi = std::max(hi, e);
    CHECK(x.max().item() == hi);
    CHECK(x.min().item() == lo);
    CHECK(x.amax({1}).shape() == Shape{5});
    const ValuesIndices m = x.max(1);
    const ValuesIndices mn = x.min(1);
    for (int64_t i = 0; i < 5; ++i) {
        int64_t best = 0, worst = 0;
        for (int64_t j = 1; j < 7; ++j) {
            if (at(i, j) > at(i, best)) best = j;
            if (at(i, j) < at(i, worst)) worst = j;
        }
        CHECK(m.indices.at({i}) == best);
        CHECK(m.values.at({i}) == at(i, best));
        CHECK(mn.indices.at({i}) == worst);
        CHECK(x.argmin(1).at({i}) == worst);
    }
    double sq = 0;
    for (double e : v) sq += e * e;
    CHECK(x.norm().item() == Approx(std::sqrt(sq)).epsilon(1e-6));
    CHECK(x.var().item() == Approx(sq / 34 - std::pow(x.mean().item(), 2) * 35 / 34).epsilon(1e-4));
    // d(sum of squares / 2)/dx = x, through the methods.
    Tensor half_sq = div((x * x).sum(), 2.0);
    half_sq.backward();
    for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 7; ++j) CHECK(x.grad().at({i, j}) == Approx(at(i, j)));
}

TEST_CASE("libtorch style: comparison operators give bool tensors", "[nn][api]") {
    manual_seed(2);
    Tensor a = randint(0, 3, {40}), b = randint(0, 3, {40});
    const std::vector<int64_t> u = a.to_vector<int64_t>(), w = b.to_vector<int64_t>();
    const Tensor eq_t = a == b, ne_t = a != b, lt_t = a < b, le_t = a <= b, gt_t = a > b,
                 ge_t = a >= b, gt1 = a > 1.0, eq0 = a == 0.0;
    for (int64_t i = 0; i < 40; ++i) {
        const int64_t p = u[size_t(i)], q = w[size_t(i)];
        CHECK(eq_t.at({i}) == double(p == q));
        CHECK(ne_t.at({i}) == double(p != q));
        CHECK(lt_t.at({i}) == double(p < q));
        CHECK(le_t.at({i}) == double(p <= q));
        CHECK(gt_t.at({i}) == double(p > q));
        CHECK(ge_t.at({i}) == double(p >= q));
        CHECK(gt1.at({i}) == double(p > 1));
        CHECK(eq0.at({i}) == double(p == 0));
    }
    CHECK(eq_t.dtype() == DType::boolean);
    CHECK(a.is_same(a));
    CHECK_FALSE(a.is_same(b));
}

TEST_CASE("libtorch style: item<T> keeps the element's bits", "[nn][api]") {
    const int64_t big = (int64_t(1) << 53) + 1;  // rounds in a double
    Tensor t = full({1}, 0.0, {.dtype = DType::i64});
    t.data<int64_t>()[0] = big;
    CHECK(t.item<int64_t>() == big);
    CHECK(int64_t(t.item()) != big);
    CHECK(full({}, 2.5).item<float>() == 2.5f);
    CHECK(full({1, 1}, 7.0, {.dtype = DType::i32}).item<int32_t>() == 7);
    REQUIRE_THROWS_WITH_MSG(zeros({2}).item<float>(), "item: expected a tensor with one element");
}

TEST_CASE("libtorch style: pooling with one number for the window", "[nn][api]") {
    manual_seed(3);
    Tensor img = randn({2, 3, 8, 8});
    CHECK(max_pool2d(img, 2).shape() == Shape{2, 3, 4, 4});
    const std::vector<double> v = img.to_vector<double>();
    const Tensor mp = max_pool2d(img, 2), ap = avg_pool2d(img, 2), mp3 = max_pool2d(img, 3, 1, 1);
    CHECK(mp3.shape() == Shape{2, 3, 8, 8});
    for (int64_t n = 0; n < 2; ++n)
        for (int64_t c = 0; c < 3; ++c)
            for (int64_t i = 0; i < 4; ++i)
                for (int64_t j = 0; j < 4; ++j) {
                    double m = -INFINITY, s = 0;
                    for (int64_t di = 0; di < 2; ++di)
                        for (int64_t dj = 0; dj < 2; ++dj) {
                            const double e = v[size_t(((n * 3 + c) * 8 + 2 * i + di) * 8 + 2 * j + dj)];
                            m = std::max(m, e);
                            s += e;
                        }
                    CHECK(mp.at({n, c, i, j}) == m);
                    CHECK(ap.at({n, c, i, j}) == Approx(s / 4).margin(1e-6));
                }
}

TEST_CASE("libtorch style: a model of one's own prints with its class name", "[nn][api]") {
    Net model;
    std::ostringstream os;
    os << model;
    CHECK(model.type_name() == "Net");
    CHECK(os.str() == "Net\n"
                      "  fc1: Linear(in=784, out=32, bias=true)\n"
                      "  fc2: Linear(in=32, out=10, bias=true)\n");
    CHECK(nn::mlp()->type_name() == "Sequential");
}

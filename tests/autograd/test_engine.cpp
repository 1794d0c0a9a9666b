// The graph and the engine: leaves and non-leaves, accumulation across uses
// and calls, retain_graph, detach, version counters, hooks, grad mode and
// anomaly mode. Gradients are checked against values worked out by hand.
#include <thread>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

Tensor leaf(const std::vector<double>& v, const Shape& shape) {
    return from_vector(v, shape).set_requires_grad(true);
}

}  // namespace

TEST_CASE("autograd: leaves, non-leaves and requires_grad", "[autograd]") {
    Tensor x = leaf({1, 2, 3}, {3});
    Tensor c = from_vector<double>({4, 5, 6}, {3});
    REQUIRE(x.requires_grad());
    REQUIRE(x.is_leaf());
    REQUIRE(x.grad_fn() == nullptr);
    REQUIRE_FALSE(c.requires_grad());
    Tensor y = x * c;
    REQUIRE(y.requires_grad());
    REQUIRE_FALSE(y.is_leaf());
    REQUIRE(y.grad_fn()->name == "mul");
    Tensor z = c * 2.0;  // no input requires grad: nothing recorded
    REQUIRE_FALSE(z.requires_grad());
    REQUIRE(z.grad_fn() == nullptr);
    REQUIRE_THROWS_WITH_MSG(from_vector<int64_t>({1, 2}, {2}).set_requires_grad(true),
                            "only floating-point tensors can require grad");
    REQUIRE_THROWS_WITH_MSG(y.set_requires_grad(false), "not a leaf");
}

TEST_CASE("autograd: backward of a small expression", "[autograd]") {
    // L = Σ (x·w + x²) → dL/dx = w + 2x, dL/dw = x
    Tensor x = leaf({1, -2, 3}, {3});
    Tensor w = leaf({0.5, 4, -1}, {3});
    Tensor loss = sum(x * w + x * x);
    loss.backward();
    REQUIRE(values(x.grad()) == std::vector<double>{0.5 + 2, 4 - 4, -1 + 6});
    REQUIRE(values(w.grad()) == std::vector<double>{1, -2, 3});
}

TEST_CASE("autograd: gradients accumulate across uses and across calls", "[autograd]") {
    Tensor x = leaf({2}, {1});
    Tensor y = x * 3.0;
    Tensor loss = sum(y + y * y);  // dL/dx = 3 + 2·9·x = 3 + 18x = 39
    loss.backward(Tensor(), /*retain_graph=*/true);
    REQUIRE(values(x.grad()) == std::vector<double>{39});
    loss.backward();  // accumulates
    REQUIRE(values(x.grad()) == std::vector<double>{78});
    x.set_grad({});  // zero_grad sets to none
    REQUIRE_FALSE(x.grad().defined());
}

TEST_CASE("autograd: the graph is freed after backward unless retained", "[autograd]") {
    Tensor x = leaf({1, 2}, {2});
    Tensor loss = sum(exp(x));  // exp saves its output
    loss.backward();
    REQUIRE_THROWS_WITH_MSG(loss.backward(), "retain_graph");
    // A graph that saved nothing may be walked again, as in PyTorch.
    Tensor again = sum(x * 2.0);
    again.backward();
    again.backward();
    REQUIRE(values(x.grad()) == std::vector<double>{std::exp(1.0) + 4, std::exp(2.0) + 4});
}

TEST_CASE("autograd: backward needs a seed for non-scalars", "[autograd]") {
    Tensor x = leaf({1, 2, 3}, {3});
    Tensor y = x * x;
    REQUIRE_THROWS_WITH_MSG(y.backward(), "one-element tensor");
    REQUIRE_THROWS_WITH_MSG(y.backward(from_vector<double>({1, 1}, {2})), "gradient of shape [2]");
    y.backward(from_vector<double>({1, 10, 100}, {3}));
    REQUIRE(values(x.grad()) == std::vector<double>{2, 40, 600});
    Tensor c = from_vector<double>({1}, {1});
    REQUIRE_THROWS_WITH_MSG(c.backward(), "does not require grad");
}

TEST_CASE("autograd: detach cuts the graph and shares storage", "[autograd]") {
    Tensor x = leaf({1, 2}, {2});
    Tensor d = (x * 2.0).detach();
    REQUIRE_FALSE(d.requires_grad());
    REQUIRE(d.is_leaf());
    Tensor y = x * 2.0;
    Tensor yd = y.detach();
    REQUIRE(yd.data_ptr() == y.data_ptr());
    Tensor loss = sum(y * yd);  // yd is a constant: dL/dx = 2·yd = 4x
    loss.backward();
    REQUIRE(values(x.grad()) == std::vector<double>{4, 8});
}

TEST_CASE("autograd: dtype promotion returns gradients in the input's dtype", "[autograd]") {
    Tensor a = from_vector<double>({1, 2}, {2}).to(DType::f32).set_requires_grad(true);
    Tensor b = leaf({3, 4}, {2});
    Tensor loss = sum(a * b);  // f64
    REQUIRE(loss.dtype() == DType::f64);
    loss.backward();
    REQUIRE(a.grad().dtype() == DType::f32);
    REQUIRE(values(a.grad()) == std::vector<double>{3, 4});
    REQUIRE(b.grad().dtype() == DType::f64);
}

TEST_CASE("autograd: modifying a saved tensor in place is an error, not a wrong gradient",
          "[autograd]") {
    Tensor x = leaf({1, 2, 3}, {3});
    Tensor w = from_vector<double>({1, 1, 1}, {3});
    Tensor loss = sum(x * w);  // saves w for x's gradient
    mul_(w, 5.0);
    REQUIRE_THROWS_WITH_MSG(loss.backward(), "backward of 'mul': tensor 0 (shape [3]) saved by the forward was modified in place");

    Tensor y = exp(x);  // saves its output
    Tensor l2 = sum(y);
    {
        NoGradGuard g;
        add_(y.detach(), 1.0);  // a view of the same storage: caught too
    }
    REQUIRE_THROWS_WITH_MSG(l2.backward(), "modified in place");
}

TEST_CASE("autograd: in-place ops refuse to break the graph", "[autograd]") {
    Tensor x = leaf({1, 2}, {2});
    REQUIRE_THROWS_WITH_MSG(add_(x, 1.0), "a leaf tensor that requires grad");
    Tensor y = x * 2.0;
    REQUIRE_THROWS_WITH_MSG(mul_(y, 2.0), "use the out-of-place op");
    REQUIRE_THROWS_WITH_MSG(y.fill_(0), "use the out-of-place op");
    {
        NoGradGuard g;  // an optimizer step
        sub_(x, 0.5);
        x.copy_(from_vector<double>({7, 8}, {2}));
    }
    REQUIRE(values(x) == std::vector<double>{7, 8});
}

TEST_CASE("autograd: NoGradGuard records nothing and nests", "[autograd]") {
    Tensor x = leaf({1, 2}, {2});
    REQUIRE(GradMode::is_enabled());
    {
        NoGradGuard g;
        REQUIRE_FALSE(GradMode::is_enabled());
        Tensor y = x * 2.0;
        REQUIRE_FALSE(y.requires_grad());
        REQUIRE(y.grad_fn() == nullptr);
        {
            EnableGradGuard e;
            REQUIRE((x * 2.0).requires_grad());
        }
        REQUIRE_FALSE(GradMode::is_enabled());
    }
    REQUIRE(GradMode::is_enabled());
}

TEST_CASE("autograd: tensor hooks see and may replace gradients", "[autograd]") {
    Tensor x = leaf({1, 2}, {2});
    Tensor y = x * 3.0;
    std::vector<double> seen_y, seen_x;
    y.register_hook([&](const Tensor& g) {
        seen_y = values(g);
        return mul(g, 10.0);  // replaces the gradient flowing on
    });
    x.register_hook([&](const Tensor& g) {
        seen_x = values(g);
        return Tensor();  // keeps it
    });
    int post = 0;
    x.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
        ++post;
        REQUIRE(values(leaf.grad()) == std::vector<double>{30, 30});
    });
    sum(y).backward();
    REQUIRE(seen_y == std::vector<double>{1, 1});
    REQUIRE(seen_x == std::vector<double>{30, 30});
    REQUIRE(post == 1);
    REQUIRE(values(x.grad()) == std::vector<double>{30, 30});
}

TEST_CASE("autograd: retain_grad keeps a non-leaf's gradient", "[autograd]") {
    Tensor x = leaf({1, 2}, {2});
    Tensor y = x * x;
    y.retain_grad();
    Tensor z = x * 5.0;  // not retained
    sum(y * 3.0 + z).backward();
    REQUIRE(values(y.grad()) == std::vector<double>{3, 3});
    REQUIRE_FALSE(z.grad().defined());
}

TEST_CASE("autograd: a deep chain runs without recursion", "[autograd]") {
    Tensor x = leaf({1}, {1});
    Tensor y = x;
    for (int i = 0; i < 20000; ++i) y = y * 1.0;  // a graph deeper than any C++ stack frame budget
    sum(y).backward();
    REQUIRE(values(x.grad()) == std::vector<double>{1});
}

TEST_CASE("autograd: branches join in dependency order", "[autograd]") {
    // a = x², b = a·3, c = a·b → L = Σ c = 3x⁴ → dL/dx = 12x³
    Tensor x = leaf({2, -1}, {2});
    Tensor a = x * x;
    Tensor b = a * 3.0;
    sum(a * b).backward();
    REQUIRE(values(x.grad()) == std::vector<double>{96, -12});
}

TEST_CASE("autograd: anomaly mode names the op that made a NaN", "[autograd]") {
    Tensor x = leaf({-1, 4}, {2});
    {
        autograd::DetectAnomalyGuard on;
        REQUIRE_THROWS_WITH_MSG(log(x), "anomaly mode: forward op 'log' produced NaN or Inf");
        // sqrt(0) is fine forward, but its backward divides by 0.
        Tensor z = leaf({0, 4}, {2});
        Tensor y = sqrt(z);
        REQUIRE_THROWS_WITH_MSG(sum(y).backward(),
                                "anomaly mode: the backward of forward op 'sqrt' produced NaN or Inf");
    }
    REQUIRE_FALSE(autograd::AnomalyMode::is_enabled());
    Tensor quiet = log(x);  // off: NaN passes silently, as in PyTorch
    REQUIRE(std::isnan(quiet.at({0})));
}

TEST_CASE("autograd: views record their backward", "[autograd]") {
    Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor y = x.t().slice(0, 1, 3).reshape({4});  // elements x[0][1], x[1][1], x[0][2], x[1][2]
    sum(y * from_vector<double>({1, 2, 3, 4}, {4})).backward();
    REQUIRE(values(x.grad()) == std::vector<double>{0, 1, 3, 0, 2, 4});
    // A no-op view is the same tensor and adds no node.
    Tensor z = x * 1.0;
    REQUIRE(z.squeeze(0).is_same(z));
}

TEST_CASE("autograd: hooks must keep the gradient's geometry", "[autograd][hooks]") {
    Tensor x = leaf({1, 2, 3}, {3});
    x.register_hook([](const Tensor&) { return ones({2}, {DType::f64}); });
    REQUIRE_THROWS_WITH_MSG(sum(x * 2.0).backward(), "a tensor hook returned a gradient f64 [2]");
    Tensor w = leaf({1, 2}, {2});
    Tensor y = w * 3.0;
    y.register_hook([](const Tensor& g) { return g.to(DType::f32); });
    REQUIRE_THROWS_WITH_MSG(sum(y).backward(), "must keep the shape, dtype and device");
}

TEST_CASE("autograd: a gradient a hook returns is never shared with the leaf", "[autograd][hooks]") {
    // The hook hands back a tensor it keeps: the leaf must get its own copy.
    Tensor kept = from_vector<double>({5, 5}, {2});
    Tensor w = leaf({1, 2}, {2});
    w.register_hook([kept](const Tensor&) { return kept; });
    sum(w * 1.0).backward();
    REQUIRE(values(w.grad()) == std::vector<double>{5, 5});
    {
        NoGradGuard g;
        w.grad().fill_(0);
    }
    REQUIRE(values(kept) == std::vector<double>{5, 5});
}

TEST_CASE("autograd: retain_grad stores the gradient after the tensor's hooks", "[autograd][hooks]") {
    Tensor x = leaf({1, 2}, {2});
    Tensor y = x * 1.0;
    y.retain_grad();
    y.register_hook([](const Tensor& g) { return mul(g, 10.0); });
    sum(y).backward();
    REQUIRE(values(y.grad()) == std::vector<double>{10, 10});
    REQUIRE(values(x.grad()) == std::vector<double>{10, 10});
}

TEST_CASE("autograd: concurrent backwards into a shared leaf add up", "[autograd][threads]") {
    Tensor w = leaf({1, 2, 3}, {3});
    const int threads = 4, rounds = 200;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            for (int i = 0; i < rounds; ++i) sum(w * 1.0).backward();
        });
    for (auto& th : pool) th.join();
    const double n = threads * rounds;
    REQUIRE(values(w.grad()) == std::vector<double>{n, n, n});
}

TEST_CASE("autograd: undefined tensors are errors, not crashes", "[autograd]") {
    REQUIRE_THROWS_WITH_MSG(add_(Tensor(), 1.0), "undefined tensor");
    REQUIRE_THROWS_WITH_MSG(Tensor().set_grad({}), "undefined tensor");
}

TEST_CASE("autograd: gradients meeting at a channels-last input add up, whatever their layouts",
          "[autograd]") {
    // relu(x) + x + x·c: three gradients for x — channels-last from the first
    // two, NCHW from the third (c is NCHW) — summed in place into the first.
    const Tensor x = random_tensor({2, 3, 4, 5}, DType::f32, 91)
                         .contiguous(MemoryFormat::channels_last)
                         .set_requires_grad(true);
    const Tensor c = random_tensor({2, 3, 4, 5}, DType::f32, 92);
    sum(add(add(relu(x), x), mul(x, c))).backward();
    const std::vector<double> vx = values(x), vc = values(c);
    std::vector<double> want(vx.size());
    for (size_t i = 0; i < vx.size(); ++i) want[i] = (vx[i] > 0 ? 1.0 : 0.0) + 1.0 + vc[i];
    check_close(x.grad(), want, 1e-6, 1e-6);
}

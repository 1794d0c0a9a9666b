// Gradient special cases of the elementwise ops beside the op table
// (tests/ops), which gradchecks every differentiable entry: promotion across
// dtypes, the operators, exact gradients at clamp's bounds, where's masks and
// the tie-splitting of maximum/minimum, pow at a zero base, the activation
// backward kernels at their kinks and tails, and gradcheck itself.
#include <cmath>

#include "support/grad_support.h"
#include "kernels/elementwise.h"
#include "ops/reference.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("grad: an f64 op with an f32 input promotes, and the gradient keeps its dtype",
          "[grad]") {
    Tensor a = leaf({2, 3}, 1);
    const Tensor b32 = random_tensor({2, 3}, DType::f32, 2);
    check_grad([&](const std::vector<Tensor>& x) { return mul(x[0], b32); }, {a});

    // A f32 leaf in an f64 expression: the engine converts its gradient to f32.
    Tensor x32 = random_tensor({2, 3}, DType::f32, 3).set_requires_grad(true);
    const Tensor w = random_tensor({2, 3}, DType::f64, 4);
    Tensor y = mul(x32, w);
    REQUIRE(y.dtype() == DType::f64);
    y.backward(ones({2, 3}, {DType::f64}));
    REQUIRE(x32.grad().dtype() == DType::f32);
    check_close(x32.grad(), values(w), 1e-6, 1e-7);
}

TEST_CASE("grad: operators with the scalar on either side", "[grad]") {
    // The named ops, scalar forms included, are in the op table (tests/ops);
    // the operators compose them: s - a is add(neg(a), s), s / a mul(pow(a, -1), s).
    Tensor a = leaf({2, 3}, 11);
    Tensor nz = leaf_away_from_zero({2, 3}, 13, 0.5, 2);
    using F = std::function<Tensor(const Tensor&)>;
    const std::vector<std::pair<const char*, F>> on_a = {
        {"a + s", [](const Tensor& t) { return t + 0.5; }},
        {"s + a", [](const Tensor& t) { return 0.5 + t; }},
        {"a - s", [](const Tensor& t) { return t - 3.0; }},
        {"s - a", [](const Tensor& t) { return 3.0 - t; }},
        {"a * s", [](const Tensor& t) { return t * 1.25; }},
        {"s * a", [](const Tensor& t) { return -1.25 * t; }},
        {"a / s", [](const Tensor& t) { return t / -3.0; }},
        {"s / a", [](const Tensor& t) { return 2.0 / t; }},
        {"-a", [](const Tensor& t) { return -t; }},
    };
    for (const auto& [name, f] : on_a) {
        INFO(name);
        check_grad([&](const std::vector<Tensor>& x) { return f(x[0]); },
                   {std::string(name) == "s / a" ? nz : a});
    }
    using B = std::function<Tensor(const Tensor&, const Tensor&)>;
    const std::vector<std::pair<const char*, B>> on_ab = {
        {"a + b", [](const Tensor& x, const Tensor& y) { return x + y; }},
        {"a - b", [](const Tensor& x, const Tensor& y) { return x - y; }},
        {"a * b", [](const Tensor& x, const Tensor& y) { return x * y; }},
        {"a / b", [](const Tensor& x, const Tensor& y) { return x / y; }},
    };
    for (const auto& [name, f] : on_ab) {
        INFO(name);
        check_grad([&](const std::vector<Tensor>& x) { return f(x[0], x[1]); },
                   {leaf({3, 1, 4}, 14), leaf_away_from_zero({2, 4}, 15, 0.5, 2)});
    }
    // An integer power is defined for negative bases too (the table's bases are positive).
    check_grad([](const std::vector<Tensor>& x) { return pow(x[0], 3.0); }, {a});
}

TEST_CASE("grad: clamp passes the gradient inside the bounds only", "[grad]") {
    Tensor x = from_vector<double>({-2, -0.5, 0, 0.7, 3}, {5}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& in) { return clamp(in[0], -0.5, 0.7); }, {x});
    REQUIRE(values(x.grad()) == std::vector<double>{0, 1, 1, 1, 0});
}

TEST_CASE("grad: where sends the gradient to the chosen branch, none to cond", "[grad]") {
    // Same shapes: a gets the mask, b its complement; cond gets nothing.
    const Tensor c2 = from_vector<uint8_t>({1, 0, 0, 1}, {4}).to(DType::boolean);
    Tensor x = leaf({4}, 25), y = leaf({4}, 26);
    grads_of([&](const std::vector<Tensor>& in) { return where(c2, in[0], in[1]); }, {x, y});
    REQUIRE(values(x.grad()) == std::vector<double>{1, 0, 0, 1});
    REQUIRE(values(y.grad()) == std::vector<double>{0, 1, 1, 0});
    REQUIRE_FALSE(c2.requires_grad());
    REQUIRE_FALSE(c2.grad().defined());
}

TEST_CASE("grad: maximum/minimum split the gradient evenly on ties", "[grad]") {
    Tensor a = from_vector<double>({1, 2, 3}, {3}).set_requires_grad(true);
    Tensor b = from_vector<double>({1, 5, 0}, {3}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& x) { return maximum(x[0], x[1]); }, {a, b});
    REQUIRE(values(a.grad()) == std::vector<double>{0.5, 0, 1});
    REQUIRE(values(b.grad()) == std::vector<double>{0.5, 1, 0});
    grads_of([](const std::vector<Tensor>& x) { return minimum(x[0], x[1]); }, {a, b});
    REQUIRE(values(a.grad()) == std::vector<double>{0.5, 1, 0});
    REQUIRE(values(b.grad()) == std::vector<double>{0.5, 0, 1});

    // Broadcast tie: a [2] against b [1]; b collects its halves from both elements.
    Tensor c = from_vector<double>({4, 4}, {2}).set_requires_grad(true);
    Tensor d = from_vector<double>({4}, {1}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& x) { return maximum(x[0], x[1]); }, {c, d});
    REQUIRE(values(c.grad()) == std::vector<double>{0.5, 0.5});
    REQUIRE(values(d.grad()) == std::vector<double>{1});

    Tensor e = from_vector<double>({0.3, 1, -1}, {3}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& x) { return maximum(x[0], 0.3); }, {e});
    REQUIRE(values(e.grad()) == std::vector<double>{0.5, 1, 0});
    grads_of([](const std::vector<Tensor>& x) { return minimum(x[0], 0.3); }, {e});
    REQUIRE(values(e.grad()) == std::vector<double>{0.5, 0, 1});
}

TEST_CASE("grad: pow at a zero base gives a zero (not NaN) exponent gradient", "[grad]") {
    Tensor a = from_vector<double>({0, 2}, {2}).set_requires_grad(true);
    Tensor b = from_vector<double>({2, 3}, {2}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& x) { return pow(x[0], x[1]); }, {a, b});
    // d/da = b·a^(b−1): 0 and 3·4; d/db = a^b·log a: 0 and 8·log 2.
    check_close(a.grad(), {0, 12}, 1e-12, 0);
    check_close(b.grad(), {0, 8 * std::log(2.0)}, 1e-12, 0);
}

TEST_CASE("grad: activation backward kernels at the kinks and in the far tails", "[grad]") {
    // The op table checks them at random points; these are the special ones:
    // exactly 0 (relu's gradient there is 0, PyTorch's convention), ±1e-3 and
    // |x| up to 60, with what the forward would have saved.
    const std::vector<double> xs = {-60, -5, -1e-3, 0, 1e-3, 5.5, 60};
    const Shape shape = {int64_t(xs.size())};
    using Op = kernels::BinaryOp;
    for (DType dt : {DType::f32, DType::bf16}) {
        INFO(dtype_name(dt));
        const Tensor x = from_vector(xs, shape).to(dt);
        const Tensor g = random_tensor(shape, DType::f64, 31, -2, 2).to(dt);
        const Tensor y_relu = kernels::relu(x), y_sig = kernels::sigmoid(x),
                     y_tanh = kernels::tanh(x);
        const struct {
            Op op;
            Tensor got, saved;
        } cases[] = {{Op::relu_backward, kernels::relu_backward(g, y_relu), y_relu},
                     {Op::sigmoid_backward, kernels::sigmoid_backward(g, y_sig), y_sig},
                     {Op::tanh_backward, kernels::tanh_backward(g, y_tanh), y_tanh},
                     {Op::gelu_backward, kernels::gelu_backward(g, x), x},
                     {Op::gelu_tanh_backward, kernels::gelu_backward(g, x, GeluApprox::tanh), x}};
        for (const auto& c : cases) {
            INFO(kernels::op_name(c.op));
            REQUIRE(c.got.dtype() == dt);
            const std::vector<double> want = ref::map({g, c.saved}, DType::f64, [&](const double* v) {
                return ref::binary(c.op, v[0], v[1], false);
            });
            check_close(c.got, values(from_vector(want, shape).to(dt)), rtol_for(dt), rtol_for(dt));
        }
        const std::vector<double> gv = values(g);
        check_close(kernels::relu_backward(g, y_relu), {0, 0, 0, 0, gv[4], gv[5], gv[6]}, 0, 0);
    }
}

TEST_CASE("grad: comparisons carry no gradient", "[grad]") {
    Tensor a = leaf({2, 3}, 41), b = leaf({2, 3}, 42);
    for (const Tensor& c : {eq(a, b), ne(a, 0.5), lt(a, b), le(a, 0.5), gt(a, b), ge(a, 0.5)}) {
        REQUIRE(c.dtype() == DType::boolean);
        REQUIRE_FALSE(c.requires_grad());
    }
}

TEST_CASE("grad: gradcheck reports a wrong backward formula", "[grad]") {
    // y = 2x recorded with the backward of 3x: the oracle must catch it.
    const GradFn wrong = [](const std::vector<Tensor>& in) {
        Tensor out = kernels::mul(in[0], 2.0);
        if (auto node = autograd::make_node("wrong", {in[0]})) {
            node->backward = [](const autograd::TensorList& g) {
                return autograd::TensorList{kernels::mul(g[0], 3.0)};
            };
            autograd::set_history(node, out);
        }
        return out;
    };
    const autograd::GradcheckResult r = autograd::gradcheck(wrong, {leaf({3}, 43)});
    REQUIRE_FALSE(r.ok);
    REQUIRE_THAT(r.message, Catch::Matchers::Contains("finite differences"));
    // And an op with no recorded backward at all is caught too.
    const autograd::GradcheckResult none = autograd::gradcheck(
        [](const std::vector<Tensor>& in) { return kernels::mul(in[0], 2.0); }, {leaf({3}, 44)});
    REQUIRE_FALSE(none.ok);
    REQUIRE_THAT(none.message, Catch::Matchers::Contains("autograd gave no gradient"));
}

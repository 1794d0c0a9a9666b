// Gradients of the elementwise ops by gradcheck (f64 finite differences):
// every binary op with broadcasting both ways and one side without grad, the
// scalar overloads and operators, the unary ops and activations away from
// their kinks, where, a transposed (non-contiguous) input, and the exact
// tie-splitting of maximum/minimum.
#include <cmath>

#include "autograd/grad_support.h"
#include "kernels/copy.h"

using namespace ember;
using namespace ember::test;

namespace {

struct BinaryCase {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> fn;
    double a_lo, a_hi;  // the range of a (pow: positive bases)
    bool b_nonzero;     // b is a divisor: keep it away from 0
};

std::vector<BinaryCase> binary_cases() {
    return {
        {"add", [](const Tensor& a, const Tensor& b) { return add(a, b); }, -2, 2, false},
        {"sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); }, -2, 2, false},
        {"mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); }, -2, 2, false},
        {"div", [](const Tensor& a, const Tensor& b) { return div(a, b); }, -2, 2, true},
        {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }, 0.3, 2, false},
        {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, -2, 2, false},
        {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, -2, 2, false},
        {"operator+", [](const Tensor& a, const Tensor& b) { return a + b; }, -2, 2, false},
        {"operator-", [](const Tensor& a, const Tensor& b) { return a - b; }, -2, 2, false},
        {"operator*", [](const Tensor& a, const Tensor& b) { return a * b; }, -2, 2, false},
        {"operator/", [](const Tensor& a, const Tensor& b) { return a / b; }, -2, 2, true},
    };
}

// Shape pairs: equal, broadcasting each way, a one-element [1] and a 0-d side.
const std::vector<std::pair<Shape, Shape>> kShapePairs = {
    {{2, 3}, {2, 3}}, {{3, 1, 4}, {2, 4}}, {{2, 4}, {3, 1, 4}}, {{2, 3}, {1}},
    {{1}, {2, 3}},    {{3, 1}, {1, 4}},    {{2, 3}, {}},
};

}  // namespace

TEST_CASE("grad: binary ops with broadcasting, each side with and without grad", "[grad]") {
    uint64_t seed = 100;
    for (const BinaryCase& c : binary_cases())
        for (const auto& [sa, sb] : kShapePairs)
            for (int which = 0; which < 3; ++which) {  // both, only a, only b need grad
                INFO(c.name << " " << shape_str(sa) << " with " << shape_str(sb) << ", case "
                            << which);
                Tensor a = leaf(sa, ++seed, c.a_lo, c.a_hi);
                Tensor b = c.b_nonzero ? leaf_away_from_zero(sb, ++seed, 0.5, 2) : leaf(sb, ++seed);
                if (which == 2) a.set_requires_grad(false);
                if (which == 1) b.set_requires_grad(false);
                check_grad([&](const std::vector<Tensor>& x) { return c.fn(x[0], x[1]); }, {a, b});
            }
}

TEST_CASE("grad: binary ops on a transposed (non-contiguous) input", "[grad]") {
    uint64_t seed = 300;
    for (const BinaryCase& c : binary_cases()) {
        INFO(c.name);
        Tensor base = leaf({4, 3}, ++seed, c.a_lo, c.a_hi);  // used as base.t(): [3, 4]
        Tensor b = c.b_nonzero ? leaf_away_from_zero({3, 4}, ++seed, 0.5, 2) : leaf({3, 4}, ++seed);
        check_grad([&](const std::vector<Tensor>& x) { return c.fn(x[0].t(), x[1]); }, {base, b});
        // The transposed side second: a divisor kept from 0, bases positive for pow.
        Tensor base2 =
            c.b_nonzero ? leaf_away_from_zero({4, 3}, ++seed, 0.5, 2) : leaf({4, 3}, ++seed);
        check_grad([&](const std::vector<Tensor>& x) { return c.fn(x[1], x[0].t()); },
                   {base2, leaf({3, 4}, ++seed, c.a_lo, c.a_hi)});
    }
}

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

TEST_CASE("grad: scalar overloads and operators with the scalar on either side", "[grad]") {
    Tensor a = leaf({2, 3}, 11);
    Tensor pos = leaf({2, 3}, 12, 0.3, 2);
    Tensor nz = leaf_away_from_zero({2, 3}, 13, 0.5, 2);
    using F = std::function<Tensor(const Tensor&)>;
    const std::vector<std::pair<const char*, F>> on_a = {
        {"add(a, s)", [](const Tensor& t) { return add(t, 1.5); }},
        {"sub(a, s)", [](const Tensor& t) { return sub(t, -0.7); }},
        {"mul(a, s)", [](const Tensor& t) { return mul(t, -2.5); }},
        {"div(a, s)", [](const Tensor& t) { return div(t, 4.0); }},
        {"maximum(a, s)", [](const Tensor& t) { return maximum(t, 0.3); }},
        {"minimum(a, s)", [](const Tensor& t) { return minimum(t, -0.4); }},
        {"a + s", [](const Tensor& t) { return t + 0.5; }},
        {"s + a", [](const Tensor& t) { return 0.5 + t; }},
        {"a - s", [](const Tensor& t) { return t - 3.0; }},
        {"s - a", [](const Tensor& t) { return 3.0 - t; }},
        {"a * s", [](const Tensor& t) { return t * 1.25; }},
        {"s * a", [](const Tensor& t) { return -1.25 * t; }},
        {"a / s", [](const Tensor& t) { return t / -3.0; }},
        {"-a", [](const Tensor& t) { return -t; }},
        {"neg", [](const Tensor& t) { return neg(t); }},
    };
    for (const auto& [name, f] : on_a) {
        INFO(name);
        check_grad([&](const std::vector<Tensor>& x) { return f(x[0]); }, {a});
    }
    INFO("s / a");
    check_grad([](const std::vector<Tensor>& x) { return 2.0 / x[0]; }, {nz});
    for (double s : {2.0, 3.0, -1.5, 0.5, 1.0, 0.0}) {
        INFO("pow(a, " << s << ")");
        check_grad([s](const std::vector<Tensor>& x) { return pow(x[0], s); }, {pos});
    }
    // An integer power is defined for negative bases too.
    check_grad([](const std::vector<Tensor>& x) { return pow(x[0], 3.0); }, {a});
}

TEST_CASE("grad: unary ops and activations, contiguous and transposed", "[grad]") {
    using F = std::function<Tensor(const Tensor&)>;
    struct UnaryCase {
        const char* name;
        F fn;
        double lo, hi;
        bool away_from_zero;  // a kink at 0: |x| >= lo with either sign
    };
    const std::vector<UnaryCase> cases = {
        {"neg", [](const Tensor& t) { return neg(t); }, -2, 2, false},
        {"abs", [](const Tensor& t) { return abs(t); }, 0.2, 2, true},
        {"exp", [](const Tensor& t) { return exp(t); }, -2, 2, false},
        {"log", [](const Tensor& t) { return log(t); }, 0.2, 3, false},
        {"sqrt", [](const Tensor& t) { return sqrt(t); }, 0.2, 3, false},
        {"rsqrt", [](const Tensor& t) { return rsqrt(t); }, 0.2, 3, false},
        {"relu", [](const Tensor& t) { return relu(t); }, 0.2, 2, true},
        {"sigmoid", [](const Tensor& t) { return sigmoid(t); }, -4, 4, false},
        {"tanh", [](const Tensor& t) { return ember::tanh(t); }, -3, 3, false},
        {"gelu", [](const Tensor& t) { return ember::gelu(t); }, -4, 4, false},
        {"gelu tanh", [](const Tensor& t) { return ember::gelu(t, GeluApprox::tanh); }, -4, 4,
         false},
        // The seeded values stay clear of the bounds, where clamp has kinks.
        {"clamp lo hi", [](const Tensor& t) { return clamp(t, -0.5, 0.7); }, -2, 2, false},
        {"clamp lo", [](const Tensor& t) { return clamp(t, -0.5, std::nullopt); }, -2, 2, false},
        {"clamp hi", [](const Tensor& t) { return clamp(t, std::nullopt, 0.7); }, -2, 2, false},
    };
    uint64_t seed = 500;
    for (const UnaryCase& c : cases) {
        INFO(c.name);
        const Shape shape = {4, 5};
        Tensor x = c.away_from_zero ? leaf_away_from_zero(shape, ++seed, c.lo, c.hi)
                                    : leaf(shape, ++seed, c.lo, c.hi);
        check_grad([&](const std::vector<Tensor>& in) { return c.fn(in[0]); }, {x});
        check_grad([&](const std::vector<Tensor>& in) { return c.fn(in[0].t()); }, {x});
        Tensor scalar = c.away_from_zero ? leaf_away_from_zero({}, ++seed, c.lo, c.hi)
                                         : leaf({}, ++seed, c.lo, c.hi);
        check_grad([&](const std::vector<Tensor>& in) { return c.fn(in[0]); }, {scalar});
    }
}

TEST_CASE("grad: clamp passes the gradient inside the bounds only", "[grad]") {
    Tensor x = from_vector<double>({-2, -0.5, 0, 0.7, 3}, {5}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& in) { return clamp(in[0], -0.5, 0.7); }, {x});
    REQUIRE(values(x.grad()) == std::vector<double>{0, 1, 1, 1, 0});
}

TEST_CASE("grad: where sends the gradient to the chosen branch, none to cond", "[grad]") {
    const Tensor cond = random_tensor({3, 1, 4}, DType::boolean, 21);
    Tensor a = leaf({2, 4}, 22);
    Tensor b = leaf({3, 2, 1}, 23);
    check_grad([&](const std::vector<Tensor>& x) { return where(cond, x[0], x[1]); }, {a, b});
    check_grad([&](const std::vector<Tensor>& x) { return where(cond, x[0].t(), x[1]); },
               {leaf({4, 2}, 24), b});

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

namespace {

constexpr double kPi = 3.14159265358979323846;

double normal_cdf(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

// d/dx x·σ(2u), u = √(2/π)(x + 0.044715x³): the tanh GELU written as the
// sigmoid form, differentiated by the product rule (σ' = σ(1 − σ)).
double gelu_tanh_grad_ref(double x) {
    const double k = std::sqrt(2 / kPi);
    const double two_u = 2 * k * (x + 0.044715 * x * x * x);
    const double two_du = 2 * k * (1 + 3 * 0.044715 * x * x);
    const double s = sigmoid_ref(two_u);
    return s + x * s * (1 - s) * two_du;
}

}  // namespace

TEST_CASE("grad: activation backward kernels against f64 formulas in f32 and bf16", "[grad]") {
    // Points across both tails, the kinks and GELU's minimum; g of both signs.
    const std::vector<double> xs = {-5,   -3,  -1.7, -0.75, -0.3, -1e-3, 0,
                                    1e-3, 0.3, 0.9,  1.6,   3,    5.5};
    const Shape shape = {int64_t(xs.size())};
    for (DType dt : {DType::f32, DType::bf16}) {
        INFO(dtype_name(dt));
        const double tol = rtol_for(dt);
        const Tensor x = from_vector(xs, shape).to(dt);
        const Tensor g = random_tensor(shape, DType::f64, 31, -2, 2).to(dt);
        const std::vector<double> xv = values(x), gv = values(g);
        // What the forward would have saved: y in dt, and the reference from those values.
        std::vector<double> y_relu, y_sig, y_tanh;
        for (double v : xv) {
            y_relu.push_back(v > 0 ? v : 0);
            y_sig.push_back(sigmoid_ref(v));
            y_tanh.push_back(std::tanh(v));
        }
        const Tensor tr = from_vector(y_relu, shape).to(dt);
        const Tensor ts = from_vector(y_sig, shape).to(dt);
        const Tensor tt = from_vector(y_tanh, shape).to(dt);
        const std::vector<double> rv = values(tr), sv = values(ts), tv = values(tt);
        std::vector<double> e_relu, e_sig, e_tanh, e_gelu, e_gelu_tanh;
        for (size_t i = 0; i < xs.size(); ++i) {
            e_relu.push_back(rv[i] > 0 ? gv[i] : 0);
            e_sig.push_back(gv[i] * sv[i] * (1 - sv[i]));
            e_tanh.push_back(gv[i] * (1 - tv[i] * tv[i]));
            const double pdf = std::exp(-0.5 * xv[i] * xv[i]) / std::sqrt(2 * kPi);
            e_gelu.push_back(gv[i] * (normal_cdf(xv[i]) + xv[i] * pdf));
            e_gelu_tanh.push_back(gv[i] * gelu_tanh_grad_ref(xv[i]));
        }
        const Tensor d_relu = kernels::relu_backward(g, tr);
        const Tensor d_sig = kernels::sigmoid_backward(g, ts);
        const Tensor d_tanh = kernels::tanh_backward(g, tt);
        const Tensor d_gelu = kernels::gelu_backward(g, x);
        const Tensor d_gelu_tanh = kernels::gelu_backward(g, x, GeluApprox::tanh);
        for (const Tensor* d : {&d_relu, &d_sig, &d_tanh, &d_gelu, &d_gelu_tanh})
            REQUIRE(d->dtype() == dt);
        check_close(d_relu, e_relu, 0, 0);  // a select: exact
        check_close(d_sig, e_sig, tol, tol);
        check_close(d_tanh, e_tanh, tol, tol);
        check_close(d_gelu, e_gelu, tol, tol);
        check_close(d_gelu_tanh, e_gelu_tanh, tol, tol);
        // Non-contiguous g and a broadcast saved tensor take the same path.
        const Tensor g2 = non_contiguous(kernels::reshape(g, {1, int64_t(xs.size())}));
        check_close(kernels::gelu_backward(g2, x), e_gelu, tol, tol);
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

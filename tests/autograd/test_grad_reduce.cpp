// Gradient special cases of the reductions beside the op table (tests/ops),
// which gradchecks sum, mean, norm, var, std, amax, amin, max, min, softmax
// and log_softmax over dim sets, keepdim and layouts: no gradient for
// indices, exact checks that ties share the gradient, and zero gradients
// where norm or std is 0.
#include <cmath>
#include <limits>

#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("grad: a full reduction is 0-d and records its backward", "[grad]") {
    Tensor y = sum(leaf({2, 3, 4}, 1));
    REQUIRE(y.dim() == 0);
    REQUIRE(y.requires_grad());
}

TEST_CASE("grad: the indices of max/min and argmax/argmin carry no gradient", "[grad]") {
    const Tensor x = leaf({2, 3, 4}, 7);
    ValuesIndices r = max(x, 1);
    REQUIRE(r.values.requires_grad());
    REQUIRE_FALSE(r.indices.requires_grad());
    REQUIRE_FALSE(argmax(x, 1).requires_grad());
    REQUIRE_FALSE(argmin(x).requires_grad());
}

TEST_CASE("grad: amax/amin and the inf-norm share the gradient among ties", "[grad]") {
    Tensor a = from_vector<double>({1, 3, 3}, {3}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& in) { return amax(in[0]); }, {a});
    REQUIRE(values(a.grad()) == std::vector<double>{0, 0.5, 0.5});

    Tensor b = from_vector<double>({2, 1, 1, 5}, {4}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& in) { return amin(in[0]); }, {b});
    REQUIRE(values(b.grad()) == std::vector<double>{0, 0.5, 0.5, 0});

    // Along a dim, each row shares its own gradient: row 0 a 2-way, row 1 a 3-way tie.
    Tensor c = from_vector<double>({1, 3, 3, 0, 7, 7, 7, 2}, {2, 4}).set_requires_grad(true);
    const Tensor seed = from_vector<double>({2, 3}, {2, 1});
    grads_of([](const std::vector<Tensor>& in) { return amax(in[0], {1}, true); }, {c}, seed);
    check_close(c.grad(), {0, 1, 1, 0, 1, 1, 1, 0}, 1e-15, 0);

    // max |x| reached by -3 and 3: each gets half, with the sign of its element.
    Tensor d = from_vector<double>({-3, 3, 1}, {3}).set_requires_grad(true);
    grads_of([](const std::vector<Tensor>& in) { return norm(in[0], INFINITY); }, {d});
    REQUIRE(values(d.grad()) == std::vector<double>{-0.5, 0.5, 0});

    // max along a dim sends everything to the one index it returns.
    Tensor e = from_vector<double>({4, 1, 4}, {3}).set_requires_grad(true);
    ValuesIndices r = max(e, 0);
    r.values.backward();
    std::vector<double> expect(3, 0.0);
    expect[size_t(r.indices.item())] = 1;
    REQUIRE(values(e.grad()) == expect);
}

TEST_CASE("grad: norm of a zero vector has a zero gradient", "[grad]") {
    Tensor z = zeros({3}, {DType::f64}).set_requires_grad(true);
    for (double p : {1.0, 2.0}) {
        INFO("p = " << p);
        grads_of([p](const std::vector<Tensor>& in) { return norm(in[0], p); }, {z});
        REQUIRE(values(z.grad()) == std::vector<double>{0, 0, 0});
    }
}

TEST_CASE("std: the gradient where std is 0 is 0, not NaN", "[grad][reduce]") {
    Tensor x = full({4}, 2.0, {DType::f64}).set_requires_grad(true);
    ember::std(x).backward();
    REQUIRE(values(x.grad()) == std::vector<double>(4, 0.0));
}

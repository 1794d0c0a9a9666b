// Gradients of the reductions and softmax by gradcheck: single dims, several
// dims (any order, negative), all dims (0-d results), keepdim both ways,
// var/std with both corrections, the three norms, amax/amin and max/min along
// a dim on tie-free inputs, plus exact checks that ties share the gradient.
#include <cmath>
#include <limits>

#include "autograd/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

// Dim sets for a 3-d input: one, negative, several (unordered), all by list, all.
const std::vector<Shape> kDimSets = {{1}, {-1}, {0, 2}, {2, 0}, {0, 1, 2}, {}};

using Reduction = std::function<Tensor(const Tensor&, const Shape&, bool)>;

// gradcheck of `r` over every dim set and keepdim, on contiguous and
// transposed views of `x` (3-d) and on a 0-d tensor.
void check_reduction(const char* name, const Reduction& r, const Tensor& x, const Tensor& x0d) {
    for (const Shape& dims : kDimSets)
        for (bool keepdim : {false, true}) {
            INFO(name << " over " << shape_str(dims) << " keepdim " << keepdim);
            check_grad([&](const std::vector<Tensor>& in) { return r(in[0], dims, keepdim); }, {x});
            check_grad(
                [&](const std::vector<Tensor>& in) {
                    return r(in[0].transpose(0, 2), dims, keepdim);
                },
                {x});
        }
    // A 0-d tensor reduces over {}, {0} or {-1}, all meaning "everything".
    for (const Shape& dims : {Shape{}, Shape{0}, Shape{-1}})
        for (bool keepdim : {false, true}) {
            INFO(name << " of a 0-d tensor over " << shape_str(dims) << " keepdim " << keepdim);
            check_grad([&](const std::vector<Tensor>& in) { return r(in[0], dims, keepdim); },
                       {x0d});
        }
}

}  // namespace

TEST_CASE("grad: sum and mean", "[grad]") {
    const Tensor x = leaf({2, 3, 4}, 1), x0 = leaf({}, 2);
    check_reduction(
        "sum", [](const Tensor& t, const Shape& d, bool k) { return sum(t, d, k); }, x, x0);
    check_reduction(
        "mean", [](const Tensor& t, const Shape& d, bool k) { return mean(t, d, k); }, x, x0);
    Tensor y = sum(x);
    REQUIRE(y.dim() == 0);
    REQUIRE(y.requires_grad());
}

TEST_CASE("grad: var and std with correction 0 and 1", "[grad]") {
    const Tensor x = leaf({2, 3, 4}, 3);
    for (double correction : {0.0, 1.0}) {
        INFO("correction " << correction);
        for (const Shape& dims : kDimSets)
            for (bool keepdim : {false, true}) {
                INFO("dims " << shape_str(dims) << " keepdim " << keepdim);
                check_grad(
                    [&](const std::vector<Tensor>& in) {
                        return var(in[0], dims, correction, keepdim);
                    },
                    {x});
                check_grad(
                    [&](const std::vector<Tensor>& in) {
                        return ember::std(in[0].transpose(0, 2), dims, correction, keepdim);
                    },
                    {x});
            }
    }
    // The variance of one element (correction 0) is 0 and so is its gradient.
    const Tensor x0 = leaf({}, 4);
    check_grad([](const std::vector<Tensor>& in) { return var(in[0], {0}, 0.0, true); }, {x0});
}

TEST_CASE("grad: norm with p = 1, 2 and infinity", "[grad]") {
    // |x| >= 0.2 with both signs: p = 1 has a kink at 0, and the sign of the
    // extreme element matters for p = inf. Random values have no ties in |x|.
    const Tensor x = leaf_away_from_zero({2, 3, 4}, 5);
    const Tensor x0 = leaf_away_from_zero({}, 6);
    for (double p : {1.0, 2.0, double(INFINITY)}) {
        INFO("p = " << p);
        check_reduction(
            "norm", [p](const Tensor& t, const Shape& d, bool k) { return norm(t, p, d, k); }, x,
            x0);
    }
}

TEST_CASE("grad: amax, amin and max/min along a dim on tie-free inputs", "[grad]") {
    const Tensor x = leaf({2, 3, 4}, 7), x0 = leaf({}, 8);
    check_reduction(
        "amax", [](const Tensor& t, const Shape& d, bool k) { return amax(t, d, k); }, x, x0);
    check_reduction(
        "amin", [](const Tensor& t, const Shape& d, bool k) { return amin(t, d, k); }, x, x0);
    for (int64_t dim : {0, 1, 2, -1})
        for (bool keepdim : {false, true}) {
            INFO("dim " << dim << " keepdim " << keepdim);
            check_grad(
                [&](const std::vector<Tensor>& in) { return max(in[0], dim, keepdim).values; },
                {x});
            check_grad(
                [&](const std::vector<Tensor>& in) { return min(in[0], dim, keepdim).values; },
                {x});
            check_grad(
                [&](const std::vector<Tensor>& in) {
                    return max(in[0].transpose(0, 2), dim, keepdim).values;
                },
                {x});
        }
    check_grad([](const std::vector<Tensor>& in) { return max(in[0], 0).values; }, {x0});
    check_grad([](const std::vector<Tensor>& in) { return min(in[0], -1, true).values; }, {x0});
    // The indices and argmax/argmin carry no gradient.
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

TEST_CASE("grad: softmax and log_softmax", "[grad]") {
    const Tensor x = leaf({3, 4, 2}, 9, -3, 3);
    for (int64_t dim : {0, 1, -1}) {
        INFO("dim " << dim);
        check_grad([dim](const std::vector<Tensor>& in) { return softmax(in[0], dim); }, {x});
        check_grad([dim](const std::vector<Tensor>& in) { return log_softmax(in[0], dim); }, {x});
        check_grad(
            [dim](const std::vector<Tensor>& in) { return softmax(in[0].transpose(0, 1), dim); },
            {x});
        check_grad(
            [dim](const std::vector<Tensor>& in) {
                return log_softmax(in[0].transpose(0, 2), dim);
            },
            {x});
    }
    const Tensor v = leaf({5}, 10, -3, 3);
    check_grad([](const std::vector<Tensor>& in) { return softmax(in[0], 0); }, {v});
    check_grad([](const std::vector<Tensor>& in) { return log_softmax(in[0], -1); }, {v});
}

TEST_CASE("std: the gradient where std is 0 is 0, not NaN", "[grad][reduce]") {
    Tensor x = full({4}, 2.0, {DType::f64}).set_requires_grad(true);
    ember::std(x).backward();
    REQUIRE(values(x.grad()) == std::vector<double>(4, 0.0));
}

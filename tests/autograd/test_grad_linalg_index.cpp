// Gradients of the matrix products and the indexing ops by gradcheck: every
// matmul rank combination with batch broadcasting, bmm, addmm with each bias
// shape, linear with and without bias; index_select, gather, scatter_add,
// index_add and embedding with repeated indices; cat, stack, split and chunk.
#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

Tensor indices(const std::vector<int64_t>& v, const Shape& shape) { return from_vector(v, shape); }

}  // namespace

TEST_CASE("grad: matmul for every rank combination, with batch broadcasting", "[grad]") {
    const std::vector<std::pair<Shape, Shape>> cases = {
        {{4}, {4}},
        {{4}, {4, 3}},
        {{3, 4}, {4}},
        {{3, 4}, {4, 2}},
        {{2, 1, 3, 4}, {5, 4, 2}},
        {{4}, {2, 4, 3}},
        {{2, 3, 4}, {4}},
        {{2, 3, 4}, {4, 5}},
        {{1, 4}, {4, 1}},
    };
    uint64_t seed = 10;
    for (const auto& [sa, sb] : cases)
        for (int which = 0; which < 3; ++which) {  // both, only a, only b need grad
            INFO(shape_str(sa) << " · " << shape_str(sb) << ", case " << which);
            Tensor a = leaf(sa, ++seed), b = leaf(sb, ++seed);
            if (which == 2) a.set_requires_grad(false);
            if (which == 1) b.set_requires_grad(false);
            check_grad([](const std::vector<Tensor>& x) { return matmul(x[0], x[1]); }, {a, b});
        }
    // Transposed operands are read in place by the forward and the backward.
    Tensor base_a = leaf({4, 3}, 40), base_b = leaf({5, 4}, 41);
    check_grad([](const std::vector<Tensor>& x) { return matmul(x[0].t(), x[1].t()); },
               {base_a, base_b});
}

TEST_CASE("grad: bmm and addmm", "[grad]") {
    Tensor a = leaf({2, 3, 4}, 1), b = leaf({2, 4, 5}, 2);
    check_grad([](const std::vector<Tensor>& x) { return bmm(x[0], x[1]); }, {a, b});
    check_grad([](const std::vector<Tensor>& x) { return bmm(x[0], x[1].transpose(1, 2)); },
               {a, leaf({2, 5, 4}, 3)});
    Tensor m1 = leaf({3, 4}, 4), m2 = leaf({4, 5}, 5);
    for (const Shape& sc : {Shape{5}, Shape{1, 5}, Shape{3, 1}, Shape{3, 5}}) {
        INFO("bias " << shape_str(sc));
        check_grad([](const std::vector<Tensor>& x) { return addmm(x[0], x[1], x[2]); },
                   {leaf(sc, 6), m1, m2});
    }
    // Only the bias needs grad, then only the matrices.
    check_grad([&](const std::vector<Tensor>& x) { return addmm(x[0], m1.detach(), m2.detach()); },
               {leaf({5}, 7)});
    const Tensor c = constant({5}, 8);
    check_grad([&](const std::vector<Tensor>& x) { return addmm(c, x[0], x[1]); }, {m1, m2});
}

TEST_CASE("grad: linear with and without bias, 1-d, 2-d and 3-d input", "[grad]") {
    Tensor w = leaf({5, 4}, 1), bias = leaf({5}, 2);
    for (const Shape& sx : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
        INFO("x " << shape_str(sx));
        Tensor x = leaf(sx, 3);
        check_grad([](const std::vector<Tensor>& in) { return linear(in[0], in[1], in[2]); },
                   {x, w, bias});
        check_grad([](const std::vector<Tensor>& in) { return linear(in[0], in[1]); }, {x, w});
    }
    // A transposed input row block, and the weight only.
    check_grad([](const std::vector<Tensor>& in) { return linear(in[0].t(), in[1], in[2]); },
               {leaf({4, 3}, 4), w, bias});
    const Tensor xc = constant({3, 4}, 5);
    check_grad([&](const std::vector<Tensor>& in) { return linear(xc, in[0]); }, {w});
}

// linear_relu's backward masks dy by y > 0; the inputs keep every
// pre-ReLU value away from 0, where the finite difference would straddle the kink.
TEST_CASE("grad: linear_relu with and without bias", "[grad]") {
    Tensor w = leaf({5, 4}, 11), bias = leaf({5}, 12);
    for (const Shape& sx : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
        INFO("x " << shape_str(sx));
        Tensor x = leaf(sx, 13);
        const Tensor pre = linear(x.detach(), w.detach(), bias.detach());
        for (double v : values(pre)) REQUIRE(std::abs(v) > 1e-3);
        check_grad([](const std::vector<Tensor>& in) { return linear_relu(in[0], in[1], in[2]); },
                   {x, w, bias});
        check_grad([](const std::vector<Tensor>& in) { return linear_relu(in[0], in[1]); }, {x, w});
    }
}

TEST_CASE("grad: linear_gelu (tanh approximation) with and without bias", "[grad]") {
    Tensor w = leaf({5, 4}, 14), bias = leaf({5}, 15);
    for (const Shape& sx : {Shape{4}, Shape{3, 4}, Shape{2, 3, 4}}) {
        INFO("x " << shape_str(sx));
        Tensor x = leaf(sx, 16);
        check_grad([](const std::vector<Tensor>& in) { return linear_gelu(in[0], in[1], in[2]); },
                   {x, w, bias});
        check_grad([](const std::vector<Tensor>& in) { return linear_gelu(in[0], in[1]); }, {x, w});
    }
}

TEST_CASE("grad: index_select and gather with repeated indices", "[grad]") {
    Tensor x = leaf({4, 3}, 1);
    const Tensor i0 = indices({2, 0, 2, 3}, {4});
    const Tensor i1 = indices({1, 1, 0}, {3});
    check_grad([&](const std::vector<Tensor>& in) { return index_select(in[0], 0, i0); }, {x});
    check_grad([&](const std::vector<Tensor>& in) { return index_select(in[0], -1, i1); }, {x});
    check_grad([&](const std::vector<Tensor>& in) { return index_select(in[0].t(), 1, i0); }, {x});
    const Tensor one = indices({2}, {});  // 0-d index: one entry
    check_grad([&](const std::vector<Tensor>& in) { return index_select(in[0], 0, one); }, {x});
    const Tensor i32 = from_vector<int32_t>({0, 0, 3}, {3});
    check_grad([&](const std::vector<Tensor>& in) { return index_select(in[0], 0, i32); }, {x});

    // gather: index smaller than the input in the other dim, with repeats.
    const Tensor g1 = indices({3, 3, 0, 1, 2, 2}, {3, 2});
    const Tensor g0 = indices({0, 3, 3, 1, 1, 0}, {2, 3});
    check_grad([&](const std::vector<Tensor>& in) { return gather(in[0].t(), 1, g1); }, {x});
    check_grad([&](const std::vector<Tensor>& in) { return gather(in[0], 0, g0); }, {x});
}

TEST_CASE("grad: scatter_add with src larger than index, and index_add", "[grad]") {
    Tensor self = leaf({3, 4}, 1), src = leaf({4, 5}, 2);
    const Tensor i0 = indices({2, 0, 2, 1, 1, 0}, {2, 3});  // dim 0: values < 3
    const Tensor i1 = indices({3, 3, 0, 1, 0, 2}, {2, 3});  // dim 1: values < 4
    check_grad([&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, i0, in[1]); },
               {self, src});
    check_grad([&](const std::vector<Tensor>& in) { return scatter_add(in[0], -1, i1, in[1]); },
               {self, src});
    // The part of src outside index's extent is not used: exactly zero gradient.
    grads_of([&](const std::vector<Tensor>& in) { return scatter_add(in[0], 0, i0, in[1]); },
             {self, src});
    const std::vector<double> gs = values(src.grad());
    for (int64_t r = 0; r < 4; ++r)
        for (int64_t c = 0; c < 5; ++c)
            CHECK(gs[size_t(r * 5 + c)] == (r < 2 && c < 3 ? 1.0 : 0.0));

    Tensor s2 = leaf({4, 3}, 3), source = leaf({5, 3}, 4);
    const Tensor ia = indices({0, 2, 0, 3, 2}, {5});
    check_grad([&](const std::vector<Tensor>& in) { return index_add(in[0], 0, ia, in[1]); },
               {s2, source});
    Tensor s3 = leaf({2, 4}, 5), source3 = leaf({2, 3}, 6);
    const Tensor ib = indices({3, 3, 1}, {3});
    check_grad([&](const std::vector<Tensor>& in) { return index_add(in[0], 1, ib, in[1]); },
               {s3, source3});
    check_grad([&](const std::vector<Tensor>& in) { return index_add(in[0].t(), 1, ib, in[1]); },
               {leaf({4, 2}, 7), leaf({2, 3}, 8)});
}

TEST_CASE("grad: embedding adds the gradient of repeated indices into one row", "[grad]") {
    Tensor weight = leaf({5, 3}, 1);
    const Tensor idx = indices({1, 4, 1, 0, 4, 4}, {2, 3});
    check_grad([&](const std::vector<Tensor>& in) { return embedding(in[0], idx); }, {weight});
    check_grad([&](const std::vector<Tensor>& in) { return embedding(in[0], indices({3}, {})); },
               {weight});
    grads_of([&](const std::vector<Tensor>& in) { return embedding(in[0], idx); }, {weight});
    // Row r's gradient is its count among the indices (upstream gradient 1).
    const std::vector<double> counts = {1, 2, 0, 0, 3};
    std::vector<double> expect;
    for (double n : counts) expect.insert(expect.end(), 3, n);
    REQUIRE(values(weight.grad()) == expect);
}

TEST_CASE("grad: cat and stack, with an input that needs no grad", "[grad]") {
    Tensor a = leaf({2, 3}, 1), c = leaf({2, 4}, 3);
    const Tensor b = constant({2, 1}, 2);
    for (int64_t dim : {1, -1}) {
        INFO("dim " << dim);
        check_grad(
            [&](const std::vector<Tensor>& in) {
                return cat({in[0], b, in[1]}, dim);
            },
            {a, c});
    }
    Tensor d = leaf({3, 2}, 4), e = leaf({1, 2}, 5);
    check_grad(
        [&](const std::vector<Tensor>& in) {
            return cat({in[0], in[1].t(), in[2]}, 0);
        },
        {d, leaf({2, 2}, 6), e});
    // A 1-d empty tensor is skipped by cat; its gradient is empty too.
    Tensor empty1 = zeros({0}, {DType::f64}).set_requires_grad(true);
    check_grad([&](const std::vector<Tensor>& in) { return cat({in[0], in[1]}, 1); }, {a, empty1});
    grads_of([&](const std::vector<Tensor>& in) { return cat({in[0], in[1]}, 1); }, {a, empty1});
    REQUIRE(empty1.grad().shape() == Shape{0});

    Tensor s0 = leaf({2, 3}, 7), s1 = leaf({2, 3}, 8);
    const Tensor s2 = constant({2, 3}, 9);
    for (int64_t dim : {0, 1, 2, -1}) {
        INFO("stack dim " << dim);
        check_grad(
            [&](const std::vector<Tensor>& in) {
                return stack({in[0], s2, in[1]}, dim);
            },
            {s0, s1});
    }
}

TEST_CASE("grad: split and chunk; pieces left unused get a zero gradient", "[grad]") {
    Tensor x = leaf({5, 3}, 1);
    // Pieces [2, 3], [2, 3], [1, 3]; the loss reads the first two only.
    check_grad(
        [](const std::vector<Tensor>& in) {
            std::vector<Tensor> p = split(in[0], 2, 0);
            REQUIRE(p.size() == 3);
            return mul(p[0], p[1]);
        },
        {x});
    check_grad([](const std::vector<Tensor>& in) { return split(in[0], 2, 0)[2]; }, {x});
    grads_of([](const std::vector<Tensor>& in) { return split(in[0], 2, 0)[1]; }, {x});
    std::vector<double> expect(15, 0.0);
    for (size_t i = 6; i < 12; ++i) expect[i] = 1;
    REQUIRE(values(x.grad()) == expect);

    Tensor y = leaf({2, 6}, 2);
    check_grad(
        [](const std::vector<Tensor>& in) {
            std::vector<Tensor> p = split(in[0], std::vector<int64_t>{1, 3, 2}, -1);
            return cat({p[2], p[0]}, 1);
        },
        {y});
    check_grad(
        [](const std::vector<Tensor>& in) {
            std::vector<Tensor> p = chunk(in[0], 4, 1);  // 6 / 4 -> pieces of 2: three of them
            REQUIRE(p.size() == 3);
            return add(p[0], p[2]);
        },
        {y});
    check_grad([](const std::vector<Tensor>& in) { return chunk(in[0].t(), 2, 0)[1]; }, {y});
}

// Gradients of conv2d and the 2-d poolings by gradcheck: every conv option
// (stride, padding, dilation, groups, 1×1, unbatched, no bias, only some
// inputs needing grad), max pooling on tie-free inputs with overlapping
// windows, average pooling with both padding rules, adaptive pooling.
#include <algorithm>
#include <numeric>

#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

// An f64 leaf whose elements are distinct (a seeded permutation of
// (i − n/2)·0.1): no two candidates of a max window are within FD's reach.
Tensor distinct_leaf(const Shape& shape, uint64_t seed) {
    const std::vector<double> key = values(random_tensor(shape, DType::f64, seed));
    std::vector<size_t> order(key.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key[a] < key[b]; });
    std::vector<double> v(key.size());
    for (size_t i = 0; i < order.size(); ++i)
        v[order[i]] = (double(i) - double(order.size()) / 2) * 0.1;
    Tensor t = from_vector(v, shape);
    t.set_requires_grad(true);
    return t;
}

struct ConvCase {
    const char* what;
    Shape x, w;
    bool bias;
    Int2 stride, padding, dilation;
    int64_t groups;
};

}  // namespace

TEST_CASE("grad: conv2d input, weight and bias", "[grad][conv]") {
    const ConvCase cases[] = {
        {"plain 3x3", {2, 3, 5, 6}, {4, 3, 3, 3}, true, {1, 1}, {0, 0}, {1, 1}, 1},
        {"stride 2, padding 1", {2, 3, 7, 6}, {4, 3, 3, 2}, true, {2, 2}, {1, 1}, {1, 1}, 1},
        {"uneven stride and padding", {1, 2, 6, 7}, {3, 2, 2, 3}, true, {1, 2}, {1, 0}, {1, 1}, 1},
        {"dilation 2", {1, 2, 7, 7}, {3, 2, 3, 3}, true, {1, 1}, {2, 2}, {2, 2}, 1},
        {"groups 2", {2, 4, 5, 5}, {6, 2, 3, 3}, true, {2, 1}, {1, 0}, {1, 1}, 2},
        {"depthwise with dilation", {1, 3, 6, 6}, {3, 1, 2, 2}, true, {1, 1}, {1, 1}, {2, 1}, 3},
        {"depthwise, 2 kernels per channel, stride 2", {2, 2, 7, 6}, {4, 1, 3, 3}, true, {2, 2},
         {1, 1}, {1, 1}, 2},
        {"1x1 kernel", {2, 3, 4, 5}, {5, 3, 1, 1}, true, {1, 1}, {0, 0}, {1, 1}, 1},
        {"unbatched [C, H, W]", {3, 5, 5}, {2, 3, 3, 3}, true, {2, 2}, {1, 1}, {1, 1}, 1},
        {"bias undefined", {2, 2, 5, 4}, {3, 2, 3, 2}, false, {1, 1}, {1, 1}, {1, 1}, 1},
        {"size-1 dims", {1, 1, 1, 4}, {2, 1, 1, 3}, true, {1, 1}, {0, 1}, {1, 1}, 1},
    };
    uint64_t seed = 10;
    for (const ConvCase& c : cases) {
        INFO(c.what);
        const Tensor x = leaf(c.x, seed++), w = leaf(c.w, seed++);
        const Tensor b = c.bias ? leaf({c.w[0]}, seed++) : Tensor();
        const GradFn fn = [&](const std::vector<Tensor>& in) {
            return conv2d(in[0], in[1], in[2], c.stride, c.padding, c.dilation, c.groups);
        };
        check_grad(fn, {x, w, b});
    }
}

TEST_CASE("grad: conv2d of strided views", "[grad][conv]") {
    // The leaves are [N, C, W, H] and [O, C, kW, kH]; the conv sees their
    // transposes (non-contiguous).
    const Tensor x = leaf({2, 2, 6, 5}, 30), w = leaf({3, 2, 2, 3}, 31), b = leaf({3}, 32);
    check_grad(
        [](const std::vector<Tensor>& in) {
            return conv2d(in[0].transpose(2, 3), in[1].transpose(2, 3), in[2], {2, 1}, {1, 1});
        },
        {x, w, b});
}

TEST_CASE("grad: conv2d and pooling of an empty batch", "[grad][conv][pool]") {
    // No output element: the weight and bias gradients are zeros of their shapes.
    const Tensor x = leaf({0, 2, 5, 5}, 35), w = leaf({3, 2, 3, 3}, 36), b = leaf({3}, 37);
    const GradFn fn = [](const std::vector<Tensor>& in) {
        return conv2d(in[0], in[1], in[2], {1, 1}, {1, 1});
    };
    check_grad(fn, {x, w, b});
    const std::vector<Tensor> g = grads_of(fn, {x, w, b});
    REQUIRE(g[0].shape() == x.shape());
    check_close(g[1], std::vector<double>(size_t(w.numel()), 0.0), 0, 0);
    check_close(g[2], std::vector<double>(3, 0.0), 0, 0);
    const GradFn pools[] = {
        [](const std::vector<Tensor>& in) { return max_pool2d(in[0], {2, 2}); },
        [](const std::vector<Tensor>& in) { return avg_pool2d(in[0], {2, 2}); },
        [](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], {3, 2}); },
    };
    for (const GradFn& pool : pools) CHECK(grads_of(pool, {x})[0].shape() == x.shape());
}

TEST_CASE("grad: conv2d with only some inputs requiring grad", "[grad][conv]") {
    const Shape xs = {2, 4, 5, 5}, ws = {4, 2, 3, 3};
    const GradFn fn = [](const std::vector<Tensor>& in) {
        return conv2d(in[0], in[1], in[2], {1, 1}, {1, 1}, {1, 1}, 2);
    };
    for (int mask = 1; mask < 7; ++mask) {  // every non-empty proper subset of {x, w, b}
        INFO("requires grad: x " << (mask & 1) << " w " << (mask >> 1 & 1) << " b "
                                 << (mask >> 2 & 1));
        const Tensor x = (mask & 1) ? leaf(xs, 40) : constant(xs, 40);
        const Tensor w = (mask & 2) ? leaf(ws, 41) : constant(ws, 41);
        const Tensor b = (mask & 4) ? leaf({4}, 42) : constant({4}, 42);
        check_grad(fn, {x, w, b});
        const std::vector<Tensor> g = grads_of(fn, {x, w, b});
        for (int i = 0; i < 3; ++i) CHECK(g[size_t(i)].defined() == bool(mask >> i & 1));
    }
    // Nothing requires grad: nothing is recorded.
    const Tensor y =
        conv2d(constant(xs, 40), constant(ws, 41), constant({4}, 42), {1, 1}, {1, 1}, {1, 1}, 2);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
}

TEST_CASE("grad: max_pool2d on tie-free inputs", "[grad][pool]") {
    struct Case {
        const char* what;
        Shape x;
        Int2 kernel, stride, padding, dilation;
        bool ceil_mode;
    };
    const Case cases[] = {
        {"stride = kernel (default)", {2, 2, 6, 4}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, false},
        {"overlapping windows", {2, 2, 7, 6}, {3, 3}, {2, 1}, {0, 0}, {1, 1}, false},
        {"overlapping with padding", {1, 3, 7, 6}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
        {"ceil_mode", {1, 2, 5, 7}, {2, 3}, {2, 2}, {0, 0}, {1, 1}, true},
        {"ceil_mode with padding", {2, 1, 6, 5}, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true},
        {"dilation 2", {1, 2, 7, 7}, {2, 2}, {1, 2}, {1, 0}, {2, 2}, false},
        {"unbatched [C, H, W]", {3, 5, 6}, {3, 2}, {1, 2}, {1, 1}, {1, 1}, false},
    };
    uint64_t seed = 50;
    for (const Case& c : cases) {
        INFO(c.what);
        const Tensor x = distinct_leaf(c.x, seed++);
        check_grad(
            [&](const std::vector<Tensor>& in) {
                return max_pool2d(in[0], c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
            },
            {x});
    }
    INFO("strided input view");
    check_grad(
        [](const std::vector<Tensor>& in) {
            return max_pool2d(in[0].transpose(2, 3), {3, 2}, {2, 1}, {1, 1});
        },
        {distinct_leaf({2, 2, 5, 6}, 60)});
}

TEST_CASE("grad: max_pool2d sends overlapping windows' gradients to one element", "[grad][pool]") {
    // A single large element is the maximum of every 3x3 window with stride 1
    // that covers it: its gradient is the sum of those windows' gradients.
    std::vector<double> v(25);
    for (size_t i = 0; i < v.size(); ++i) v[i] = -double(i) * 0.01;
    v[12] = 10;  // the centre of the 5x5 plane
    const Tensor x = from_vector(v, {1, 1, 5, 5});
    x.set_requires_grad(true);
    const GradFn fn = [](const std::vector<Tensor>& in) {
        return max_pool2d(in[0], {3, 3}, {1, 1});
    };
    const std::vector<Tensor> g = grads_of(fn, {x});
    std::vector<double> want(25, 0.0);
    want[12] = 9;  // all nine 3x3 windows of the 5x5 plane contain the centre
    check_close(g[0], want, 0, 0);
    check_grad(fn, {x});
}

TEST_CASE("grad: avg_pool2d with both padding rules and ceil_mode", "[grad][pool]") {
    struct Case {
        const char* what;
        Shape x;
        Int2 kernel, stride, padding;
        bool ceil_mode;
    };
    const Case cases[] = {
        {"stride = kernel (default)", {2, 2, 6, 4}, {2, 2}, {0, 0}, {0, 0}, false},
        {"overlapping with padding", {2, 2, 6, 7}, {3, 3}, {2, 2}, {1, 1}, false},
        {"uneven kernel", {1, 3, 5, 6}, {2, 3}, {1, 2}, {1, 1}, false},
        {"ceil_mode", {1, 2, 5, 7}, {2, 3}, {2, 2}, {0, 0}, true},
        {"ceil_mode with padding", {2, 1, 6, 5}, {3, 2}, {2, 2}, {1, 1}, true},
        {"unbatched [C, H, W]", {2, 5, 6}, {3, 3}, {2, 1}, {1, 1}, false},
    };
    uint64_t seed = 70;
    for (const Case& c : cases)
        for (bool include_pad : {true, false}) {
            INFO(c.what << ", count_include_pad " << include_pad);
            const Tensor x = leaf(c.x, seed++);
            check_grad(
                [&](const std::vector<Tensor>& in) {
                    return avg_pool2d(in[0], c.kernel, c.stride, c.padding, c.ceil_mode,
                                      include_pad);
                },
                {x});
        }
    INFO("strided input view");
    check_grad(
        [](const std::vector<Tensor>& in) {
            return avg_pool2d(in[0].transpose(2, 3), {3, 3}, {2, 2}, {1, 1}, true, false);
        },
        {leaf({2, 2, 5, 6}, 80)});
}

TEST_CASE("grad: adaptive_avg_pool2d with non-divisible sizes", "[grad][pool]") {
    struct Case {
        Shape x;
        Int2 out;
    };
    const Case cases[] = {
        {{2, 2, 7, 5}, {3, 2}},  // non-divisible: overlapping windows
        {{1, 3, 5, 7}, {2, 4}},
        {{2, 1, 4, 3}, {4, 3}},  // identity sizes
        {{1, 2, 5, 5}, {1, 1}},  // global average
        {{1, 2, 3, 2}, {5, 4}},  // output larger than input
        {{3, 7, 5}, {3, 2}},     // unbatched
    };
    uint64_t seed = 90;
    for (const Case& c : cases) {
        INFO(shape_str(c.x) << " -> " << c.out[0] << "x" << c.out[1]);
        const Tensor x = leaf(c.x, seed++);
        check_grad([&](const std::vector<Tensor>& in) { return adaptive_avg_pool2d(in[0], c.out); },
                   {x});
    }
    // Strided input view.
    const Tensor xt = leaf({1, 2, 5, 7}, 99);
    check_grad(
        [](const std::vector<Tensor>& in) {
            return adaptive_avg_pool2d(in[0].transpose(2, 3), {3, 2});
        },
        {xt});
}

TEST_CASE("grad: pooling of inputs without grad records nothing", "[grad][pool]") {
    const Tensor x = constant({1, 2, 4, 4}, 100);
    CHECK(max_pool2d(x, {2, 2}).grad_fn() == nullptr);
    CHECK(avg_pool2d(x, {2, 2}).grad_fn() == nullptr);
    CHECK(adaptive_avg_pool2d(x, {3, 3}).grad_fn() == nullptr);
    const Tensor xl = leaf({1, 2, 4, 4}, 100);
    CHECK(max_pool2d(xl, {2, 2}).grad_fn()->name == "max_pool2d");
    CHECK(avg_pool2d(xl, {2, 2}).grad_fn()->name == "avg_pool2d");
    CHECK(adaptive_avg_pool2d(xl, {3, 3}).grad_fn()->name == "adaptive_avg_pool2d");
}

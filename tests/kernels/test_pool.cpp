// max_pool2d (values and indices), avg_pool2d and adaptive_avg_pool2d
// against naive references written from PyTorch's documented rules: padding,
// ceil_mode (with its dropped last window), dilation, count_include_pad both
// ways, non-divisible adaptive sizes, ties and NaN, every floating dtype,
// strided inputs, a poisoned output, and the argument errors.
#include <cmath>
#include <limits>

#include "kernels/cpu/pool.h"
#include "kernels/front.h"
#include "kernels/pool.h"
#include "support/linalg_cases.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// PyTorch's window rule for one output element: taps y0 + i·d for i < k.
struct Taps {
    int64_t start, k, d;
};

// Max and flat index over in-bounds taps; the first maximum wins, a NaN
// always wins (so the last NaN is kept).
void reference_max_pool(const Tensor& x, const PoolCase& c, std::vector<double>* v,
                        std::vector<double>* idx) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const Int2 st = c.stride[0] == 0 ? c.kernel : c.stride;
    const std::vector<double> vx = values(x);
    for (int64_t p = 0; p < N * C; ++p)
        for (int64_t oy = 0; oy < c.out[2]; ++oy)
            for (int64_t ox = 0; ox < c.out[3]; ++ox) {
                double best = 0;
                int64_t at = -1;
                for (int64_t i = 0; i < c.kernel[0]; ++i)
                    for (int64_t j = 0; j < c.kernel[1]; ++j) {
                        const int64_t y = oy * st[0] - c.padding[0] + i * c.dilation[0];
                        const int64_t xx = ox * st[1] - c.padding[1] + j * c.dilation[1];
                        if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                        const double e = vx[size_t(p * H * W + y * W + xx)];
                        if (at < 0 || e > best || std::isnan(e)) best = e, at = y * W + xx;
                    }
                v->push_back(best);
                idx->push_back(double(at));
            }
}

// Mean over the window: the divisor is the number of taps inside the input
// padded by p on both sides (count_include_pad) or inside the input itself.
std::vector<double> reference_avg_pool(const Tensor& x, const PoolCase& c, bool include_pad) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const Int2 st = c.stride[0] == 0 ? c.kernel : c.stride;
    const std::vector<double> vx = values(x);
    std::vector<double> out;
    for (int64_t p = 0; p < N * C; ++p)
        for (int64_t oy = 0; oy < c.out[2]; ++oy)
            for (int64_t ox = 0; ox < c.out[3]; ++ox) {
                double sum = 0;
                int64_t inside = 0, padded = 0;
                for (int64_t i = 0; i < c.kernel[0]; ++i)
                    for (int64_t j = 0; j < c.kernel[1]; ++j) {
                        const int64_t y = oy * st[0] - c.padding[0] + i;
                        const int64_t xx = ox * st[1] - c.padding[1] + j;
                        if (y < H + c.padding[0] && xx < W + c.padding[1]) ++padded;
                        if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                        sum += vx[size_t(p * H * W + y * W + xx)];
                        ++inside;
                    }
                out.push_back(inside == 0 ? 0.0 : sum / double(include_pad ? padded : inside));
            }
    return out;
}

std::vector<double> reference_adaptive(const Tensor& x, int64_t oh, int64_t ow) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const std::vector<double> vx = values(x);
    std::vector<double> out;
    for (int64_t p = 0; p < N * C; ++p)
        for (int64_t i = 0; i < oh; ++i)
            for (int64_t j = 0; j < ow; ++j) {
                const auto y0 = int64_t(std::floor(double(i * H) / double(oh)));
                const auto y1 = int64_t(std::ceil(double((i + 1) * H) / double(oh)));
                const auto x0 = int64_t(std::floor(double(j * W) / double(ow)));
                const auto x1 = int64_t(std::ceil(double((j + 1) * W) / double(ow)));
                double sum = 0;
                for (int64_t y = y0; y < y1; ++y)
                    for (int64_t xx = x0; xx < x1; ++xx) sum += vx[size_t(p * H * W + y * W + xx)];
                out.push_back(sum / double((y1 - y0) * (x1 - x0)));
            }
    return out;
}

const PoolCase kMaxCases[] = {
    {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, {2, 3, 4, 4}},
    {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, {2, 3, 4, 4}},
    {{1, 2, 8, 8}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, false, {1, 2, 3, 3}},
    {{1, 2, 8, 8}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true, {1, 2, 4, 4}},    // ceil adds a window
    {{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true, {1, 2, 3, 3}},    // ...but not one in the
                                                                           // padding
    {{2, 2, 9, 10}, {3, 2}, {1, 2}, {1, 1}, {2, 2}, false, {2, 2, 7, 5}},  // dilation
    {{1, 3, 11, 7}, {4, 3}, {3, 2}, {2, 1}, {1, 3}, true, {1, 3, 5, 2}},
    {{2, 4, 6, 6}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, false, {2, 4, 3, 3}},  // stride = kernel
    {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false, {1, 1, 1, 1}},
    {{0, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, {0, 3, 2, 2}},
    {{4, 16, 32, 32}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, {4, 16, 16, 16}},  // threaded
};

// avg_pool2d cases (no dilation).
const PoolCase kAvgCases[] = {
    {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, {2, 3, 4, 4}},
    {{1, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, {1, 2, 5, 5}},  // last window past the
                                                                         // padding
    {{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true, {1, 2, 3, 3}},
    {{2, 2, 6, 9}, {2, 4}, {1, 3}, {1, 2}, {1, 1}, false, {2, 2, 7, 4}},
    {{1, 2, 10, 10}, {5, 5}, {3, 3}, {2, 2}, {1, 1}, true, {1, 2, 4, 4}},
    {{2, 4, 6, 6}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, false, {2, 4, 3, 3}},
    {{4, 16, 32, 32}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, {4, 16, 17, 17}},
};

}  // namespace

TEST_CASE("max_pool2d values and indices match the reference", "[pool]") {
    uint64_t seed = 2000;
    for (const PoolCase& c : kMaxCases) {
        for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
            const Tensor x = random_tensor(c.input, dt, ++seed);
            INFO("input " << shape_str(c.input) << " kernel "
                          << shape_str({c.kernel[0], c.kernel[1]}) << " ceil " << c.ceil_mode << " "
                          << dtype_name(dt));
            std::vector<double> v, idx;
            reference_max_pool(x, c, &v, &idx);
            for (const Tensor& xi : {x, non_contiguous(x)}) {
                const auto [values, indices] =
                    kernels::max_pool2d(xi, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
                REQUIRE(values.shape() == c.out);
                REQUIRE(indices.shape() == c.out);
                REQUIRE(values.dtype() == dt);
                REQUIRE(indices.dtype() == DType::i64);
                check_close(values, v, 0, 0);  // a max is exact
                check_close(indices, idx, 0, 0);
            }
        }
    }
}

TEST_CASE("max_pool2d breaks ties to the first element and propagates NaN", "[pool]") {
    // All-equal input: every window points at its first in-bounds element.
    const PoolCase c = {{1, 1, 5, 5}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, {1, 1, 3, 3}};
    const auto [v1, i1] = kernels::max_pool2d(ones({1, 1, 5, 5}), c.kernel, c.stride, c.padding);
    check_close(v1, std::vector<double>(9, 1.0), 0, 0);
    check_close(i1, {0, 1, 3, 5, 6, 8, 15, 16, 18}, 0, 0);
    // All -inf: the index still points inside the window.
    const auto [v2, i2] =
        kernels::max_pool2d(full({1, 1, 5, 5}, -INFINITY), c.kernel, c.stride, c.padding);
    check_close(i2, {0, 1, 3, 5, 6, 8, 15, 16, 18}, 0, 0);
    // NaN wins over larger values.
    Tensor x = random_tensor({1, 1, 4, 4}, DType::f32, 9);
    x.set({0, 0, 1, 2}, NAN);
    const auto [v3, i3] = kernels::max_pool2d(x, {2, 2});
    REQUIRE(std::isnan(v3.at({0, 0, 0, 1})));
    REQUIRE(i3.at({0, 0, 0, 1}) == 6);
}

TEST_CASE("avg_pool2d matches the reference with and without counting padding", "[pool]") {
    uint64_t seed = 3000;
    for (const PoolCase& c : kAvgCases) {
        for (bool include_pad : {true, false}) {
            for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
                const Tensor x = random_tensor(c.input, dt, ++seed);
                INFO("input " << shape_str(c.input) << " kernel "
                              << shape_str({c.kernel[0], c.kernel[1]}) << " ceil " << c.ceil_mode
                              << " include_pad " << include_pad << " " << dtype_name(dt));
                const std::vector<double> want = reference_avg_pool(x, c, include_pad);
                for (const Tensor& xi : {x, non_contiguous(x)}) {
                    const Tensor y = kernels::avg_pool2d(xi, c.kernel, c.stride, c.padding,
                                                         c.ceil_mode, include_pad);
                    REQUIRE(y.shape() == c.out);
                    check_close(y, want, rtol_for(dt), dt == DType::f64 ? 1e-14 : 1e-6);
                }
            }
        }
    }
}

TEST_CASE("adaptive_avg_pool2d matches the reference on non-divisible sizes", "[pool]") {
    struct Case {
        Shape input;
        Int2 out;
    };
    const Case cases[] = {
        {{2, 3, 7, 9}, {3, 4}}, {{1, 2, 5, 5}, {2, 2}}, {{1, 2, 10, 10}, {3, 3}},
        {{1, 2, 4, 4}, {4, 4}}, {{1, 2, 3, 3}, {5, 5}}, {{1, 1, 1, 1}, {2, 2}},
        {{2, 3, 6, 6}, {1, 1}}, {{0, 3, 4, 4}, {2, 2}}, {{8, 32, 17, 13}, {5, 6}}};
    uint64_t seed = 4000;
    for (const Case& c : cases)
        for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
            INFO("input " << shape_str(c.input) << " -> " << c.out[0] << "x" << c.out[1] << " "
                          << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed);
            const std::vector<double> want = reference_adaptive(x, c.out[0], c.out[1]);
            for (const Tensor& xi : {x, non_contiguous(x)}) {
                const Tensor y = kernels::adaptive_avg_pool2d(xi, c.out);
                REQUIRE(y.shape() == Shape{c.input[0], c.input[1], c.out[0], c.out[1]});
                check_close(y, want, rtol_for(dt), dt == DType::f64 ? 1e-14 : 1e-6);
            }
        }
}

TEST_CASE("adaptive_avg_pool2d of a channels-last input gives the per-plane loop's bits",
          "[pool]") {
    // The channels-last input is summed a pixel's channels at a time, in the
    // plane loop's order: the same bits, not merely close ones.
    struct Case {
        Shape input;
        Int2 out;
    };
    const Case cases[] = {{{2, 3, 7, 9}, {3, 4}},     {{2, 16, 8, 8}, {1, 1}},
                          {{3, 5, 6, 6}, {2, 3}},     {{1, 2, 3, 3}, {5, 5}},
                          {{8, 32, 17, 13}, {5, 6}},  {{16, 64, 8, 8}, {1, 1}},
                          {{2, 1, 4, 4}, {1, 1}}};
    uint64_t seed = 4100;
    for (const Case& c : cases)
        for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
            INFO("input " << shape_str(c.input) << " -> " << c.out[0] << "x" << c.out[1] << " "
                          << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed, -4, 4);
            const Tensor last = x.contiguous(MemoryFormat::channels_last);
            const Tensor planes = kernels::adaptive_avg_pool2d(x, c.out);
            const Tensor y = kernels::adaptive_avg_pool2d(last, c.out);
            REQUIRE(y.shape() == planes.shape());
            CHECK(values(y) == values(planes));
            check_close(y, reference_adaptive(x, c.out[0], c.out[1]), rtol_for(dt),
                        dt == DType::f64 ? 1e-14 : 1e-6);
        }
}

TEST_CASE("pooling takes an unbatched [C, H, W] input", "[pool]") {
    const Tensor x = random_tensor({3, 6, 5}, DType::f32, 11);
    const auto [v, i] = kernels::max_pool2d(x, {2, 2}, {2, 1});
    REQUIRE(v.shape() == Shape{3, 3, 4});
    const auto [v4, i4] = kernels::max_pool2d(x.unsqueeze(0), {2, 2}, {2, 1});
    check_close(v, values(v4), 0, 0);
    check_close(i, values(i4), 0, 0);
    REQUIRE(kernels::avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}).shape() == Shape{3, 6, 5});
    REQUIRE(kernels::adaptive_avg_pool2d(x, {2, 2}).shape() == Shape{3, 2, 2});
}

TEST_CASE("cpu pooling kernels overwrite a poisoned output", "[pool]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const PoolCase c = kMaxCases[6];
    const Tensor x = random_tensor(c.input, DType::f32, 12);
    std::vector<double> v, idx;
    reference_max_pool(x, c, &v, &idx);
    Tensor values = full(c.out, nan), indices = full(c.out, -7, {DType::i64});
    const kernels::Pool2dWindow w{c.kernel[0],  c.kernel[1],  c.stride[0],   c.stride[1],
                                       c.padding[0], c.padding[1], c.dilation[0], c.dilation[1]};
    kernels::cpu::max_pool2d(kernels::view_of(values), kernels::view_of(indices),
                             kernels::view_of(x), w);
    check_close(values, v, 0, 0);
    check_close(indices, idx, 0, 0);

    const PoolCase a = kAvgCases[1];
    const Tensor xa = random_tensor(a.input, DType::f32, 13);
    Tensor out = full(a.out, nan);
    kernels::cpu::avg_pool2d(
        kernels::view_of(out), kernels::view_of(xa),
        {a.kernel[0], a.kernel[1], a.stride[0], a.stride[1], a.padding[0], a.padding[1]}, false);
    check_close(out, reference_avg_pool(xa, a, false), 2e-5, 1e-6);

    out = full({1, 2, 3, 4}, nan);
    kernels::cpu::adaptive_avg_pool2d(kernels::view_of(out), kernels::view_of(xa));
    check_close(out, reference_adaptive(xa, 3, 4), 2e-5, 1e-6);
}

TEST_CASE("pooling errors name the op, the window and the input", "[pool][errors]") {
    const Tensor x = random_tensor({1, 2, 6, 6}, DType::f32, 21);
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d(random_tensor({4, 4}, DType::f32, 22), {2, 2}),
        "max_pool2d: expected input [N, C, H, W] or [C, H, W], got f32 [4, 4] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d(random_tensor({1, 1, 4, 4}, DType::i32, 23, -2, 2), {2, 2}),
        "max_pool2d: expected a floating-point tensor, got i32 [1, 1, 4, 4] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d(x, {0, 2}),
        "max_pool2d: expected kernel, stride and dilation >= 1, got kernel [0, 2]");
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d(x, {2, 2}, {0, 2}), "stride [0, 2]");
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d(x, {2, 2}, {2, 2}, {0, 0}, {1, 0}),
                            "dilation [1, 0]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d(x, {3, 3}, {1, 1}, {2, 0}),
        "max_pool2d: padding [2, 0] must be between 0 and half the kernel [3, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d(x, {3, 3}, {1, 1}, {-1, 0}), "padding [-1, 0]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d(x, {4, 4}, {1, 1}, {0, 0}, {3, 3}),
        "max_pool2d: output size -3x-3 is too small for input f32 [1, 2, 6, 6] on cpu "
        "(kernel [4, 4], stride [1, 1], padding [0, 0], dilation [3, 3])");
    REQUIRE_THROWS_WITH_MSG(kernels::avg_pool2d(x, {7, 2}),
                            "avg_pool2d: output size 0x3 is too small");
    REQUIRE_THROWS_WITH_MSG(kernels::avg_pool2d(x, {2, 2}, {1, 1}, {0, 2}),
                            "avg_pool2d: padding [0, 2] must be");
    REQUIRE_THROWS_WITH_MSG(kernels::avg_pool2d(random_tensor({6}, DType::f32, 24), {2, 2}),
                            "avg_pool2d: expected input");
    REQUIRE_THROWS_WITH_MSG(kernels::adaptive_avg_pool2d(x, {0, 2}),
                            "adaptive_avg_pool2d: output size [0, 2] must be at least 1x1");
    REQUIRE_THROWS_WITH_MSG(
        kernels::adaptive_avg_pool2d(random_tensor({1, 2, 0, 3}, DType::f32, 25), {1, 1}),
        "adaptive_avg_pool2d: input f32 [1, 2, 0, 3] on cpu has an empty plane");
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d(Tensor(), {2, 2}), "max_pool2d: undefined input");
}

TEST_CASE("pooling rejects windows that see no input and oversized parameters", "[pool][errors]") {
    Tensor x = ones({1, 1, 1, 1});
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d(x, {2, 2}, {0, 0}, {1, 1}, {2, 2}, false),
                            "covers no element of input");
    const int64_t big = int64_t(1) << 62;
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d(ones({1, 1, 4, 4}), {big, 1}, {1, 1}, {big / 2, 0}, {1, 1}, false),
        "exceed 2^30");
}

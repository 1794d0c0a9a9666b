// The pooling backwards against naive f64 loops written from the definitions
// (each input element gathers from the windows that used it): overlapping
// windows, padding, ceil_mode, dilation, count_include_pad both ways,
// non-divisible adaptive sizes, duplicate max indices, every floating dtype,
// strided and unbatched operands; central differences of the forwards in
// f64; bit-identical results for 1 and 2 threads; poisoned outputs; errors.
#include <omp.h>

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

// d x[p, y, x] = Σ of dy over the outputs of plane p whose window maximum
// (the first largest in-bounds tap) is (y, x).
std::vector<double> reference_max_backward(const Tensor& dy, const Tensor& x, const PoolCase& c) {
    const int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
    const int64_t OH = c.out[2], OW = c.out[3];
    const Int2 st = c.stride[0] == 0 ? c.kernel : c.stride;
    const std::vector<double> vx = values(x), vy = values(dy);
    std::vector<int64_t> arg(size_t(P * OH * OW));
    for (int64_t p = 0; p < P; ++p)
        for (int64_t q = 0; q < OH * OW; ++q) {
            double best = 0;
            int64_t at = -1;
            for (int64_t i = 0; i < c.kernel[0]; ++i)
                for (int64_t j = 0; j < c.kernel[1]; ++j) {
                    const int64_t y = q / OW * st[0] - c.padding[0] + i * c.dilation[0];
                    const int64_t xx = q % OW * st[1] - c.padding[1] + j * c.dilation[1];
                    if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                    const double e = vx[size_t(p * H * W + y * W + xx)];
                    if (at < 0 || e > best) best = e, at = y * W + xx;
                }
            arg[size_t(p * OH * OW + q)] = at;
        }
    std::vector<double> dx;
    for (int64_t p = 0; p < P; ++p)
        for (int64_t e = 0; e < H * W; ++e) {
            double s = 0;
            for (int64_t q = 0; q < OH * OW; ++q)
                if (arg[size_t(p * OH * OW + q)] == e) s += vy[size_t(p * OH * OW + q)];
            dx.push_back(s);
        }
    return dx;
}

// d x[p, y, x] = Σ of dy / divisor over the windows that hold (y, x); the
// divisor counts the window's taps inside the input padded by p on both
// sides (count_include_pad) or inside the input.
std::vector<double> reference_avg_backward(const Tensor& dy, const Tensor& x, const PoolCase& c,
                                           bool include_pad) {
    const int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
    const int64_t OH = c.out[2], OW = c.out[3];
    const Int2 st = c.stride[0] == 0 ? c.kernel : c.stride;
    const std::vector<double> vy = values(dy);
    auto divisor = [&](int64_t oy, int64_t ox) {
        int64_t inside = 0, padded = 0;
        for (int64_t i = 0; i < c.kernel[0]; ++i)
            for (int64_t j = 0; j < c.kernel[1]; ++j) {
                const int64_t y = oy * st[0] - c.padding[0] + i, xx = ox * st[1] - c.padding[1] + j;
                if (y < H + c.padding[0] && xx < W + c.padding[1]) ++padded;
                if (y >= 0 && y < H && xx >= 0 && xx < W) ++inside;
            }
        return double(include_pad ? padded : inside);
    };
    std::vector<double> dx;
    for (int64_t p = 0; p < P; ++p)
        for (int64_t y = 0; y < H; ++y)
            for (int64_t xx = 0; xx < W; ++xx) {
                double s = 0;
                for (int64_t oy = 0; oy < OH; ++oy)
                    for (int64_t ox = 0; ox < OW; ++ox) {
                        const int64_t y0 = oy * st[0] - c.padding[0],
                                      x0 = ox * st[1] - c.padding[1];
                        if (y < y0 || y >= y0 + c.kernel[0] || xx < x0 || xx >= x0 + c.kernel[1])
                            continue;
                        s += vy[size_t((p * OH + oy) * OW + ox)] / divisor(oy, ox);
                    }
                dx.push_back(s);
            }
    return dx;
}

// d x[p, y, x] = Σ of dy / window size over the adaptive windows that hold (y, x).
std::vector<double> reference_adaptive_backward(const Tensor& dy, const Tensor& x) {
    const int64_t P = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
    const int64_t OH = dy.size(-2), OW = dy.size(-1);
    const std::vector<double> vy = values(dy);
    auto lo = [](int64_t i, int64_t in, int64_t out) {
        return int64_t(std::floor(double(i * in) / double(out)));
    };
    auto hi = [](int64_t i, int64_t in, int64_t out) {
        return int64_t(std::ceil(double((i + 1) * in) / double(out)));
    };
    std::vector<double> dx;
    for (int64_t p = 0; p < P; ++p)
        for (int64_t y = 0; y < H; ++y)
            for (int64_t xx = 0; xx < W; ++xx) {
                double s = 0;
                for (int64_t i = 0; i < OH; ++i)
                    for (int64_t j = 0; j < OW; ++j) {
                        const int64_t y0 = lo(i, H, OH), y1 = hi(i, H, OH);
                        const int64_t x0 = lo(j, W, OW), x1 = hi(j, W, OW);
                        if (y < y0 || y >= y1 || xx < x0 || xx >= x1) continue;
                        s += vy[size_t((p * OH + i) * OW + j)] / double((y1 - y0) * (x1 - x0));
                    }
                dx.push_back(s);
            }
    return dx;
}

const PoolCase kMaxCases[] = {
    {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, {2, 3, 4, 4}},   // overlapping
    {{1, 2, 8, 8}, {3, 3}, {2, 2}, {0, 0}, {1, 1}, true, {1, 2, 4, 4}},    // ceil adds a window
    {{1, 2, 6, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, false, {1, 2, 6, 5}},   // stride 1: 9 windows
                                                                           // each
    {{2, 2, 9, 10}, {3, 2}, {1, 2}, {1, 1}, {2, 2}, false, {2, 2, 7, 5}},  // dilation
    {{1, 3, 11, 7}, {4, 3}, {3, 2}, {2, 1}, {1, 3}, true, {1, 3, 5, 2}},
    {{2, 4, 6, 6}, {2, 2}, {0, 0}, {0, 0}, {1, 1}, false, {2, 4, 3, 3}},  // disjoint windows
    {{1, 2, 9, 9}, {2, 2}, {4, 4}, {0, 0}, {1, 1}, false, {1, 2, 2, 2}},  // gaps: zero grads
    {{1, 1, 1, 1}, {1, 1}, {1, 1}, {0, 0}, {1, 1}, false, {1, 1, 1, 1}},
    {{0, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, {0, 3, 2, 2}},
    {{4, 16, 32, 32}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, {4, 16, 16, 16}},  // threaded
};

const PoolCase kAvgCases[] = {
    {{2, 3, 7, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false, {2, 3, 4, 4}},
    {{1, 2, 8, 8}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true, {1, 2, 5, 5}},  // last window past
                                                                         // the padding
    {{1, 2, 5, 5}, {2, 2}, {2, 2}, {1, 1}, {1, 1}, true, {1, 2, 3, 3}},
    {{2, 2, 6, 9}, {2, 4}, {1, 3}, {1, 2}, {1, 1}, false, {2, 2, 7, 4}},
    {{1, 2, 10, 10}, {5, 5}, {3, 3}, {2, 2}, {1, 1}, true, {1, 2, 4, 4}},
    {{1, 2, 9, 9}, {2, 2}, {4, 4}, {0, 0}, {1, 1}, false, {1, 2, 2, 2}},  // gaps
    {{0, 3, 4, 4}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false, {0, 3, 2, 2}},
    {{4, 16, 32, 32}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, true, {4, 16, 32, 32}},  // threaded
};

struct AdaptiveCase {
    Shape input;
    Int2 out;
};
const AdaptiveCase kAdaptiveCases[] = {
    {{2, 3, 7, 9}, {3, 4}}, {{1, 2, 5, 5}, {2, 2}}, {{1, 2, 10, 10}, {3, 3}},
    {{1, 2, 4, 4}, {4, 4}}, {{1, 2, 3, 3}, {5, 5}}, {{1, 1, 1, 1}, {2, 2}},
    {{2, 3, 6, 6}, {1, 1}}, {{0, 3, 4, 4}, {2, 2}}, {{8, 32, 17, 13}, {5, 6}}};

Shape adaptive_out(const AdaptiveCase& c) { return {c.input[0], c.input[1], c.out[0], c.out[1]}; }

double sum_tol(DType t) { return t == DType::f64 ? 1e-13 : 1e-5; }

// loss = Σ forward(x) · R: its partial derivatives are the backward of R.
// Checks a few random elements of x by central differences.
template <class Forward>
void check_finite_differences(Tensor x, const Tensor& R, const Tensor& grad, Forward&& forward,
                              uint64_t seed) {
    const std::vector<double> vr = values(R);
    auto loss = [&] {
        const std::vector<double> out = values(forward(x));
        double s = 0;
        for (size_t i = 0; i < out.size(); ++i) s += out[i] * vr[i];
        return s;
    };
    Generator gen(seed);
    for (double u : values(rand({8}, {DType::f64}, &gen))) {
        const Shape at = unravel(int64_t(u * double(x.numel())), x.shape());
        const double v = x.at(at), h = 1e-6;  // far below the gaps between random values
        x.set(at, v + h);
        const double up = loss();
        x.set(at, v - h);
        const double down = loss();
        x.set(at, v);
        INFO("element " << shape_str(at));
        CHECK(std::abs((up - down) / (2 * h) - grad.at(at)) <= 1e-7 * (1 + std::abs(up)));
    }
}

}  // namespace

TEST_CASE("max_pool2d_backward matches the definition", "[pool]") {
    uint64_t seed = 7000;
    for (const PoolCase& c : kMaxCases) {
        for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
            INFO("input " << shape_str(c.input) << " kernel "
                          << shape_str({c.kernel[0], c.kernel[1]}) << " ceil " << c.ceil_mode << " "
                          << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed);
            const Tensor dy = random_tensor(c.out, dt, ++seed);
            const auto idx =
                kernels::max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode)
                    .indices;
            const std::vector<double> want = reference_max_backward(dy, x, c);
            for (const auto& [g, i] :
                 {std::pair{dy, idx}, std::pair{non_contiguous(dy), non_contiguous(idx)}}) {
                const Tensor dx = kernels::max_pool2d_backward(g, x, i);
                REQUIRE(dx.shape() == c.input);
                REQUIRE(dx.dtype() == dt);
                // At most 9 windows share an element: the f32 sums are all but exact.
                check_close(dx, want, rtol_for(dt), sum_tol(dt) * 20);
            }
            check_close(kernels::max_pool2d_backward(dy, non_contiguous(x), idx), want,
                        rtol_for(dt), sum_tol(dt) * 20);
        }
    }
}

TEST_CASE("max_pool2d_backward adds where windows chose the same element", "[pool]") {
    // The center is the maximum of all four 2×2 windows of a 3×3 input.
    Tensor x = random_tensor({1, 1, 3, 3}, DType::f64, 1, -1, 0);
    x.set({0, 0, 1, 1}, 5.0);
    const auto [v, idx] = kernels::max_pool2d(x, {2, 2}, {1, 1});
    check_close(idx, {4, 4, 4, 4}, 0, 0);
    const Tensor dy = from_vector(std::vector<double>{1, 2, 3, 4}, {1, 1, 2, 2});
    check_close(kernels::max_pool2d_backward(dy, x, idx), {0, 0, 0, 0, 10, 0, 0, 0, 0}, 0, 0);
    // Hand-made indices, repeated and in any order, unbatched.
    const Tensor idx2 = from_vector(std::vector<int64_t>{8, 0, 8, 8, 3, 0}, {2, 1, 3});
    const Tensor dy2 = from_vector(std::vector<double>{1, 2, 4, 8, 16, 32}, {2, 1, 3});
    const Tensor dx2 = kernels::max_pool2d_backward(dy2, ones({2, 3, 3}, {DType::f64}), idx2);
    REQUIRE(dx2.shape() == Shape{2, 3, 3});
    check_close(dx2, {2, 0, 0, 0, 0, 0, 0, 0, 5, 32, 0, 0, 16, 0, 0, 0, 0, 8}, 0, 0);
}

TEST_CASE("avg_pool2d_backward matches the definition with and without counting padding",
          "[pool]") {
    uint64_t seed = 8000;
    for (const PoolCase& c : kAvgCases)
        for (bool include_pad : {true, false})
            for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
                INFO("input " << shape_str(c.input) << " kernel "
                              << shape_str({c.kernel[0], c.kernel[1]}) << " ceil " << c.ceil_mode
                              << " include_pad " << include_pad << " " << dtype_name(dt));
                const Tensor x = random_tensor(c.input, dt, ++seed);
                const Tensor dy = random_tensor(c.out, dt, ++seed);
                const std::vector<double> want = reference_avg_backward(dy, x, c, include_pad);
                for (const Tensor& g : {dy, non_contiguous(dy)}) {
                    const Tensor dx =
                        kernels::avg_pool2d_backward(g, non_contiguous(x), c.kernel, c.stride,
                                                     c.padding, c.ceil_mode, include_pad);
                    REQUIRE(dx.shape() == c.input);
                    REQUIRE(dx.dtype() == dt);
                    check_close(dx, want, rtol_for(dt), sum_tol(dt) * 20);
                }
            }
}

TEST_CASE("adaptive_avg_pool2d_backward matches the definition", "[pool]") {
    uint64_t seed = 9000;
    for (const AdaptiveCase& c : kAdaptiveCases)
        for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
            INFO("input " << shape_str(c.input) << " -> " << c.out[0] << "x" << c.out[1] << " "
                          << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed);
            const Tensor dy = random_tensor(adaptive_out(c), dt, ++seed);
            const std::vector<double> want = reference_adaptive_backward(dy, x);
            for (const Tensor& g : {dy, non_contiguous(dy)}) {
                const Tensor dx = kernels::adaptive_avg_pool2d_backward(g, x);
                REQUIRE(dx.shape() == c.input);
                REQUIRE(dx.dtype() == dt);
                check_close(dx, want, rtol_for(dt), sum_tol(dt) * 20);
            }
        }
}

TEST_CASE("adaptive_avg_pool2d_backward gives a channels-last input its gradient in its layout",
          "[pool]") {
    // Windows that tile the plane: written once in the input's dtype and
    // layout. Others (7x9 -> 3x4 overlap): accumulated, then converted. Both
    // hold the bits of the contiguous input's gradient.
    const AdaptiveCase cases[] = {{{2, 16, 8, 8}, {1, 1}}, {{3, 5, 6, 9}, {2, 3}},
                                  {{2, 3, 4, 4}, {4, 4}},  {{16, 64, 8, 8}, {1, 1}},
                                  {{2, 3, 7, 9}, {3, 4}},  {{2, 1, 4, 4}, {2, 2}}};
    uint64_t seed = 9500;
    for (const AdaptiveCase& c : cases)
        for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
            INFO("input " << shape_str(c.input) << " -> " << c.out[0] << "x" << c.out[1] << " "
                          << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed);
            const Tensor last = x.contiguous(MemoryFormat::channels_last);
            const Tensor dy = random_tensor(adaptive_out(c), dt, ++seed);
            const Tensor want = kernels::adaptive_avg_pool2d_backward(dy, x);
            for (const Tensor& g : {dy, non_contiguous(dy)}) {
                const Tensor dx = kernels::adaptive_avg_pool2d_backward(g, last);
                REQUIRE(dx.dtype() == dt);
                CHECK(dx.is_contiguous(MemoryFormat::channels_last));
                CHECK(values(dx) == values(want));
                check_close(dx, reference_adaptive_backward(dy, x), rtol_for(dt), sum_tol(dt) * 20);
            }
        }
}

TEST_CASE("pooling backwards take unbatched [C, H, W] operands", "[pool]") {
    const Tensor x = random_tensor({3, 6, 5}, DType::f32, 11);
    const Tensor dy = random_tensor({3, 3, 4}, DType::f32, 12);
    const auto [v, idx] = kernels::max_pool2d(x, {2, 2}, {2, 1});
    const Tensor dx = kernels::max_pool2d_backward(dy, x, idx);
    REQUIRE(dx.shape() == x.shape());
    check_close(
        dx, values(kernels::max_pool2d_backward(dy.unsqueeze(0), x.unsqueeze(0), idx.unsqueeze(0))),
        0, 0);
    const Tensor da = kernels::avg_pool2d_backward(dy, x, {2, 2}, {2, 1}, {0, 0}, false, true);
    REQUIRE(da.shape() == x.shape());
    check_close(da,
                values(kernels::avg_pool2d_backward(dy.unsqueeze(0), x.unsqueeze(0), {2, 2}, {2, 1},
                                                    {0, 0}, false, true)),
                0, 0);
    const Tensor dd = kernels::adaptive_avg_pool2d_backward(dy, x);
    REQUIRE(dd.shape() == x.shape());
    check_close(dd, reference_adaptive_backward(dy.unsqueeze(0), x.unsqueeze(0)), 2e-5, 1e-6);
}

TEST_CASE("pooling backwards agree with central differences of the forwards in f64", "[pool]") {
    uint64_t seed = 10000;
    for (const PoolCase& c : {kMaxCases[0], kMaxCases[2], kMaxCases[3], kMaxCases[4]}) {
        const Tensor x = random_tensor(c.input, DType::f64, ++seed);
        const Tensor R = random_tensor(c.out, DType::f64, ++seed);
        const Tensor idx =
            kernels::max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode).indices;
        INFO("max_pool2d " << shape_str(c.input));
        check_finite_differences(
            x.clone(), R, kernels::max_pool2d_backward(R, x, idx),
            [&](const Tensor& t) {
                return kernels::max_pool2d(t, c.kernel, c.stride, c.padding, c.dilation,
                                           c.ceil_mode)
                    .values;
            },
            ++seed);
    }
    for (const PoolCase& c : {kAvgCases[0], kAvgCases[1], kAvgCases[3], kAvgCases[4]})
        for (bool include_pad : {true, false}) {
            const Tensor x = random_tensor(c.input, DType::f64, ++seed);
            const Tensor R = random_tensor(c.out, DType::f64, ++seed);
            INFO("avg_pool2d " << shape_str(c.input) << " include_pad " << include_pad);
            check_finite_differences(
                x.clone(), R,
                kernels::avg_pool2d_backward(R, x, c.kernel, c.stride, c.padding, c.ceil_mode,
                                             include_pad),
                [&](const Tensor& t) {
                    return kernels::avg_pool2d(t, c.kernel, c.stride, c.padding, c.ceil_mode,
                                               include_pad);
                },
                ++seed);
        }
    for (const AdaptiveCase& c : {kAdaptiveCases[0], kAdaptiveCases[4], kAdaptiveCases[8]}) {
        const Tensor x = random_tensor(c.input, DType::f64, ++seed);
        const Tensor R = random_tensor(adaptive_out(c), DType::f64, ++seed);
        INFO("adaptive_avg_pool2d " << shape_str(c.input));
        check_finite_differences(
            x.clone(), R, kernels::adaptive_avg_pool2d_backward(R, x),
            [&](const Tensor& t) { return kernels::adaptive_avg_pool2d(t, c.out); }, ++seed);
    }
}

TEST_CASE("pooling backwards are bit-identical for 1 and 2 threads", "[pool]") {
    const Tensor x = random_tensor({4, 16, 32, 32}, DType::f32, 13);
    const auto idx = kernels::max_pool2d(x, {3, 3}, {1, 1}, {1, 1}).indices;
    const Tensor dy = random_tensor({4, 16, 32, 32}, DType::f32, 14);
    const Tensor dz = random_tensor({4, 16, 7, 5}, DType::f32, 15);
    const int saved = omp_get_max_threads();
    std::vector<std::vector<float>> runs[2];
    for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        for (const Tensor& t :
             {kernels::max_pool2d_backward(dy, x, idx),
              kernels::avg_pool2d_backward(dy, x, {3, 3}, {1, 1}, {1, 1}, false, false),
              kernels::adaptive_avg_pool2d_backward(dz, x)})
            runs[threads - 1].push_back(t.to_vector<float>());
    }
    omp_set_num_threads(saved);
    CHECK(runs[0] == runs[1]);
    check_close(from_vector(runs[1][2], x.shape()), reference_adaptive_backward(dz, x), 2e-5, 1e-6);
}

TEST_CASE("cpu pooling backwards overwrite a poisoned grad_input", "[pool]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const PoolCase c = kMaxCases[4];
    const Tensor x = random_tensor(c.input, DType::f32, 16);
    const Tensor dy = random_tensor(c.out, DType::f32, 17);
    const auto idx =
        kernels::max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode).indices;
    Tensor dx = full(c.input, nan);
    REQUIRE_FALSE(kernels::cpu::max_pool2d_backward(kernels::view_of(dx), kernels::view_of(dy),
                                                    kernels::view_of(idx)));
    check_close(dx, reference_max_backward(dy, x, c), 2e-5, 1e-6);

    const PoolCase a = kAvgCases[1];
    const Tensor dya = random_tensor(a.out, DType::f32, 18);
    Tensor dxa = full(a.input, nan);
    kernels::cpu::avg_pool2d_backward(
        kernels::view_of(dxa), kernels::view_of(dya),
        {a.kernel[0], a.kernel[1], a.stride[0], a.stride[1], a.padding[0], a.padding[1]}, false);
    check_close(dxa, reference_avg_backward(dya, dxa, a, false), 2e-5, 1e-6);

    const Tensor dyd = random_tensor({1, 2, 3, 4}, DType::f32, 19);
    dxa = full(a.input, nan);
    kernels::cpu::adaptive_avg_pool2d_backward(kernels::view_of(dxa), kernels::view_of(dyd));
    check_close(dxa, reference_adaptive_backward(dyd, dxa), 2e-5, 1e-6);

    // Written in grad_out's dtype into channels-last memory (windows tile the plane).
    const Tensor dyb = random_tensor({2, 8, 2, 1}, DType::bf16, 20);
    Tensor dxb = full({2, 8, 6, 5}, nan, {DType::bf16}).contiguous(MemoryFormat::channels_last);
    kernels::cpu::adaptive_avg_pool2d_backward(kernels::view_of(dxb), kernels::view_of(dyb));
    check_close(dxb, reference_adaptive_backward(dyb, dxb), rtol_for(DType::bf16), 1e-6);
}

TEST_CASE("pooling backward errors name the op, the shapes and the bad index", "[pool][errors]") {
    const Tensor x = random_tensor({1, 2, 6, 6}, DType::f32, 21);
    const Tensor dy = random_tensor({1, 2, 3, 3}, DType::f32, 22);
    const Tensor idx = kernels::max_pool2d(x, {2, 2}).indices;

    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d_backward(random_tensor({1, 2, 3, 3}, DType::f64, 23), x, idx),
        "max_pool2d_backward: grad_output f64 [1, 2, 3, 3] on cpu and input f32 [1, 2, 6, 6] on "
        "cpu must have one dtype");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d_backward(dy, x, idx.to(DType::i32)),
        "max_pool2d_backward: expected i64 indices, got i32 [1, 2, 3, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d_backward(dy, x, kernels::max_pool2d(x, {3, 3}).indices),
        "max_pool2d_backward: indices i64 [1, 2, 2, 2] on cpu and grad_output f32 [1, 2, 3, 3] on "
        "cpu must have one shape");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d_backward(dy, random_tensor({1, 3, 6, 6}, DType::f32, 24), idx),
        "max_pool2d_backward: grad_output f32 [1, 2, 3, 3] on cpu does not match input f32 "
        "[1, 3, 6, 6] on cpu: expected [1, 3, OH, OW]");
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d_backward(dy.squeeze(0), x, idx.squeeze(0)),
                            "max_pool2d_backward: grad_output f32 [2, 3, 3] on cpu does not match "
                            "input f32 [1, 2, 6, 6] on cpu: expected [1, 2, OH, OW]");
    Tensor bad = idx.clone();
    bad.set({0, 1, 2, 0}, 36);
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d_backward(dy, x, bad),
                            "max_pool2d_backward: index 36 in indices i64 [1, 2, 3, 3] on cpu is "
                            "outside the 6x6 plane of input f32 [1, 2, 6, 6] on cpu");
    bad.set({0, 1, 2, 0}, -1);
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d_backward(dy, x, bad), "index -1 in indices");
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d_backward(dy, Tensor(), idx),
                            "max_pool2d_backward: undefined input");
    REQUIRE_THROWS_WITH_MSG(kernels::max_pool2d_backward(Tensor(), x, idx),
                            "max_pool2d_backward: undefined tensor argument");
    REQUIRE_THROWS_WITH_MSG(
        kernels::max_pool2d_backward(dy, random_tensor({1, 2, 6, 6}, DType::i32, 25, -2, 2), idx),
        "max_pool2d_backward: expected a floating-point tensor, got i32 [1, 2, 6, 6] on cpu");

    REQUIRE_THROWS_WITH_MSG(
        kernels::avg_pool2d_backward(dy, x, {3, 3}, {3, 3}, {0, 0}, false, true),
        "avg_pool2d_backward: grad_output f32 [1, 2, 3, 3] on cpu does not match the avg_pool2d "
        "output shape [1, 2, 2, 2] of input f32 [1, 2, 6, 6] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::avg_pool2d_backward(dy, x, {2, 2}, {2, 2}, {1, 1}, true, true),
                            "does not match the avg_pool2d output shape [1, 2, 4, 4]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::avg_pool2d_backward(dy, x.squeeze(0), {2, 2}, {2, 2}, {0, 0}, false, true),
        "does not match the avg_pool2d output shape [2, 3, 3]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::avg_pool2d_backward(dy, x, {2, 2}, {2, 2}, {0, 2}, false, true),
        "avg_pool2d_backward: padding [0, 2] must be between 0 and half the "
        "kernel [2, 2]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::avg_pool2d_backward(dy, x, {7, 2}, {0, 0}, {0, 0}, false, true),
        "avg_pool2d_backward: output size 0x3 is too small");
    REQUIRE_THROWS_WITH_MSG(
        kernels::avg_pool2d_backward(random_tensor({1, 2, 3, 3}, DType::bf16, 26), x, {2, 2},
                                     {2, 2}, {0, 0}, false, true),
        "avg_pool2d_backward: grad_output bf16 [1, 2, 3, 3] on cpu and input f32 [1, 2, 6, 6] on "
        "cpu must have one dtype");

    REQUIRE_THROWS_WITH_MSG(
        kernels::adaptive_avg_pool2d_backward(dy, random_tensor({2, 2, 6, 6}, DType::f32, 27)),
        "adaptive_avg_pool2d_backward: grad_output f32 [1, 2, 3, 3] on cpu does not match input "
        "f32 [2, 2, 6, 6] on cpu: expected [2, 2, OH, OW]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::adaptive_avg_pool2d_backward(random_tensor({1, 2, 0, 3}, DType::f32, 28), x),
        "adaptive_avg_pool2d_backward: grad_output f32 [1, 2, 0, 3] on cpu has an output size 0x3 "
        "below 1x1");
    REQUIRE_THROWS_WITH_MSG(
        kernels::adaptive_avg_pool2d_backward(dy, random_tensor({1, 2, 0, 4}, DType::f32, 29)),
        "adaptive_avg_pool2d_backward: input f32 [1, 2, 0, 4] on cpu has an empty plane");
    REQUIRE_THROWS_WITH_MSG(
        kernels::adaptive_avg_pool2d_backward(dy, random_tensor({6}, DType::f32, 30)),
        "adaptive_avg_pool2d_backward: expected input [N, C, H, W] or [C, H, "
        "W], got f32 [6] on cpu");
}

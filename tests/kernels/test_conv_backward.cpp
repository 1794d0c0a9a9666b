// conv2d_backward against naive f64 loops written from the definitions of the
// three gradients (grad_input gathered from the outputs each input element
// feeds, not by col2im), over strides, paddings, dilations, groups, 1×1 and
// non-square kernels, several column tiles and channel chunks, size-0 dims,
// every floating dtype and non-contiguous operands; central differences of
// the forward in f64; bit-identical results for 1, 2 and 3 threads; poisoned
// outputs; and every argument error.
#include <omp.h>

#include <cmath>
#include <limits>

#include "kernels/conv.h"
#include "kernels/cpu/conv.h"
#include "support/linalg_cases.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

Shape output_shape(const ConvCase& c) {
    return {c.input[0], c.weight[0],
            out_size(c.input[2], c.weight[2], c.stride[0], c.padding[0], c.dilation[0]),
            out_size(c.input[3], c.weight[3], c.stride[1], c.padding[1], c.dilation[1])};
}

// The three gradients and, per element, the sum of the magnitudes of its
// terms (what rounding errors scale with).
struct Reference {
    std::vector<double> input, weight, bias;
    double input_mag = 0, weight_mag = 0, bias_mag = 0;  // largest over the elements
};

// By definition, with out[n, o, oy, ox] = b[o] + Σ w[o, ci, i, j] ·
// x[n, g·CG + ci, oy·sh − ph + i·dh, ox·sw − pw + j·dw]:
//   d x[n, ch, y, xx] = Σ over o of ch's group, taps (i, j) and the output
//                       (oy, ox) whose tap (i, j) reads (y, xx), of dy · w;
//   d w[o, ci, i, j]  = Σ_{n, oy, ox} dy[n, o, oy, ox] · (the input under the tap);
//   d b[o]            = Σ_{n, oy, ox} dy[n, o, oy, ox].
Reference reference_grads(const Tensor& dy, const Tensor& x, const Tensor& w, const ConvCase& c) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3);
    const int64_t OG = O / c.groups, OH = dy.size(2), OW = dy.size(3);
    const auto [sh, sw] = c.stride;
    const auto [ph, pw] = c.padding;
    const auto [dh, dw] = c.dilation;
    const std::vector<double> vy = values(dy), vx = values(x), vw = values(w);
    auto Y = [&](int64_t n, int64_t o, int64_t oy, int64_t ox) {
        return vy[size_t(((n * O + o) * OH + oy) * OW + ox)];
    };
    Reference r;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t y = 0; y < H; ++y)
                for (int64_t xx = 0; xx < W; ++xx) {
                    double s = 0, mag = 0;
                    const int64_t g = ch / CG;
                    for (int64_t o = g * OG; o < (g + 1) * OG; ++o)
                        for (int64_t i = 0; i < KH; ++i)
                            for (int64_t j = 0; j < KW; ++j) {
                                // The output whose tap (i, j) lands on (y, xx), if any.
                                const int64_t ty = y + ph - i * dh, tx = xx + pw - j * dw;
                                if (ty < 0 || tx < 0 || ty % sh != 0 || tx % sw != 0) continue;
                                if (ty / sh >= OH || tx / sw >= OW) continue;
                                const double t = Y(n, o, ty / sh, tx / sw) *
                                                 vw[size_t(((o * CG + ch % CG) * KH + i) * KW + j)];
                                s += t;
                                mag += std::abs(t);
                            }
                    r.input.push_back(s);
                    r.input_mag = std::max(r.input_mag, mag);
                }
    for (int64_t o = 0; o < O; ++o)
        for (int64_t ci = 0; ci < CG; ++ci)
            for (int64_t i = 0; i < KH; ++i)
                for (int64_t j = 0; j < KW; ++j) {
                    double s = 0, mag = 0;
                    const int64_t ch = (o / OG) * CG + ci;
                    for (int64_t n = 0; n < N; ++n)
                        for (int64_t oy = 0; oy < OH; ++oy)
                            for (int64_t ox = 0; ox < OW; ++ox) {
                                const int64_t y = oy * sh - ph + i * dh, xx = ox * sw - pw + j * dw;
                                if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                                const double t =
                                    Y(n, o, oy, ox) * vx[size_t(((n * C + ch) * H + y) * W + xx)];
                                s += t;
                                mag += std::abs(t);
                            }
                    r.weight.push_back(s);
                    r.weight_mag = std::max(r.weight_mag, mag);
                }
    for (int64_t o = 0; o < O; ++o) {
        double s = 0, mag = 0;
        for (int64_t n = 0; n < N; ++n)
            for (int64_t q = 0; q < OH * OW; ++q) {
                s += Y(n, o, q / OW, q % OW);
                mag += std::abs(Y(n, o, q / OW, q % OW));
            }
        r.bias.push_back(s);
        r.bias_mag = std::max(r.bias_mag, mag);
    }
    return r;
}

// Rounding of sums: f64 sums are f64, every other dtype sums in f32.
double sum_tol(DType t) { return t == DType::f64 ? 1e-13 : 2e-5; }

void check_grads(const kernels::Conv2dGrads& g, const Reference& r, const Tensor& x,
                 const Tensor& w) {
    const DType dt = x.dtype();
    REQUIRE(g.input.shape() == x.shape());
    REQUIRE(g.weight.shape() == w.shape());
    REQUIRE(g.bias.shape() == Shape{w.size(0)});
    REQUIRE((g.input.dtype() == dt && g.weight.dtype() == dt && g.bias.dtype() == dt));
    check_close(g.input, r.input, rtol_for(dt), sum_tol(dt) * r.input_mag);
    check_close(g.weight, r.weight, rtol_for(dt), sum_tol(dt) * r.weight_mag);
    check_close(g.bias, r.bias, rtol_for(dt), sum_tol(dt) * r.bias_mag);
}

kernels::Conv2dGrads backward(const Tensor& dy, const Tensor& x, const Tensor& w, const ConvCase& c,
                              std::array<bool, 3> need = {true, true, true}) {
    return kernels::conv2d_backward(dy, x, w, c.stride, c.padding, c.dilation, c.groups, need);
}

const ConvCase kCases[] = {
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},   // "same" padding
    {{2, 3, 8, 7}, {2, 3, 3, 3}, {2, 2}, {2, 2}, {1, 1}, 1},   // padding 2, stride 2
    {{1, 4, 9, 8}, {6, 2, 3, 2}, {2, 3}, {1, 0}, {1, 1}, 2},   // groups, non-square
    {{2, 4, 10, 9}, {4, 4, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},  // dilation
    {{2, 6, 8, 8}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6},   // depthwise
    {{1, 3, 6, 6}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3},   // depthwise, multiplier 2
    {{3, 5, 4, 6}, {7, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},   // 1×1 read in place
    {{2, 5, 5, 6}, {3, 5, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1},   // 1×1 strided: gaps
    {{1, 2, 3, 3}, {2, 2, 1, 1}, {1, 1}, {1, 1}, {1, 1}, 1},   // 1×1 padded
    {{2, 2, 3, 3}, {2, 2, 5, 5}, {1, 1}, {1, 1}, {1, 1}, 1},   // output 1×1
    {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},
    {{1, 2, 9, 9}, {3, 2, 2, 2}, {4, 3}, {1, 1}, {1, 1}, 1},       // stride > kernel
    {{1, 2, 4, 4}, {2, 2, 3, 3}, {1, 1}, {3, 2}, {1, 1}, 1},       // padding > kernel/2
    {{2, 4, 11, 10}, {8, 2, 3, 3}, {2, 1}, {2, 1}, {2, 3}, 2},     // everything at once
    {{2, 16, 12, 12}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},    // two chunks per group
    {{1, 6, 9, 9}, {4, 6, 5, 5}, {1, 2}, {2, 2}, {1, 1}, 1},       // 5×5: 2 channels a chunk
    {{1, 2, 10, 10}, {2, 2, 9, 9}, {1, 1}, {0, 0}, {1, 1}, 1},     // 81 taps: one channel a chunk
    {{1, 8, 64, 64}, {4, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},     // tiles ending mid-row
    {{1, 64, 48, 48}, {64, 64, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},  // 1×1 in place, 3 tiles
    {{1, 64, 30, 30}, {8, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},   // 10 chunks, the last short
    {{2, 4, 6, 5}, {130, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},     // 3 output-channel blocks
    {{1, 6, 7, 7}, {140, 3, 2, 2}, {1, 2}, {0, 1}, {1, 1}, 2},     // 2 blocks per group
    {{0, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},       // empty batch: zero grads
    {{2, 3, 5, 5}, {0, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},       // no output channels
    {{2, 0, 4, 4}, {3, 0, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},       // no input channels
};

std::string describe_case(const ConvCase& c) {
    std::ostringstream os;
    os << "input " << shape_str(c.input) << " weight " << shape_str(c.weight) << " stride "
       << c.stride[0] << "," << c.stride[1] << " padding " << c.padding[0] << "," << c.padding[1]
       << " dilation " << c.dilation[0] << "," << c.dilation[1] << " groups " << c.groups;
    return os.str();
}

}  // namespace

TEST_CASE("conv2d_backward matches the definitions for every dtype and layout", "[conv]") {
    uint64_t seed = 5000;
    for (const ConvCase& c : kCases) {
        for (DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
            INFO(describe_case(c) << " " << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed);
            const Tensor w = random_tensor(c.weight, dt, ++seed);
            const Tensor dy = random_tensor(output_shape(c), dt, ++seed);
            const Reference r = reference_grads(dy, x, w, c);
            check_grads(backward(dy, x, w, c), r, x, w);
            check_grads(backward(non_contiguous(dy), non_contiguous(x), non_contiguous(w), c), r, x,
                        w);
        }
    }
}

TEST_CASE("conv2d_backward computes only what is asked for", "[conv]") {
    const ConvCase c = kCases[3];
    const Tensor x = random_tensor(c.input, DType::f64, 1),
                 w = random_tensor(c.weight, DType::f64, 2);
    const Tensor dy = random_tensor(output_shape(c), DType::f64, 3);
    const Reference r = reference_grads(dy, x, w, c);
    for (int mask = 0; mask < 8; ++mask) {
        const std::array<bool, 3> need = {bool(mask & 1), bool(mask & 2), bool(mask & 4)};
        INFO("need " << need[0] << need[1] << need[2]);
        const kernels::Conv2dGrads g = backward(dy, x, w, c, need);
        REQUIRE(g.input.defined() == need[0]);
        REQUIRE(g.weight.defined() == need[1]);
        REQUIRE(g.bias.defined() == need[2]);
        if (need[0]) check_close(g.input, r.input, 1e-12, 1e-13 * r.input_mag);
        if (need[1]) check_close(g.weight, r.weight, 1e-12, 1e-13 * r.weight_mag);
        if (need[2]) check_close(g.bias, r.bias, 1e-12, 1e-13 * r.bias_mag);
    }
}

TEST_CASE("conv2d_backward takes an unbatched [C, H, W] input", "[conv]") {
    const ConvCase c = kCases[14];  // groups, stride, padding and dilation
    const Tensor x = random_tensor({4, 11, 10}, DType::f32, 4),
                 w = random_tensor(c.weight, DType::f32, 5);
    Shape out = output_shape(c);
    out.erase(out.begin());
    const Tensor dy = random_tensor(out, DType::f32, 6);
    const kernels::Conv2dGrads g = backward(dy, x, w, c);
    REQUIRE(g.input.shape() == x.shape());
    const Reference r = reference_grads(dy.unsqueeze(0), x.unsqueeze(0), w, c);
    check_close(g.input, r.input, 2e-5, 2e-5 * r.input_mag);
    check_close(g.weight, r.weight, 2e-5, 2e-5 * r.weight_mag);
    check_close(g.bias, r.bias, 2e-5, 2e-5 * r.bias_mag);
}

TEST_CASE("conv2d_backward agrees with central differences of conv2d in f64", "[conv]") {
    // loss = Σ conv2d(x, w, b) · R, so d loss / d out = R: the grads of
    // conv2d_backward(R, ...) must be the loss's partial derivatives.
    uint64_t seed = 6000;
    for (const ConvCase& c : {kCases[1], kCases[3], kCases[4], kCases[6], kCases[8], kCases[14]}) {
        INFO(describe_case(c));
        Tensor x = random_tensor(c.input, DType::f64, ++seed);
        Tensor w = random_tensor(c.weight, DType::f64, ++seed);
        Tensor b = random_tensor({c.weight[0]}, DType::f64, ++seed);
        const Tensor R = random_tensor(output_shape(c), DType::f64, ++seed);
        const std::vector<double> vr = values(R);
        auto loss = [&] {
            const std::vector<double> out =
                values(kernels::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups));
            double s = 0;
            for (size_t i = 0; i < out.size(); ++i) s += out[i] * vr[i];
            return s;
        };
        const kernels::Conv2dGrads g = backward(R, x, w, c);
        Generator gen(++seed);
        const std::pair<Tensor*, Tensor> params[] = {{&x, g.input}, {&w, g.weight}, {&b, g.bias}};
        for (const auto& [t, grad] : params) {
            const std::vector<double> u = values(rand({6}, {DType::f64}, &gen));
            for (double ui : u) {
                const Shape at = unravel(int64_t(ui * double(t->numel())), t->shape());
                const double v = t->at(at), h = 1e-5;
                t->set(at, v + h);
                const double up = loss();
                t->set(at, v - h);
                const double down = loss();
                t->set(at, v);
                INFO("element " << shape_str(at));
                CHECK(std::abs((up - down) / (2 * h) - grad.at(at)) <= 1e-7 * (1 + std::abs(up)));
            }
        }
    }
}

TEST_CASE("conv2d_backward is bit-identical for 1, 2 and 3 threads", "[conv]") {
    const ConvCase cases[] = {
        {{4, 16, 20, 20}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},   // items over the batch
        {{1, 32, 24, 24}, {16, 32, 3, 3}, {2, 1}, {1, 1}, {1, 1}, 1},   // one image: chunks only
        {{2, 64, 48, 48}, {32, 64, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},   // 1×1 in place, tiles
        {{2, 32, 30, 30}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 32},   // depthwise
        {{2, 64, 20, 20}, {160, 64, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},  // 3 output blocks
    };
    const int saved = omp_get_max_threads();
    for (const ConvCase& c : cases) {
        INFO(describe_case(c));
        const Tensor x = random_tensor(c.input, DType::f32, 7),
                     w = random_tensor(c.weight, DType::f32, 8);
        const Tensor dy = random_tensor(output_shape(c), DType::f32, 9);
        std::vector<std::vector<float>> runs[3];
        for (int threads : {1, 2, 3}) {
            omp_set_num_threads(threads);
            const kernels::Conv2dGrads g = backward(dy, x, w, c);
            for (const Tensor& t : {g.input, g.weight, g.bias})
                runs[threads - 1].push_back(t.to_vector<float>());
        }
        omp_set_num_threads(saved);
        CHECK(runs[0] == runs[1]);
        CHECK(runs[0] == runs[2]);
        // ...and they are the gradients, not just a stable wrong answer.
        const Reference r = reference_grads(dy, x, w, c);
        check_close(from_vector(runs[1][0], c.input), r.input, 2e-5, 2e-5 * r.input_mag);
        check_close(from_vector(runs[1][1], c.weight), r.weight, 2e-5, 2e-5 * r.weight_mag);
    }
    REQUIRE(omp_get_max_threads() == saved);
}

TEST_CASE("cpu::conv2d_backward overwrites every element of poisoned outputs", "[conv]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const ConvCase& c : {kCases[2], kCases[7], kCases[13], kCases[14], kCases[19]}) {
        INFO(describe_case(c));
        const Tensor x = random_tensor(c.input, DType::f64, 10),
                     w = random_tensor(c.weight, DType::f64, 11);
        const Shape os = output_shape(c);
        const Tensor dy = random_tensor(os, DType::f64, 12);
        Tensor dx = full(c.input, nan, {DType::f64}), dw = full(c.weight, nan, {DType::f64}),
               db = full({c.weight[0]}, nan, {DType::f64});
        const kernels::Conv2dShape s{c.input[0],    c.input[1],   c.input[2],   c.input[3],
                                          c.weight[0],   c.weight[2],  c.weight[3],  c.stride[0],
                                          c.stride[1],   c.padding[0], c.padding[1], c.dilation[0],
                                          c.dilation[1], c.groups,     os[2],        os[3]};
        kernels::cpu::conv2d_backward(s, DType::f64, dy.data_ptr(), x.data_ptr(), w.data_ptr(),
                                      dx.data_ptr(), dw.data_ptr(), db.data_ptr());
        const Reference r = reference_grads(dy, x, w, c);
        check_close(dx, r.input, 1e-12, 1e-13 * r.input_mag);
        check_close(dw, r.weight, 1e-12, 1e-13 * r.weight_mag);
        check_close(db, r.bias, 1e-12, 1e-13 * r.bias_mag);
    }
}

TEST_CASE("conv2d_backward errors name the op, the shapes and the dtypes", "[conv][errors]") {
    const Tensor x = random_tensor({1, 4, 5, 5}, DType::f32, 13);
    const Tensor w = random_tensor({2, 4, 3, 3}, DType::f32, 14);
    const Tensor dy = random_tensor({1, 2, 3, 3}, DType::f32, 15);
    auto bw = [](const Tensor& g, const Tensor& in, const Tensor& wt, Int2 stride = {1, 1},
                 Int2 padding = {0, 0}, Int2 dilation = {1, 1}, int64_t groups = 1) {
        return kernels::conv2d_backward(g, in, wt, stride, padding, dilation, groups);
    };
    REQUIRE_THROWS_WITH_MSG(
        bw(random_tensor({1, 2, 4, 3}, DType::f32, 16), x, w),
        "conv2d_backward: grad_output f32 [1, 2, 4, 3] on cpu does not match the conv2d output "
        "shape [1, 2, 3, 3] of input f32 [1, 4, 5, 5] on cpu and weight f32 [2, 4, 3, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x, w, {1, 1}, {1, 1}),  // padding changes the output size
                            "does not match the conv2d output shape [1, 2, 5, 5]");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x.squeeze(0), w),  // unbatched: grad_output has no N
                            "conv2d_backward: grad_output f32 [1, 2, 3, 3] on cpu does not match "
                            "the conv2d output shape [2, 3, 3]");
    REQUIRE_THROWS_WITH_MSG(
        bw(random_tensor({1, 2, 3, 3}, DType::f64, 17), x, w),
        "conv2d_backward: grad_output f64 [1, 2, 3, 3] on cpu, input f32 [1, 4, 5, 5] on cpu and "
        "weight f32 [2, 4, 3, 3] on cpu must have one dtype");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x, random_tensor({2, 4, 3, 3}, DType::f64, 18)),
                            "must have one dtype");
    REQUIRE_THROWS_WITH_MSG(
        bw(dy, random_tensor({4, 5}, DType::f32, 19), w),
        "conv2d_backward: expected input [N, C, H, W] or [C, H, W], got f32 [4, 5] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        bw(dy, x, random_tensor({2, 4, 3}, DType::f32, 20)),
        "conv2d_backward: expected weight [O, C/groups, kH, kW], got f32 [2, 4, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        bw(random_tensor({1, 2, 3, 3}, DType::i64, 21, -2, 2),
           random_tensor({1, 4, 5, 5}, DType::i64, 22, -2, 2),
           random_tensor({2, 4, 3, 3}, DType::i64, 23, -2, 2)),
        "conv2d_backward: expected a floating-point tensor, got i64 [1, 4, 5, 5] on cpu");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x, random_tensor({2, 3, 3, 3}, DType::f32, 24)),
                            "conv2d_backward: weight f32 [2, 3, 3, 3] on cpu with groups = 1 "
                            "expects 3 input channels, got input f32 [1, 4, 5, 5] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        bw(dy, x, random_tensor({3, 1, 3, 3}, DType::f32, 25), {1, 1}, {0, 0}, {1, 1}, 3),
        "conv2d_backward: the 4 channels of input f32 [1, 4, 5, 5] on cpu are "
        "not divisible by groups = 3");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x, w, {0, 1}),
                            "conv2d_backward: expected stride >= 1, padding >= 0, dilation >= 1 "
                            "and groups >= 1, got stride [0, 1]");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x, w, {1, 1}, {0, 0}, {2, 3}),
                            "conv2d_backward: padded input size 5x5 of input f32 [1, 4, 5, 5] on "
                            "cpu is smaller than the dilated kernel 5x7");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x, w, {1, 1}, {0, 0}, {int64_t(1) << 40, 1}),
                            "conv2d_backward: stride [1, 1], padding [0, 0], dilation "
                            "[1099511627776, 1] or the sizes of");
    REQUIRE_THROWS_WITH_MSG(bw(Tensor(), x, w), "conv2d_backward: undefined tensor argument");
    REQUIRE_THROWS_WITH_MSG(bw(dy, x, Tensor()), "conv2d_backward: undefined tensor argument");
}

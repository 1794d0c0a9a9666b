// conv2d against a naive 7-loop f64 reference: stride, padding, dilation,
// groups (depthwise included), bias, 1×1 kernels, size-0/1 dims, every
// floating dtype, non-contiguous operands, both threading paths, a poisoned
// output, and every argument error.
#include <limits>

#include "kernels/conv.h"
#include "kernels/cpu/conv.h"
#include "kernels/linalg_cases.h"
#include "support.h"

using namespace ember;
using namespace ember::test;

namespace {

// The convolution by its definition, in f64, one output element at a time.
std::vector<double> reference_conv2d(const Tensor& x, const Tensor& w, const Tensor& b,
                                     const ConvCase& c, Shape* shape) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3);
    const int64_t OG = O / c.groups;
    const int64_t OH = out_size(H, KH, c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t OW = out_size(W, KW, c.stride[1], c.padding[1], c.dilation[1]);
    const std::vector<double> vx = values(x), vw = values(w);
    const std::vector<double> vb = b.defined() ? values(b) : std::vector<double>(size_t(O), 0.0);
    std::vector<double> out;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OW; ++ox) {
                    double s = vb[size_t(o)];
                    for (int64_t ci = 0; ci < CG; ++ci)
                        for (int64_t i = 0; i < KH; ++i)
                            for (int64_t j = 0; j < KW; ++j) {
                                const int64_t y =
                                    oy * c.stride[0] - c.padding[0] + i * c.dilation[0];
                                const int64_t xx =
                                    ox * c.stride[1] - c.padding[1] + j * c.dilation[1];
                                if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                                const int64_t ch = (o / OG) * CG + ci;
                                s += vw[size_t(((o * CG + ci) * KH + i) * KW + j)] *
                                     vx[size_t(((n * C + ch) * H + y) * W + xx)];
                            }
                    out.push_back(s);
                }
    *shape = {N, O, OH, OW};
    (void)C;
    return out;
}

double atol_for(DType t, int64_t k) { return (t == DType::f64 ? 1e-14 : 5e-7) * double(k + 1); }

void check_conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvCase& c) {
    Shape shape;
    const std::vector<double> want = reference_conv2d(x, w, b, c, &shape);
    const Tensor got = kernels::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    REQUIRE(got.shape() == shape);
    REQUIRE(got.dtype() == x.dtype());
    check_close(got, want, rtol_for(x.dtype()),
                atol_for(x.dtype(), w.size(1) * w.size(2) * w.size(3)));
}

const ConvCase kCases[] = {
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // "same" padding
    {{1, 4, 9, 8}, {6, 2, 3, 2}, {2, 3}, {1, 0}, {1, 1}, 2, false},  // groups, rectangular
    {{2, 4, 10, 9}, {4, 4, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true},  // dilation
    {{2, 6, 8, 8}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, true},   // depthwise
    {{1, 3, 6, 6}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3, false},  // depthwise, multiplier 2
    {{3, 5, 4, 6}, {7, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},   // 1×1 read in place
    {{2, 5, 5, 6}, {3, 5, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},  // 1×1 strided
    {{1, 2, 3, 3}, {2, 2, 1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // 1×1 padded
    {{2, 2, 3, 3}, {2, 2, 5, 5}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // output 1×1
    {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{1, 2, 9, 9}, {3, 2, 2, 2}, {4, 3}, {1, 1}, {1, 1}, 1, true},    // stride > kernel
    {{1, 2, 4, 4}, {2, 2, 3, 3}, {1, 1}, {3, 2}, {1, 1}, 1, true},    // padding > kernel/2
    {{2, 4, 11, 10}, {8, 2, 3, 3}, {2, 1}, {2, 1}, {2, 3}, 2, true},  // everything at once
    {{0, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},    // empty batch
    {{2, 3, 5, 5}, {0, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},   // no output channels
    {{2, 0, 4, 4}, {3, 0, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},    // no input channels: bias
    // Several column tiles per image, tiles ending mid-row (the tile width
    // follows from C/G·kH·kW and O/G; see kernels/cpu/conv.cpp).
    {{1, 64, 30, 30}, {8, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{2, 32, 40, 37}, {4, 32, 3, 3}, {2, 1}, {2, 1}, {2, 1}, 1, true},
    {{1, 512, 20, 20}, {8, 512, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{4, 8, 16, 16}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},     // a tile per thread
    {{1, 16, 32, 32}, {16, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true},  // one tile, GEMM threaded
};

}  // namespace

TEST_CASE("conv2d matches the naive reference for every dtype", "[conv]") {
    uint64_t seed = 1000;
    for (const ConvCase& c : kCases) {
        for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
            INFO("input " << shape_str(c.input) << " weight " << shape_str(c.weight) << " stride "
                          << c.stride[0] << "," << c.stride[1] << " padding " << c.padding[0] << ","
                          << c.padding[1] << " dilation " << c.dilation[0] << "," << c.dilation[1]
                          << " groups " << c.groups << " bias " << c.bias << " " << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed);
            const Tensor w = random_tensor(c.weight, dt, ++seed);
            const Tensor b = c.bias ? random_tensor({c.weight[0]}, dt, ++seed) : Tensor();
            check_conv(x, w, b, c);
            check_conv(non_contiguous(x), non_contiguous(w), b, c);
        }
    }
}

TEST_CASE("conv2d takes an unbatched [C, H, W] input", "[conv]") {
    const ConvCase c = kCases[2];
    const Tensor x = random_tensor({4, 9, 8}, DType::f32, 5),
                 w = random_tensor(c.weight, DType::f32, 6);
    const Tensor y = kernels::conv2d(x, w, {}, c.stride, c.padding, c.dilation, c.groups);
    Shape shape;
    const std::vector<double> want = reference_conv2d(x.unsqueeze(0), w, {}, c, &shape);
    REQUIRE(y.shape() == Shape(shape.begin() + 1, shape.end()));
    check_close(y, want, 2e-5, atol_for(DType::f32, 12));
}

TEST_CASE("cpu::conv2d overwrites every element of a poisoned output", "[conv]") {
    for (const ConvCase& c : {kCases[1], kCases[6], kCases[12], kCases[13]}) {
        for (bool with_bias : {false, true}) {
            const Tensor x = random_tensor(c.input, DType::f32, 7),
                         w = random_tensor(c.weight, DType::f32, 8);
            const Tensor b = with_bias ? random_tensor({c.weight[0]}, DType::f32, 9) : Tensor();
            Shape shape;
            const std::vector<double> want = reference_conv2d(x, w, b, c, &shape);
            Tensor out = full(shape, std::numeric_limits<double>::quiet_NaN());
            const kernels::Conv2dShape s{
                shape[0],      c.input[1],  c.input[2],  c.input[3],   c.weight[0],  c.weight[2],
                c.weight[3],   c.stride[0], c.stride[1], c.padding[0], c.padding[1], c.dilation[0],
                c.dilation[1], c.groups,    shape[2],    shape[3]};
            kernels::cpu::conv2d(s, DType::f32, x.data_ptr(), w.data_ptr(),
                                 with_bias ? b.data_ptr() : nullptr, out.data_ptr());
            check_close(out, want, 2e-5, atol_for(DType::f32, 36));
        }
    }
}

TEST_CASE("conv2d errors name the shapes and dtypes", "[conv][errors]") {
    const Tensor x = random_tensor({1, 4, 5, 5}, DType::f32, 11);
    const Tensor w = random_tensor({2, 4, 3, 3}, DType::f32, 12);
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(random_tensor({3, 4}, DType::f32, 13), w),
        "conv2d: expected input [N, C, H, W] or [C, H, W], got f32 [3, 4] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({2, 4, 3}, DType::f32, 14)),
        "conv2d: expected weight [O, C/groups, kH, kW], got f32 [2, 4, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({2, 3, 3, 3}, DType::f32, 15)),
        "conv2d: weight f32 [2, 3, 3, 3] on cpu with groups = 1 expects 3 input "
        "channels, got input f32 [1, 4, 5, 5] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({3, 1, 3, 3}, DType::f32, 16), {}, {1, 1}, {0, 0}, {1, 1},
                        3),
        "conv2d: the 4 channels of input f32 [1, 4, 5, 5] on cpu are not divisible by groups = 3");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({3, 2, 3, 3}, DType::f32, 17), {}, {1, 1}, {0, 0}, {1, 1},
                        2),
        "conv2d: the 3 output channels of weight f32 [3, 2, 3, 3] on cpu are not divisible by "
        "groups = 2");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(random_tensor({1, 4, 2, 2}, DType::f32, 18), w),
        "conv2d: padded input size 2x2 of input f32 [1, 4, 2, 2] on cpu is smaller "
        "than the dilated kernel 3x3");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {0, 0}, {2, 3}),
                            "smaller than the dilated kernel 5x7");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({2, 4, 3, 3}, DType::f64, 19)),
        "conv2d: input f32 [1, 4, 5, 5] on cpu, weight f64 [2, 4, 3, 3] on cpu and bias "
        "undefined must have one dtype");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, w, random_tensor({3}, DType::f32, 20)),
        "conv2d: expected bias [2] for weight f32 [2, 4, 3, 3] on cpu, got f32 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {0, 1}),
                            "conv2d: expected stride >= 1, padding >= 0, dilation >= 1 "
                            "and groups >= 1, got stride [0, 1]");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {-1, 0}), "padding [-1, 0]");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 0}), "dilation [1, 0]");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 0), "groups 0");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(random_tensor({1, 4, 5, 5}, DType::i64, 21, -2, 2),
                        random_tensor({2, 4, 3, 3}, DType::i64, 22, -2, 2)),
        "conv2d: expected a floating-point tensor, got i64 [1, 4, 5, 5] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, random_tensor({2, 4, 0, 3}, DType::f32, 23)),
                            "conv2d: empty kernel");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, Tensor()), "conv2d: undefined tensor argument");
}

TEST_CASE("conv2d rejects parameters whose products would overflow", "[conv][errors]") {
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(ones({1, 1, 8, 8}), ones({1, 1, 5, 1}), Tensor(),
                                            {INT64_MAX, 1}, {0, 0}, {(int64_t(1) << 62) + 1, 1}, 1),
                            "exceed 2^30");
}

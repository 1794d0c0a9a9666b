// CUDA batch norm and layer norm against the CPU backend: every floating
// dtype, with and without weight and bias (strided, and of another dtype than
// x), non-contiguous inputs, N·S = 2 up to a split-channel case (C = 16,
// N = 64, S = 28·28), running statistics after one step, layer norm rows of
// M = 1, 7, 1000 (warp per row) and 5000 (block per row), size 0, and two
// runs giving the same bits; the fused batch norm + ReLU likewise, and
// against the GPU's own batch_norm then relu.
//
// Tolerances: the GPU accumulates in f32 (f64 for f64) by Welford where the
// CPU sums in f64, so statistics agree to ~1e-5 relative in f32 and ~1e-10
// in f64; outputs in f16/bf16 may differ by one rounding step of the dtype
// (rtol_for); sums (the weight and bias gradients) are compared relative to
// their largest value, as tests/kernels/test_norm.cpp does.
#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/norm.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

Tensor gpu(const Tensor& t) { return t.defined() ? t.to(kGpu) : t; }
Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }

// Elementwise results of x's dtype.
double out_tol(DType dt) {
    return dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 1e-4 : rtol_for(dt);
}
// Statistics (f32 for every dtype but f64).
double stat_tol(DType dt) { return dt == DType::f64 ? 1e-10 : 2e-5; }

// |got − want| <= tol · max(1, max |want|): sums whose terms cancel.
void check_scaled(const Tensor& got, const Tensor& want, double tol) {
    REQUIRE(got.defined());
    REQUIRE(got.dtype() == want.dtype());
    double big = 1;
    for (double v : values(want)) big = std::max(big, std::abs(v));
    check_close(cpu(got), want, tol, tol * big);
}

double sum_tol(DType x, DType stored) { return std::max(out_tol(x), rtol_for(stored) + 1e-6); }

void check_bits(const Tensor& a, const Tensor& b) { check_close(cpu(a), cpu(b), 0, 0); }

// A [n] vector as a step-2 slice of a [2n] buffer (on x's device).
Tensor strided_vector(int64_t n, DType dt, uint64_t seed, double lo, double hi, Device d) {
    return random_tensor({2 * n}, dt, seed, lo, hi).to(d).slice(0, 0, 2 * n, 2);
}

}  // namespace

TEST_CASE("cuda: batch_norm training forward and backward equal the CPU's", "[cuda][norm]") {
    const Shape shapes[] = {{2, 3},       {1, 4, 2},   {3, 5, 7},
                            {5, 3, 3, 3}, {4, 300, 3}, {64, 16, 28, 28}};
    uint64_t seed = 1;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                const int64_t C = shape[1];
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                const Tensor x = random_tensor(shape, dt, seed++, -3, 5);
                const Tensor g = random_tensor(shape, dt, seed++, -1, 1);
                // A strided f64 weight and an f32 bias: neither need be x's dtype.
                const uint64_t ws = seed++;
                const Tensor w =
                    affine ? strided_vector(C, DType::f64, ws, 0.5, 2, Device::cpu()) : Tensor();
                const Tensor wg =
                    affine ? strided_vector(C, DType::f64, ws, 0.5, 2, kGpu) : Tensor();
                const Tensor b = affine ? random_tensor({C}, DType::f32, seed++, -1, 1) : Tensor();
                const auto want = kernels::batch_norm_forward(x, w, b, {}, {}, 0.1, 1e-5);
                const auto got = kernels::batch_norm_forward(non_contiguous(gpu(x)), wg, gpu(b), {},
                                                             {}, 0.1, 1e-5);
                REQUIRE(got.output.device() == kGpu);
                REQUIRE(got.save_mean.dtype() == want.save_mean.dtype());
                check_close(cpu(got.output), want.output, out_tol(dt), out_tol(dt));
                check_close(cpu(got.save_mean), want.save_mean, stat_tol(dt), stat_tol(dt));
                check_close(cpu(got.save_invstd), want.save_invstd, stat_tol(dt), 0);

                // The backward from the same saved statistics on both sides.
                const auto gw = kernels::batch_norm_backward(g, x, w, want.save_mean,
                                                             want.save_invstd, {true, true, true});
                const auto gg = kernels::batch_norm_backward(
                    non_contiguous(gpu(g)), gpu(x), wg, gpu(want.save_mean), gpu(want.save_invstd),
                    {true, true, true});
                check_scaled(gg.input, gw.input, std::max(out_tol(dt), 1e-4));
                check_scaled(gg.weight, gw.weight, sum_tol(dt, gw.weight.dtype()));
                check_scaled(gg.bias, gw.bias, sum_tol(dt, gw.bias.dtype()));
            }
}

TEST_CASE("cuda: batch_norm running statistics after one step equal the CPU's", "[cuda][norm]") {
    for (DType rdt : {DType::f32, DType::f64, DType::bf16})
        for (const Shape& shape : {Shape{4, 3, 5}, Shape{64, 16, 28, 28}, Shape{2, 7}}) {
            INFO("running stats " << dtype_name(rdt) << ", x " << shape_str(shape));
            const int64_t C = shape[1];
            const Tensor x = random_tensor(shape, DType::f32, 20, -2, 6);
            // Strided running statistics, written in place through their strides.
            Tensor rm_buf = zeros({2 * C}, {rdt}), rv_buf = zeros({2 * C}, {rdt});
            rm_buf.slice(0, 0, 2 * C, 2).copy_(random_tensor({C}, rdt, 21, -1, 1));
            rv_buf.slice(0, 0, 2 * C, 2).copy_(random_tensor({C}, rdt, 22, 0.5, 2));
            Tensor rm_gbuf = gpu(rm_buf), rv_gbuf = gpu(rv_buf);
            kernels::batch_norm_forward(x, {}, {}, rm_buf.slice(0, 0, 2 * C, 2),
                                        rv_buf.slice(0, 0, 2 * C, 2), 0.25, 1e-5);
            kernels::batch_norm_forward(gpu(x), {}, {}, rm_gbuf.slice(0, 0, 2 * C, 2),
                                        rv_gbuf.slice(0, 0, 2 * C, 2), 0.25, 1e-5);
            // One rounding step of the running dtype apart at most; the gaps stay 0.
            const double tol = rtol_for(rdt) + 1e-5;
            check_close(cpu(rm_gbuf), rm_buf, tol, 1e-5);
            check_close(cpu(rv_gbuf), rv_buf, tol, 1e-5);
            CHECK(cpu(rm_gbuf).at({1}) == 0);
            CHECK(cpu(rv_gbuf).at({2 * C - 1}) == 0);
        }
}

TEST_CASE("cuda: batch_norm_inference equals the CPU's", "[cuda][norm]") {
    uint64_t seed = 30;
    for (const Shape& shape : {Shape{3, 4}, Shape{2, 3, 5, 7}, Shape{1, 1, 9}, Shape{8, 16, 33}})
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                const int64_t C = shape[1];
                const Tensor x = random_tensor(shape, dt, seed++, -3, 3);
                const Tensor rm = random_tensor({C}, DType::f32, seed++, -1, 1);
                const uint64_t vs = seed++;
                const Tensor rv = strided_vector(C, DType::f32, vs, 0.2, 3, Device::cpu());
                const Tensor rvg = strided_vector(C, DType::f32, vs, 0.2, 3, kGpu);
                const Tensor w = affine ? random_tensor({C}, dt, seed++, 0.5, 2) : Tensor();
                const Tensor b = affine ? random_tensor({C}, DType::bf16, seed++, -1, 1) : Tensor();
                const Tensor want = kernels::batch_norm_inference(x, w, b, rm, rv, 1e-3);
                const Tensor got = kernels::batch_norm_inference(non_contiguous(gpu(x)), gpu(w),
                                                                 gpu(b), gpu(rm), rvg, 1e-3);
                check_close(cpu(got), want, out_tol(dt), out_tol(dt));
            }
    // No values: an empty output, nothing launched.
    const Tensor e = kernels::batch_norm_inference(zeros({0, 3}, {.device = kGpu}), {}, {},
                                                   zeros({3}, {.device = kGpu}),
                                                   ones({3}, {.device = kGpu}), 1e-5);
    CHECK(e.shape() == Shape{0, 3});
}

TEST_CASE("cuda: batch_norm_backward computes only the gradients asked for", "[cuda][norm]") {
    const Tensor x = random_tensor({6, 4, 5}, DType::f32, 40, -2, 2);
    const Tensor g = random_tensor({6, 4, 5}, DType::f32, 41, -1, 1);
    const Tensor w = random_tensor({4}, DType::f32, 42, 0.5, 2);
    const auto f = kernels::batch_norm_forward(x, w, {}, {}, {}, 0.1, 1e-5);
    for (const std::array<bool, 3>& need :
         {std::array<bool, 3>{true, false, false}, std::array<bool, 3>{false, true, true},
          std::array<bool, 3>{false, false, true}, std::array<bool, 3>{false, false, false}}) {
        INFO("need " << need[0] << need[1] << need[2]);
        const auto want = kernels::batch_norm_backward(g, x, w, f.save_mean, f.save_invstd, need);
        const auto got = kernels::batch_norm_backward(gpu(g), gpu(x), gpu(w), gpu(f.save_mean),
                                                      gpu(f.save_invstd), need);
        CHECK(got.input.defined() == need[0]);
        CHECK(got.weight.defined() == need[1]);
        CHECK(got.bias.defined() == need[2]);
        if (need[0]) check_scaled(got.input, want.input, 1e-4);
        if (need[1]) check_scaled(got.weight, want.weight, 1e-4);
        if (need[2]) check_scaled(got.bias, want.bias, 1e-4);
    }
}

// The fused batch norm + ReLU (Note [Fused batch norm + ReLU] in
// kernels/norm.h): against the CPU's fused op with the tolerances above, and
// against the GPU's own batch_norm then relu: the forward is the same apply
// pass plus the ReLU (the same bits); the backward's masked sums may contract
// differently, so it is held to the sums' tolerance.
TEST_CASE("cuda: batch_norm_relu forward and backward equal the CPU's", "[cuda][norm]") {
    const Shape shapes[] = {{2, 3},      {1, 4, 3},       {3, 5, 7},       {5, 3, 3, 3},
                            {4, 300, 3}, {8, 16, 28, 28}, {64, 16, 28, 28}};
    uint64_t seed = 500;
    const std::array<bool, 3> all = {true, true, true};
    for (const Shape& shape : shapes)
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                const int64_t C = shape[1];
                INFO(dtype_name(dt) << " " << shape_str(shape) << (affine ? " affine" : ""));
                const Tensor x = random_tensor(shape, dt, seed++, -3, 5);
                const Tensor g = random_tensor(shape, dt, seed++, -1, 1);
                const uint64_t ws = seed++;
                const Tensor w =
                    affine ? strided_vector(C, DType::f64, ws, -2, 2, Device::cpu()) : Tensor();
                const Tensor wg =
                    affine ? strided_vector(C, DType::f64, ws, -2, 2, kGpu) : Tensor();
                const Tensor b = affine ? random_tensor({C}, DType::f32, seed++, -1, 1) : Tensor();
                Tensor rm = zeros({C}), rv = ones({C});
                Tensor rmg = gpu(rm), rvg = gpu(rv);
                const auto want = kernels::batch_norm_relu_forward(x, w, b, rm, rv, 0.1, 1e-5);
                const auto got = kernels::batch_norm_relu_forward(non_contiguous(gpu(x)), wg,
                                                                  gpu(b), rmg, rvg, 0.1, 1e-5);
                check_close(cpu(got.output), want.output, out_tol(dt), out_tol(dt));
                check_close(cpu(got.save_mean), want.save_mean, stat_tol(dt), stat_tol(dt));
                check_close(cpu(got.save_invstd), want.save_invstd, stat_tol(dt), 0);
                check_close(cpu(rmg), rm, 1e-5, 1e-5);
                check_close(cpu(rvg), rv, 1e-5, 1e-5);
                // The GPU's own unfused pair: the same forward bits.
                const auto plain =
                    kernels::batch_norm_forward(gpu(x), wg, gpu(b), {}, {}, 0.1, 1e-5);
                check_bits(got.output, kernels::relu(plain.output));

                // The backward from the CPU's saved statistics and output on both
                // sides, so both apply the same mask.
                const auto gw = kernels::batch_norm_relu_backward(
                    g, want.output, x, w, want.save_mean, want.save_invstd, all);
                const auto gg = kernels::batch_norm_relu_backward(
                    non_contiguous(gpu(g)), non_contiguous(gpu(want.output)), gpu(x), wg,
                    gpu(want.save_mean), gpu(want.save_invstd), all);
                check_scaled(gg.input, gw.input, std::max(out_tol(dt), 1e-4));
                check_scaled(gg.weight, gw.weight, sum_tol(dt, gw.weight.dtype()));
                check_scaled(gg.bias, gw.bias, sum_tol(dt, gw.bias.dtype()));
                const Tensor yg = gpu(want.output);
                const auto unfused =
                    kernels::batch_norm_backward(kernels::relu_backward(gpu(g), yg), gpu(x), wg,
                                                 gpu(want.save_mean), gpu(want.save_invstd), all);
                check_scaled(gg.input, cpu(unfused.input), std::max(out_tol(dt), 1e-5));
                check_scaled(gg.weight, cpu(unfused.weight), sum_tol(dt, gw.weight.dtype()));
                check_scaled(gg.bias, cpu(unfused.bias), sum_tol(dt, gw.bias.dtype()));
            }
}

// The residual rides in the forward's apply pass: the GPU's fused output
// equals its own batch_norm, add and relu bit for bit, and the CPU's within
// the forward's tolerance.
TEST_CASE("cuda: batch_norm_add_relu forward equals the CPU's and the unfused ops",
          "[cuda][norm]") {
    const Shape shapes[] = {{2, 3}, {3, 5, 7}, {5, 3, 3, 3}, {8, 16, 28, 28}, {4, 64, 7, 7}};
    uint64_t seed = 1500;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats) {
            const int64_t C = shape[1];
            INFO(dtype_name(dt) << " " << shape_str(shape));
            const Tensor x = random_tensor(shape, dt, seed++, -3, 5);
            const Tensor r = random_tensor(shape, dt, seed++, -2, 2);
            const Tensor w = random_tensor({C}, DType::f32, seed++, -2, 2);
            const Tensor b = random_tensor({C}, DType::f32, seed++, -1, 1);
            Tensor rm = zeros({C}), rv = ones({C});
            Tensor rmg = gpu(rm), rvg = gpu(rv);
            const auto want = kernels::batch_norm_add_relu_forward(x, r, w, b, rm, rv, 0.1, 1e-5);
            const auto got = kernels::batch_norm_add_relu_forward(
                non_contiguous(gpu(x)), gpu(r), gpu(w), gpu(b), rmg, rvg, 0.1, 1e-5);
            check_close(cpu(got.output), want.output, 2 * out_tol(dt), 2 * out_tol(dt));
            check_close(cpu(got.save_mean), want.save_mean, stat_tol(dt), stat_tol(dt));
            check_close(cpu(rmg), rm, 1e-5, 1e-5);
            check_close(cpu(rvg), rv, 1e-5, 1e-5);
            const auto plain =
                kernels::batch_norm_forward(gpu(x), gpu(w), gpu(b), {}, {}, 0.1, 1e-5);
            check_bits(got.output, kernels::relu(kernels::add(plain.output, gpu(r))));
        }
}

// A channels-last x is normalized as it lies ([N·H·W, C] rows, column
// reductions): every result keeps the format and equals the CPU's on the
// NCHW copy; a C = 1 stem and a one-pixel map are both layouts at once.
TEST_CASE("cuda: channels-last batch norm keeps the format and equals the CPU's", "[cuda][norm]") {
    const Shape shapes[] = {
        {4, 16, 8, 8}, {2, 3, 5, 7}, {64, 16, 28, 28}, {8, 1, 6, 6}, {16, 40, 1, 1}};
    const auto cl = [](const Tensor& t) { return gpu(t).contiguous(MemoryFormat::channels_last); };
    const auto check_format = [](const Tensor& got, const Tensor& x) {
        REQUIRE(got.device() == kGpu);
        REQUIRE(got.is_contiguous(MemoryFormat::channels_last));
        REQUIRE(got.suggest_memory_format() == x.suggest_memory_format());
    };
    uint64_t seed = 2100;
    for (const Shape& shape : shapes)
        for (DType dt : kFloats) {
            const int64_t C = shape[1];
            INFO(dtype_name(dt) << " " << shape_str(shape));
            const Tensor x = random_tensor(shape, dt, seed++, -3, 5);
            const Tensor g = random_tensor(shape, dt, seed++, -1, 1);
            const Tensor r = random_tensor(shape, dt, seed++, -2, 2);
            const Tensor w = random_tensor({C}, DType::f32, seed++, 0.5, 2);
            const Tensor b = random_tensor({C}, DType::f32, seed++, -1, 1);
            const Tensor xg = cl(x);
            REQUIRE(xg.is_contiguous(MemoryFormat::channels_last));

            Tensor rm = random_tensor({C}, DType::f32, seed++, -1, 1), rv = ones({C});
            Tensor rmg = gpu(rm), rvg = gpu(rv);
            const auto want = kernels::batch_norm_relu_forward(x, w, b, rm, rv, 0.1, 1e-5);
            const auto got =
                kernels::batch_norm_relu_forward(xg, gpu(w), gpu(b), rmg, rvg, 0.1, 1e-5);
            check_format(got.output, xg);
            check_close(cpu(got.output), want.output, out_tol(dt), out_tol(dt));
            check_close(cpu(got.save_mean), want.save_mean, stat_tol(dt), stat_tol(dt));
            check_close(cpu(got.save_invstd), want.save_invstd, stat_tol(dt), 0);
            check_close(cpu(rmg), rm, 1e-5, 1e-5);
            check_close(cpu(rvg), rv, 1e-5, 1e-5);

            const auto plain = kernels::batch_norm_forward(xg, gpu(w), gpu(b), {}, {}, 0.1, 1e-5);
            check_format(plain.output, xg);
            check_bits(got.output, kernels::relu(plain.output));  // the same apply pass
            const auto res =
                kernels::batch_norm_add_relu_forward(xg, cl(r), gpu(w), gpu(b), {}, {}, 0.1, 1e-5);
            check_format(res.output, xg);
            check_bits(res.output, kernels::relu(kernels::add(plain.output, cl(r))));

            // Backward from the CPU's saved statistics, plain and through the ReLU.
            const std::array<bool, 3> all{true, true, true};
            const auto gw = kernels::batch_norm_relu_backward(g, want.output, x, w, want.save_mean,
                                                              want.save_invstd, all);
            const auto gg =
                kernels::batch_norm_relu_backward(cl(g), cl(want.output), xg, gpu(w),
                                                  gpu(want.save_mean), gpu(want.save_invstd), all);
            check_format(gg.input, xg);
            check_scaled(gg.input, gw.input, std::max(out_tol(dt), 1e-4));
            check_scaled(gg.weight, gw.weight, sum_tol(dt, gw.weight.dtype()));
            check_scaled(gg.bias, gw.bias, sum_tol(dt, gw.bias.dtype()));
            const auto pw =
                kernels::batch_norm_backward(g, x, w, want.save_mean, want.save_invstd, all);
            const auto pg = kernels::batch_norm_backward(cl(g), xg, gpu(w), gpu(want.save_mean),
                                                         gpu(want.save_invstd), all);
            check_format(pg.input, xg);
            check_scaled(pg.input, pw.input, std::max(out_tol(dt), 1e-4));
            check_scaled(pg.weight, pw.weight, sum_tol(dt, pw.weight.dtype()));

            // Eval, and a gradient of the other layout: the result follows x.
            const Tensor ev =
                kernels::batch_norm_inference(xg, gpu(w), gpu(b), gpu(rm), gpu(rv), 1e-3);
            check_format(ev, xg);
            check_close(cpu(ev), kernels::batch_norm_inference(x, w, b, rm, rv, 1e-3), out_tol(dt),
                        out_tol(dt));
            const auto mixed = kernels::batch_norm_backward(gpu(g), xg, gpu(w), gpu(want.save_mean),
                                                            gpu(want.save_invstd), all);
            check_format(mixed.input, xg);
            check_bits(mixed.input, pg.input);
        }
}

TEST_CASE("cuda: batch_norm_relu edge cases and repeatability", "[cuda][norm]") {
    // −0 survives the ReLU (f16 outputs of a 1e-9 weight all round to ±0).
    const Tensor x = random_tensor({6, 2, 5}, DType::f16, 520, -3, 3);
    const Tensor w = full({2}, 1e-9);
    const auto want = kernels::batch_norm_relu_forward(x, w, {}, {}, {}, 0.1, 1e-5);
    const auto got = kernels::batch_norm_relu_forward(gpu(x), gpu(w), {}, {}, {}, 0.1, 1e-5);
    int64_t cpu_neg = 0, gpu_neg = 0;
    for (double v : values(want.output)) cpu_neg += v == 0 && std::signbit(v);
    for (double v : values(cpu(got.output))) gpu_neg += v == 0 && std::signbit(v);
    CHECK(cpu_neg > 0);
    CHECK(gpu_neg > 0);
    // Only some gradients; no values at all (weight and bias gradients 0).
    const Tensor xs = random_tensor({6, 4, 5}, DType::f32, 521, -2, 2);
    const Tensor gs = random_tensor({6, 4, 5}, DType::f32, 522);
    const auto fs = kernels::batch_norm_relu_forward(xs, {}, {}, {}, {}, 0.1, 1e-5);
    const auto part =
        kernels::batch_norm_relu_backward(gpu(gs), gpu(fs.output), gpu(xs), {}, gpu(fs.save_mean),
                                          gpu(fs.save_invstd), {false, true, true});
    CHECK_FALSE(part.input.defined());
    check_scaled(part.bias,
                 kernels::batch_norm_relu_backward(gs, fs.output, xs, {}, fs.save_mean,
                                                   fs.save_invstd, {false, true, true})
                     .bias,
                 1e-5);
    const Tensor e = zeros({0, 3, 4}, {.device = kGpu});
    const auto ge = kernels::batch_norm_relu_backward(
        e, e, e, {}, zeros({3}, {.device = kGpu}), ones({3}, {.device = kGpu}), {true, true, true});
    CHECK(ge.input.shape() == Shape{0, 3, 4});
    check_close(cpu(ge.bias), std::vector<double>(3, 0.0), 0, 0);
    // Two runs, the same bits (split-channel statistics, C = 16, N·S = 50176).
    for (DType dt : {DType::f32, DType::bf16}) {
        INFO(dtype_name(dt));
        const Tensor xb = gpu(random_tensor({64, 16, 28, 28}, dt, 523, -3, 5));
        const Tensor gb = gpu(random_tensor({64, 16, 28, 28}, dt, 524, -1, 1));
        const Tensor wb = gpu(random_tensor({16}, DType::f32, 525, -2, 2));
        const auto f1 = kernels::batch_norm_relu_forward(xb, wb, {}, {}, {}, 0.1, 1e-5);
        const auto f2 = kernels::batch_norm_relu_forward(xb, wb, {}, {}, {}, 0.1, 1e-5);
        check_bits(f1.output, f2.output);
        const auto b1 = kernels::batch_norm_relu_backward(gb, f1.output, xb, wb, f1.save_mean,
                                                          f1.save_invstd, {true, true, true});
        const auto b2 = kernels::batch_norm_relu_backward(gb, f1.output, xb, wb, f1.save_mean,
                                                          f1.save_invstd, {true, true, true});
        check_bits(b1.input, b2.input);
        check_bits(b1.weight, b2.weight);
        check_bits(b1.bias, b2.bias);
    }
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(gpu(gs), fs.output, gpu(xs), {}, gpu(fs.save_mean),
                                          gpu(fs.save_invstd), {true, true, true}),
        "batch_norm_relu_backward");
}

TEST_CASE("cuda: layer_norm forward and backward equal the CPU's", "[cuda][norm]") {
    const struct {
        Shape x, normalized;
    } cases[] = {{{3, 1}, {1}},        {{1, 7}, {7}},        {{5, 7}, {7}},
                 {{2, 3, 4}, {3, 4}},  {{64, 1000}, {1000}}, {{3, 5000}, {5000}},
                 {{17, 5000}, {5000}}, {{4096, 7}, {7}},     {{2, 40, 25}, {40, 25}},
                 {{1, 1025}, {1025}}};
    uint64_t seed = 100;
    for (const auto& c : cases)
        for (DType dt : kFloats)
            for (int affine = 0; affine < 2; ++affine) {
                INFO(dtype_name(dt) << " " << shape_str(c.x) << " over " << shape_str(c.normalized)
                                    << (affine ? " affine" : ""));
                const Tensor x = random_tensor(c.x, dt, seed++, -2, 4);
                const Tensor g = random_tensor(c.x, dt, seed++, -1, 1);
                // The weight in x's dtype (used directly), the bias in f64 (converted).
                const Tensor w =
                    affine ? random_tensor(c.normalized, dt, seed++, 0.5, 2) : Tensor();
                const Tensor b =
                    affine ? random_tensor(c.normalized, DType::f64, seed++) : Tensor();
                const auto want = kernels::layer_norm_forward(x, c.normalized, w, b, 1e-5);
                const auto got = kernels::layer_norm_forward(non_contiguous(gpu(x)), c.normalized,
                                                             gpu(w), gpu(b), 1e-5);
                REQUIRE(got.mean.shape() == want.mean.shape());
                check_close(cpu(got.output), want.output, out_tol(dt), out_tol(dt));
                check_close(cpu(got.mean), want.mean, stat_tol(dt), stat_tol(dt));
                check_close(cpu(got.rstd), want.rstd, stat_tol(dt), 0);

                const auto gw = kernels::layer_norm_backward(g, x, c.normalized, w, want.mean,
                                                             want.rstd, {true, true, true});
                const auto gg = kernels::layer_norm_backward(non_contiguous(gpu(g)), gpu(x),
                                                             c.normalized, gpu(w), gpu(want.mean),
                                                             gpu(want.rstd), {true, true, true});
                check_scaled(gg.input, gw.input, std::max(out_tol(dt), 1e-4));
                check_scaled(gg.weight, gw.weight, sum_tol(dt, gw.weight.dtype()));
                check_scaled(gg.bias, gw.bias, sum_tol(dt, gw.bias.dtype()));
            }
}

TEST_CASE("cuda: layer_norm with a strided weight of another dtype, and empty rows",
          "[cuda][norm]") {
    const Tensor x = random_tensor({9, 300}, DType::bf16, 200, -2, 2);
    const Tensor w = strided_vector(300, DType::f32, 201, 0.5, 2, Device::cpu());
    const Tensor wg = strided_vector(300, DType::f32, 201, 0.5, 2, kGpu);
    const auto want = kernels::layer_norm_forward(x, {300}, w, {}, 1e-5);
    const auto got = kernels::layer_norm_forward(gpu(x), {300}, wg, {}, 1e-5);
    check_close(cpu(got.output), want.output, out_tol(DType::bf16), out_tol(DType::bf16));
    const Tensor g = random_tensor({9, 300}, DType::bf16, 202, -1, 1);
    const auto gw =
        kernels::layer_norm_backward(g, x, {300}, w, want.mean, want.rstd, {true, true, false});
    const auto gg = kernels::layer_norm_backward(gpu(g), gpu(x), {300}, wg, gpu(want.mean),
                                                 gpu(want.rstd), {true, true, false});
    CHECK_FALSE(gg.bias.defined());
    check_scaled(gg.input, gw.input, out_tol(DType::bf16));
    check_scaled(gg.weight, gw.weight, 1e-4);

    const auto e = kernels::layer_norm_forward(ones({3, 0}, {.device = kGpu}), {0}, {}, {}, 1e-5);
    CHECK(std::isnan(cpu(e.mean).at({2, 0})));
}

TEST_CASE("cuda: norm kernels give the same bits on every run", "[cuda][norm]") {
    for (DType dt : {DType::f32, DType::bf16}) {
        INFO(dtype_name(dt));
        // Batch norm through the split-channel path (C = 16, N·S = 50176).
        const Tensor x = gpu(random_tensor({64, 16, 28, 28}, dt, 300, -3, 5));
        const Tensor g = gpu(random_tensor({64, 16, 28, 28}, dt, 301, -1, 1));
        const Tensor w = gpu(random_tensor({16}, DType::f32, 302, 0.5, 2));
        const Tensor b = gpu(random_tensor({16}, DType::f32, 303, -1, 1));
        const auto f1 = kernels::batch_norm_forward(x, w, b, {}, {}, 0.1, 1e-5);
        const auto f2 = kernels::batch_norm_forward(x, w, b, {}, {}, 0.1, 1e-5);
        check_bits(f1.output, f2.output);
        check_bits(f1.save_mean, f2.save_mean);
        check_bits(f1.save_invstd, f2.save_invstd);
        const auto b1 =
            kernels::batch_norm_backward(g, x, w, f1.save_mean, f1.save_invstd, {true, true, true});
        const auto b2 =
            kernels::batch_norm_backward(g, x, w, f1.save_mean, f1.save_invstd, {true, true, true});
        check_bits(b1.input, b2.input);
        check_bits(b1.weight, b2.weight);
        check_bits(b1.bias, b2.bias);
        // Layer norm: warp rows, block rows, and column sums split over row partials.
        for (const Shape& shape : {Shape{4096, 7}, Shape{33, 5000}, Shape{512, 1000}}) {
            const Shape norm{shape[1]};
            const Tensor lx = gpu(random_tensor(shape, dt, 304, -2, 4));
            const Tensor lg = gpu(random_tensor(shape, dt, 305, -1, 1));
            const Tensor lw = gpu(random_tensor(norm, dt, 306, 0.5, 2));
            const auto l1 = kernels::layer_norm_forward(lx, norm, lw, {}, 1e-5);
            const auto l2 = kernels::layer_norm_forward(lx, norm, lw, {}, 1e-5);
            check_bits(l1.output, l2.output);
            check_bits(l1.rstd, l2.rstd);
            const auto g1 = kernels::layer_norm_backward(lg, lx, norm, lw, l1.mean, l1.rstd,
                                                         {true, true, true});
            const auto g2 = kernels::layer_norm_backward(lg, lx, norm, lw, l1.mean, l1.rstd,
                                                         {true, true, true});
            check_bits(g1.input, g2.input);
            check_bits(g1.weight, g2.weight);
            check_bits(g1.bias, g2.bias);
        }
    }
}

TEST_CASE("cuda: norm ops name the op when devices are mixed", "[cuda][norm]") {
    const Tensor x = random_tensor({4, 3, 5}, DType::f32, 400).to(kGpu);
    REQUIRE_THROWS_WITH_MSG(kernels::batch_norm_forward(x, ones({3}), {}, {}, {}, 0.1, 1e-5),
                            "batch_norm_forward");
    REQUIRE_THROWS_WITH_MSG(kernels::layer_norm_forward(x, {5}, ones({5}), {}, 1e-5),
                            "layer_norm_forward");
}

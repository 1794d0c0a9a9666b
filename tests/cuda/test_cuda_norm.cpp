// CUDA batch norm and layer norm beyond the op table. The comparisons with
// the CPU on random inputs — every front, dtype, layout (channels-last
// included: results keep x's format), with and without weight and bias,
// running statistics, partial gradients, empty inputs, split-channel and
// block-per-row shapes — come from the norm entries of tests/ops/
// entries_norm.cpp, run by tests/cuda/test_cuda_ops.cpp, whose
// cuda_tolerance follows the precision each output carries (an f64 weight's
// gradients and f64 running statistics of an f32, f16 or bf16 x: f32's).
// Here: what the table cannot express (the untouched gaps of strided running
// statistics; a weight without a bias), the fused ops against the GPU's own
// unfused ones, a gradient of another layout than x, signed zeros,
// repeatability, and errors.
//
// Tolerances: the GPU accumulates in f32 (f64 for f64) by Welford where the
// CPU sums in f64, so results of f32 precision agree to ~1e-4 and f16/bf16
// ones to one rounding step (rtol_for); sums (the weight and bias gradients)
// are compared relative to their largest value, as tests/kernels/test_norm.cpp does.
#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/elementwise.h"
#include "kernels/norm.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const std::array<bool, 3> kAll = {true, true, true};

Tensor gpu(const Tensor& t) { return t.defined() ? t.to(kGpu) : t; }
Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }

// Results of x's dtype.
double out_tol(DType dt) {
    return dt == DType::f64 ? 1e-10 : dt == DType::f32 ? 1e-4 : rtol_for(dt);
}

// |got − want| <= tol · max(1, max |want|): sums whose terms cancel.
void check_scaled(const Tensor& got, const Tensor& want, double tol) {
    REQUIRE(got.defined());
    REQUIRE(got.dtype() == want.dtype());
    double big = 1;
    for (double v : values(want)) big = std::max(big, std::abs(v));
    check_close(cpu(got), want, tol, tol * big);
}

void check_bits(const Tensor& a, const Tensor& b) { check_close(cpu(a), cpu(b), 0, 0); }

// A [n] vector as a step-2 slice of a [2n] buffer (on device d).
Tensor strided_vector(int64_t n, DType dt, uint64_t seed, double lo, double hi, Device d) {
    return random_tensor({2 * n}, dt, seed, lo, hi).to(d).slice(0, 0, 2 * n, 2);
}

}  // namespace

// The op table updates strided running statistics in the transposed layout
// (tests/ops/entries_norm.cpp: running_copy) and compares their values, not
// the gaps between them: that the update leaves those alone is checked here.
TEST_CASE("cuda: batch norm leaves the gaps of strided running statistics alone", "[cuda][norm]") {
    for (DType rdt : {DType::f32, DType::f64, DType::bf16})
        for (const Shape& shape : {Shape{4, 3, 5}, Shape{64, 16, 28, 28}, Shape{2, 7}}) {
            INFO("running statistics " << dtype_name(rdt) << ", f32 x " << shape_str(shape));
            const int64_t C = shape[1];
            const Tensor x = random_tensor(shape, DType::f32, 20, -2, 6).to(kGpu);
            // Every other element of a zeroed buffer, updated in place through the stride.
            Tensor rm = zeros({2 * C}, {rdt, kGpu}), rv = zeros({2 * C}, {rdt, kGpu});
            rm.slice(0, 0, 2 * C, 2).copy_(random_tensor({C}, rdt, 21, -1, 1).to(kGpu));
            rv.slice(0, 0, 2 * C, 2).copy_(random_tensor({C}, rdt, 22, 0.5, 2).to(kGpu));
            kernels::batch_norm_forward(x, {}, {}, rm.slice(0, 0, 2 * C, 2),
                                        rv.slice(0, 0, 2 * C, 2), 0.25, 1e-5);
            const std::vector<double> m = values(cpu(rm)), v = values(cpu(rv));
            int64_t touched = 0;
            for (size_t i = 1; i < m.size(); i += 2) touched += m[i] != 0 || v[i] != 0;
            CHECK(touched == 0);
        }
}

// Args::affine gives weight and bias together; a weight alone goes here.
TEST_CASE("cuda: layer_norm with a strided weight and no bias equals the CPU's", "[cuda][norm]") {
    const Tensor x = random_tensor({9, 300}, DType::bf16, 200, -2, 2);
    const Tensor w = strided_vector(300, DType::f32, 201, 0.5, 2, Device::cpu());
    const Tensor wg = strided_vector(300, DType::f32, 201, 0.5, 2, kGpu);
    const auto want = kernels::layer_norm_forward(x, {300}, w, {}, 1e-5);
    const auto got = kernels::layer_norm_forward(gpu(x), {300}, wg, {}, 1e-5);
    check_close(cpu(got.output), want.output, out_tol(DType::bf16), out_tol(DType::bf16));
    check_close(cpu(got.rstd), want.rstd, 2e-5, 0);
}

// The fused batch norm + ReLU (Note [Fused batch norm + ReLU] in
// kernels/norm.h) against the GPU's own batch_norm, add and relu: the forward
// is the same apply pass plus the ReLU (the same bits); the backward's masked
// sums may contract differently, so it is held to the sums' tolerance. Both
// layouts: channels-last x runs as rows of C channels.
TEST_CASE("cuda: the fused batch norm ops equal the GPU's own unfused ones", "[cuda][norm]") {
    const Shape shapes[] = {{2, 3},       {1, 4, 3},       {3, 5, 7},     {5, 3, 3, 3},
                            {4, 300, 3},  {8, 16, 28, 28}, {4, 64, 7, 7}, {64, 16, 28, 28},
                            {2, 3, 5, 7}, {8, 1, 6, 6},    {16, 40, 1, 1}};
    uint64_t seed = 500;
    for (const Shape& shape : shapes)
        for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16})
            for (bool last : {false, true}) {
                if (last && shape.size() != 4) continue;
                const int64_t C = shape[1];
                INFO(dtype_name(dt) << " " << shape_str(shape) << (last ? " channels-last" : ""));
                const auto on_gpu = [last](const Tensor& t) {
                    return last ? gpu(t).contiguous(MemoryFormat::channels_last) : gpu(t);
                };
                const Tensor x = on_gpu(random_tensor(shape, dt, seed++, -3, 5));
                const Tensor g = on_gpu(random_tensor(shape, dt, seed++, -1, 1));
                const Tensor r = on_gpu(random_tensor(shape, dt, seed++, -2, 2));
                const Tensor w = gpu(random_tensor({C}, DType::f32, seed++, -2, 2));
                const Tensor b = gpu(random_tensor({C}, DType::f32, seed++, -1, 1));
                const auto plain = kernels::batch_norm_forward(x, w, b, {}, {}, 0.1, 1e-5);
                const auto fused = kernels::batch_norm_relu_forward(x, w, b, {}, {}, 0.1, 1e-5);
                check_bits(fused.output, kernels::relu(plain.output));
                const auto res =
                    kernels::batch_norm_add_relu_forward(x, r, w, b, {}, {}, 0.1, 1e-5);
                check_bits(res.output, kernels::relu(kernels::add(plain.output, r)));

                const auto got = kernels::batch_norm_relu_backward(
                    g, fused.output, x, w, fused.save_mean, fused.save_invstd, kAll);
                const auto unfused =
                    kernels::batch_norm_backward(kernels::relu_backward(g, fused.output), x, w,
                                                 fused.save_mean, fused.save_invstd, kAll);
                const double tol = std::max(out_tol(dt), 1e-5);
                check_scaled(got.input, cpu(unfused.input), tol);
                check_scaled(got.weight, cpu(unfused.weight), std::max(out_tol(dt), 2e-5));
                check_scaled(got.bias, cpu(unfused.bias), std::max(out_tol(dt), 2e-5));
            }
}

TEST_CASE("cuda: a batch norm gradient of another layout than x follows x", "[cuda][norm]") {
    uint64_t seed = 2100;
    for (const Shape& shape : {Shape{4, 16, 8, 8}, Shape{2, 3, 5, 7}, Shape{64, 16, 28, 28}})
        for (DType dt : {DType::f32, DType::bf16}) {
            INFO(dtype_name(dt) << " " << shape_str(shape));
            const Tensor g = gpu(random_tensor(shape, dt, seed++, -1, 1));
            const Tensor x = gpu(random_tensor(shape, dt, seed++, -3, 5))
                                 .contiguous(MemoryFormat::channels_last);
            const Tensor w = gpu(random_tensor({shape[1]}, DType::f32, seed++, 0.5, 2));
            const auto f = kernels::batch_norm_forward(x, w, {}, {}, {}, 0.1, 1e-5);
            const auto same = kernels::batch_norm_backward(
                g.contiguous(MemoryFormat::channels_last), x, w, f.save_mean, f.save_invstd, kAll);
            const auto mixed =
                kernels::batch_norm_backward(g, x, w, f.save_mean, f.save_invstd, kAll);
            REQUIRE(mixed.input.is_contiguous(MemoryFormat::channels_last));
            check_bits(mixed.input, same.input);
            check_bits(mixed.weight, same.weight);
        }
}

TEST_CASE("cuda: batch_norm_relu keeps −0 and names a misplaced output", "[cuda][norm]") {
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
    const Tensor xs = random_tensor({6, 4, 5}, DType::f32, 521, -2, 2);
    const Tensor gs = random_tensor({6, 4, 5}, DType::f32, 522);
    const auto fs = kernels::batch_norm_relu_forward(xs, {}, {}, {}, {}, 0.1, 1e-5);
    REQUIRE_THROWS_WITH_MSG(
        kernels::batch_norm_relu_backward(gpu(gs), fs.output, gpu(xs), {}, gpu(fs.save_mean),
                                          gpu(fs.save_invstd), kAll),
        "batch_norm_relu_backward");
}

TEST_CASE("cuda: norm kernels give the same bits on every run", "[cuda][norm]") {
    for (DType dt : {DType::f32, DType::bf16}) {
        INFO(dtype_name(dt));
        // Batch norm through the split-channel path (C = 16, N·S = 50176).
        const Tensor x = gpu(random_tensor({64, 16, 28, 28}, dt, 300, -3, 5));
        const Tensor g = gpu(random_tensor({64, 16, 28, 28}, dt, 301, -1, 1));
        const Tensor w = gpu(random_tensor({16}, DType::f32, 302, 0.5, 2));
        const Tensor b = gpu(random_tensor({16}, DType::f32, 303, -1, 1));
        for (bool relu : {false, true}) {
            INFO((relu ? "batch_norm_relu" : "batch_norm"));
            const auto forward =
                relu ? kernels::batch_norm_relu_forward : kernels::batch_norm_forward;
            const auto f1 = forward(x, w, b, {}, {}, 0.1, 1e-5);
            const auto f2 = forward(x, w, b, {}, {}, 0.1, 1e-5);
            check_bits(f1.output, f2.output);
            check_bits(f1.save_mean, f2.save_mean);
            check_bits(f1.save_invstd, f2.save_invstd);
            const auto backward = [&] {
                return relu ? kernels::batch_norm_relu_backward(g, f1.output, x, w, f1.save_mean,
                                                                f1.save_invstd, kAll)
                            : kernels::batch_norm_backward(g, x, w, f1.save_mean, f1.save_invstd,
                                                           kAll);
            };
            const auto b1 = backward(), b2 = backward();
            check_bits(b1.input, b2.input);
            check_bits(b1.weight, b2.weight);
            check_bits(b1.bias, b2.bias);
        }
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
            const auto g1 = kernels::layer_norm_backward(lg, lx, norm, lw, l1.mean, l1.rstd, kAll);
            const auto g2 = kernels::layer_norm_backward(lg, lx, norm, lw, l1.mean, l1.rstd, kAll);
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

// The linear layer through cuBLASLt's epilogues (kernels/cuda/linear.cpp)
// beyond the op table: the random comparisons with the CPU — linear,
// linear_relu, linear_gelu (with and without the pre-activation) and
// linear_weight_grad on cuBLASLt's aligned problem, odd sizes, a batch of
// rows, a vector, column-major and padded-row operands, in f32, f64, f16 and
// bf16 — are tests/ops/entries_matmul.cpp's cuda_cases, run by
// tests/cuda/test_cuda_ops.cpp. Here: the entry points take the aligned
// problem (BGRADB too) and the fronts return their bits, so the table
// compared the fused path; a bias and an x at odd element offsets, and the
// weight gradient from row blocks of wider buffers, against the CPU; the
// GELU epilogue's output alone equals the one with the pre-activation; and
// Linear(relu) and Linear + GELU(tanh) steps equal the CPU's.
#include <cmath>
#include <utility>
#include <vector>

#include "core/cuda_context.h"
#include "kernels/cuda/linear.h"
#include "kernels/elementwise.h"
#include "kernels/front.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "nn/layers.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();
const DType kLtTypes[] = {DType::f32, DType::f16, DType::bf16};

Tensor rnd(const Shape& s, DType dt, uint64_t seed) { return random_tensor(s, dt, seed, -1, 1); }

// The CPU computes from the same (rounded) inputs in f32, or f64 for f32.
Tensor wide(const Tensor& t) {
    return t.to(kCpu).to(t.dtype() == DType::f32 ? DType::f64 : DType::f32);
}

// Sums of k terms in [-1, 1]: both sides accumulate in f32 in their own
// order; f16/bf16 results are rounded once.
void check_sum(const Tensor& got, const Tensor& want, DType dt, int64_t k) {
    const double s = std::sqrt(double(k));
    const double rtol = dt == DType::f32 ? 1e-5 : dt == DType::f16 ? 2e-3 : 1.6e-2;
    const double atol = dt == DType::f32 ? 1e-5 * s : dt == DType::f16 ? 1e-3 * s : 8e-3 * s;
    REQUIRE(got.device() == kGpu);
    REQUIRE(got.dtype() == dt);
    check_close(got.to(kCpu).to(want.dtype()), want, rtol, atol);
}

// a and b, on any device, hold the same values bit for bit.
void require_same_bits(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    check_close(a.to(kCpu), b.to(kCpu), 0, 0);
}

}  // namespace

TEST_CASE("cuda: the cuBLASLt entry points take aligned problems, as the fronts do",
          "[cuda][matmul][linear]") {
    // The op table compares the fronts on this problem with the CPU
    // (entries_matmul.cpp's cuda_cases); here the entry points must take it,
    // and the fronts' results must be theirs bit for bit: what the table
    // compared came from the fused epilogue.
    uint64_t seed = 900;
    const int64_t M = 64, K = 256, N = 128;
    const StreamRef stream = current_stream(kGpu);
    for (DType dt : kLtTypes) {
        const Tensor x = rnd({M, K}, dt, ++seed).to(kGpu), w = rnd({N, K}, dt, ++seed).to(kGpu),
                     b = rnd({N}, dt, ++seed).to(kGpu);
        for (const kernels::LinearActivation act :
             {kernels::LinearActivation::none, kernels::LinearActivation::relu,
              kernels::LinearActivation::gelu_tanh})
            for (const bool bias : {true, false}) {
                if (act == kernels::LinearActivation::none && !bias) continue;  // a plain GEMM
                INFO(dtype_name(dt) << " activation " << int(act) << (bias ? " bias" : ""));
                const Tensor bb = bias ? b : Tensor();
                Tensor out = empty({M, N}, {.dtype = dt, .device = kGpu});
                Tensor pre = empty({M, N}, {.dtype = dt, .device = kGpu});
                const bool gelu = act == kernels::LinearActivation::gelu_tanh;
                REQUIRE(kernels::cuda::linear_forward(
                    kernels::view_of(out), kernels::view_of(x), kernels::view_of(w),
                    bias ? kernels::view_of(b) : kernels::View{}, act,
                    gelu ? kernels::view_of(pre) : kernels::View{}, stream));
                if (act == kernels::LinearActivation::none)
                    require_same_bits(kernels::linear(x, w, bb), out);
                if (act == kernels::LinearActivation::relu)
                    require_same_bits(kernels::linear_relu(x, w, bb), out);
                if (!gelu) continue;
                const kernels::LinearGelu lg = kernels::linear_gelu(x, w, bb);
                require_same_bits(lg.out, out);
                require_same_bits(lg.pre, pre);
                // Without the auxiliary output: GELU_BIAS / GELU, the same values.
                Tensor out2 = empty({M, N}, {.dtype = dt, .device = kGpu});
                REQUIRE(kernels::cuda::linear_forward(
                    kernels::view_of(out2), kernels::view_of(x), kernels::view_of(w),
                    bias ? kernels::view_of(b) : kernels::View{}, act, kernels::View{}, stream));
                require_same_bits(kernels::linear_gelu(x, w, bb, false).out, out2);
                require_same_bits(out2, out);
            }

        INFO(dtype_name(dt) << " weight gradient");
        const Tensor g = rnd({M, N}, dt, ++seed).to(kGpu);
        Tensor gw = empty({N, K}, {.dtype = dt, .device = kGpu}),
               gb = empty({N}, {.dtype = dt, .device = kGpu});
        // BGRADB with f16/bf16 operands is the well-trodden case; for f32
        // (no TF32) cuBLASLt may offer none, and the front then falls back.
        const bool fused =
            kernels::cuda::linear_weight_grad(kernels::view_of(gw), kernels::view_of(gb),
                                              kernels::view_of(g), kernels::view_of(x), stream);
        if (dt == DType::f32 && !fused) {
            WARN("cuBLASLt offers no f32 BGRADB algorithm here: f32 takes the plain path");
            continue;
        }
        REQUIRE(fused);
        const kernels::LinearWeightGrads r = kernels::linear_weight_grad(g, x, true);
        require_same_bits(r.weight, gw);
        require_same_bits(r.bias, gb);
    }
}

TEST_CASE(
    "cuda: linear, linear_relu, linear_gelu and linear_weight_grad on operands at odd "
    "offsets equal the CPU's",
    "[cuda][matmul][linear]") {
    // The op table's layouts start every operand at its buffer's start; here a
    // bias and an x at an odd element offset (alignment 2 or 4 bytes), and the
    // weight gradient from row blocks of buffers 40 and 130 wide.
    uint64_t seed = 950;
    for (DType dt : kLtTypes) {
        INFO(dtype_name(dt));
        const Tensor w = rnd({33, 127}, dt, ++seed), wg = w.to(kGpu);
        const Tensor bias_buf = rnd({34}, dt, ++seed);
        const Tensor bias = bias_buf.slice(0, 1, 34, 1), bg = bias_buf.to(kGpu).slice(0, 1, 34, 1);
        const Tensor x_buf = rnd({9, 128}, dt, ++seed), x2 = rnd({7, 127}, dt, ++seed);
        const std::vector<std::pair<Tensor, Tensor>> xs = {
            {x2, x2.to(kGpu)}, {x_buf.slice(1, 1, 128, 1), x_buf.to(kGpu).slice(1, 1, 128, 1)}};
        for (const auto& [x, xg] : xs) {
            INFO("x " << shape_str(xg.shape()) << " strides " << shape_str(xg.strides()));
            const Tensor z = kernels::linear(wide(x), wide(w), wide(bias));
            const Tensor y = kernels::linear(xg, wg, bg);
            check_sum(y, z, dt, 127);
            // Again: the cached algorithm (Note [cuBLASLt algorithm cache]), the same bits.
            require_same_bits(kernels::linear(xg, wg, bg), y);
            check_sum(kernels::linear_relu(xg, wg, bg), kernels::relu(z), dt, 127);
            check_sum(kernels::linear_relu(xg, wg),
                      kernels::relu(kernels::linear(wide(x), wide(w))), dt, 127);
            const kernels::LinearGelu lg = kernels::linear_gelu(xg, wg, bg);
            check_sum(lg.out, kernels::gelu(z, GeluApprox::tanh), dt, 127);
            check_sum(lg.pre, z, dt, 127);
            const Tensor z0 = kernels::linear(wide(x), wide(w));
            const kernels::LinearGelu lg0 = kernels::linear_gelu(xg, wg);
            check_sum(lg0.out, kernels::gelu(z0, GeluApprox::tanh), dt, 127);
            check_sum(lg0.pre, z0, dt, 127);
            const kernels::LinearGelu out_only = kernels::linear_gelu(xg, wg, bg, false);
            CHECK_FALSE(out_only.pre.defined());
            check_sum(out_only.out, kernels::gelu(z, GeluApprox::tanh), dt, 127);
        }
        const Tensor g_buf = rnd({40, 40}, dt, ++seed), xw_buf = rnd({40, 130}, dt, ++seed);
        const Tensor g = g_buf.slice(1, 0, 33, 1), x = xw_buf.slice(1, 0, 127, 1);
        const Tensor gg = g_buf.to(kGpu).slice(1, 0, 33, 1),
                     xg = xw_buf.to(kGpu).slice(1, 0, 127, 1);
        for (const bool bias_too : {true, false}) {
            INFO("padded rows" << (bias_too ? " bias" : ""));
            const kernels::LinearWeightGrads r = kernels::linear_weight_grad(gg, xg, bias_too);
            check_sum(r.weight, kernels::matmul(wide(g).t(), wide(x)), dt, 40);
            REQUIRE(r.bias.defined() == bias_too);
            if (bias_too) check_sum(r.bias, kernels::sum(wide(g), {0}), dt, 40);
        }
    }
}

TEST_CASE("cuda: a Linear(relu) + Linear step equals the CPU's", "[cuda][matmul][linear]") {
    // Forward and backward through the fused epilogues on the GPU, the plain
    // ops on the CPU, from the same parameters and batch.
    nn::Linear l1(96, 64, {.relu = true}), l2(64, 10);
    nn::Linear g1(96, 64, {.relu = true}), g2(64, 10);
    for (auto [src, dst] : {std::pair{&l1, &g1}, std::pair{&l2, &g2}}) {
        dst->weight.detach().copy_(src->weight.detach());
        dst->bias.detach().copy_(src->bias.detach());
    }
    g1.to(kGpu);
    g2.to(kGpu);
    const Tensor x = rnd({32, 96}, DType::f32, 990), dy = rnd({32, 10}, DType::f32, 991);
    const Tensor yc = l2(l1(x)), yg = g2(g1(x.to(kGpu)));
    yc.backward(dy);
    yg.backward(dy.to(kGpu));
    check_sum(yg, yc, DType::f32, 96);
    check_sum(g1.weight.grad(), l1.weight.grad(), DType::f32, 32);
    check_sum(g1.bias.grad(), l1.bias.grad(), DType::f32, 32);
    check_sum(g2.weight.grad(), l2.weight.grad(), DType::f32, 32);
    check_sum(g2.bias.grad(), l2.bias.grad(), DType::f32, 32);
}

TEST_CASE("cuda: a Sequential Linear + GELU(tanh) + Linear step equals the CPU's",
          "[cuda][matmul][linear]") {
    // The pair runs as linear_gelu (the pre-activation from the epilogue,
    // read by the backward) on both devices.
    nn::Sequential cpu(nn::Linear(96, 64), nn::GELU(GeluApprox::tanh), nn::Linear(64, 10));
    nn::Sequential gpu(nn::Linear(96, 64), nn::GELU(GeluApprox::tanh), nn::Linear(64, 10));
    gpu.load_state_dict(cpu.state_dict());
    gpu.to(kGpu);
    const Tensor x = rnd({32, 96}, DType::f32, 992), dy = rnd({32, 10}, DType::f32, 993);
    const Tensor yc = cpu(x), yg = gpu(x.to(kGpu));
    yc.backward(dy);
    yg.backward(dy.to(kGpu));
    check_sum(yg, yc, DType::f32, 96);
    const nn::NamedTensors pc = cpu.named_parameters(), pg = gpu.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
        INFO(pc[i].first);
        check_sum(pg[i].second.grad(), pc[i].second.grad(), DType::f32, 32);
    }
}

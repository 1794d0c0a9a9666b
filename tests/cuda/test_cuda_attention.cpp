// The fused CUDA attention (kernels/cuda/attention*.cu) against the CPU's
// fused kernel and, on tensor cores, against the model of its summation
// order (tests/support/attention_model.h): forward, lse and every gradient;
// each path of the plan (tensor cores for f16/bf16 at D = 32, 64, 128, a warp
// per row for f32/f64 and other head dims, the decode split for a few rows
// against a long cache); causal and not, tails, Tq != Tk, dropout's mask,
// strided q, k, v from a packed projection; bit-identical reruns.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/cuda_context.h"
#include "kernels/attention.h"
#include "support/attention_model.h"
#include "kernels/cuda/attention_plan.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);

struct Case {
    int64_t b, h, tq, tk, d;
    bool causal;
    double dropout;
};

double max_abs(const Tensor& t) {
    double m = 0;
    for (double x : values(t.to(Device::cpu()).to(DType::f64))) m = std::max(m, std::abs(x));
    return m;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
    return x.shape() == y.shape() &&
           std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel() * x.element_size())) == 0;
}

kernels::AttentionArgs args_of(const Case& c) {
    kernels::AttentionArgs a;
    a.causal = c.causal;
    a.scale = 1.0 / std::sqrt(double(c.d));
    a.dropout_p = c.dropout;
    a.seed = 23;
    a.first_block = 9;
    return a;
}

void check_case(const Case& c, DType dt) {
    INFO("[" << c.b << ", " << c.h << ", " << c.tq << "/" << c.tk << ", " << c.d << "]"
             << (c.causal ? " causal" : "") << " dropout " << c.dropout << " " << dtype_name(dt));
    const Tensor q = random_tensor({c.b, c.h, c.tq, c.d}, dt, 1),
                 k = random_tensor({c.b, c.h, c.tk, c.d}, dt, 2),
                 v = random_tensor({c.b, c.h, c.tk, c.d}, dt, 3),
                 g = random_tensor({c.b, c.h, c.tq, c.d}, dt, 4);
    const kernels::AttentionArgs a = args_of(c);
    const kernels::AttentionForward cpu = kernels::attention_forward(q, k, v, a);
    const kernels::AttentionGrads dcpu = kernels::attention_backward(g, q, k, v, cpu.out, cpu.lse, a);
    const Tensor qg = q.to(kGpu), kg = k.to(kGpu), vg = v.to(kGpu), gg = g.to(kGpu);
    const kernels::AttentionForward gpu = kernels::attention_forward(qg, kg, vg, a);
    const kernels::AttentionGrads dgpu = kernels::attention_backward(gg, qg, kg, vg, gpu.out, gpu.lse, a);
    // Half types: the GPU rounds P (and dS) to the operand type for its
    // products, the CPU keeps them in f32 (attention_model.h's statement).
    const bool half = dt == DType::bf16 || dt == DType::f16;
    const double eps = dt == DType::bf16 ? std::ldexp(1.0, -8) : dt == DType::f16 ? std::ldexp(1.0, -11)
                       : dt == DType::f32 ? 1e-6 : 1e-13;
    const double keep = 1.0 / (1.0 - c.dropout);
    check_close_scaled(gpu.out, cpu.out, half ? 2.5 * keep * eps : 20 * eps);
    check_close_scaled(gpu.lse, cpu.lse, half ? 1e-5 : 20 * eps);
    check_close_scaled(dgpu.q, dcpu.q, half ? 8 * eps : 50 * eps);
    check_close_scaled(dgpu.k, dcpu.k, half ? 8 * eps : 50 * eps);
    check_close_scaled(dgpu.v, dcpu.v, half ? 4 * keep * eps : 50 * eps);
    // Deterministic: a second run gives the same bits.
    const kernels::AttentionForward again = kernels::attention_forward(qg, kg, vg, a);
    CHECK(same_bits(again.out, gpu.out));
    const kernels::AttentionGrads dagain =
        kernels::attention_backward(gg, qg, kg, vg, gpu.out, gpu.lse, a);
    CHECK(same_bits(dagain.q, dgpu.q));
    CHECK(same_bits(dagain.k, dgpu.k));
    // On tensor cores the model of the kernel's order says more: out within
    // half an ulp of its rounding plus the device's exp and mma order.
    const kernels::cuda::AttentionShape s{c.b * c.h, c.h, c.tq, c.tk, c.d, c.d, c.causal};
    if (half && kernels::cuda::attention_forward_plan(s, dt, 132).path ==
                    kernels::cuda::AttentionPath::tensor_core) {
        const AttnModelIn in = model_input(q, k, v, g, a);
        const AttnModelOut m = attention_tc_model_forward(in);
        const std::vector<float> got = model_floats(gpu.out);
        double vmax = max_abs(v), worst = 0;
        for (size_t i = 0; i < got.size(); ++i)
            worst = std::max(worst, std::abs(double(got[i]) - m.out[i]) -
                                        0.5 * eps * std::abs(double(m.out[i])));
        CHECK(worst <= eps / 16 * keep * vmax);
    }
}

}  // namespace

TEST_CASE("cuda attention: tensor cores against the CPU kernel and the model", "[cuda][attention]") {
    for (DType dt : {DType::bf16, DType::f16})
        for (const Case& c : {Case{2, 4, 128, 128, 64, true, 0}, Case{1, 2, 70, 45, 32, false, 0},
                              Case{1, 2, 130, 200, 128, true, 0}, Case{1, 3, 65, 65, 64, true, 0.25},
                              Case{2, 2, 200, 70, 32, true, 0}, Case{1, 1, 5, 300, 64, false, 0}})
            check_case(c, dt);
}

TEST_CASE("cuda attention: a warp per row (f32, f64, other head dims)", "[cuda][attention]") {
    // p = 0.1: 1/(1 − p) is not a float, so f64 must scale by the double.
    for (const Case& c : {Case{2, 2, 70, 45, 64, true, 0}, Case{1, 2, 33, 100, 48, false, 0.1},
                          Case{1, 1, 20, 20, 200, true, 0}})
        for (DType dt : {DType::f32, DType::f64}) check_case(c, dt);
    check_case(Case{1, 2, 40, 40, 48, true, 0}, DType::bf16);  // D off the tensor-core set
}

TEST_CASE("cuda attention: the decode split against the CPU", "[cuda][attention]") {
    for (DType dt : {DType::f32, DType::bf16})
        for (const Case& c : {Case{1, 4, 1, 1000, 64, false, 0}, Case{2, 2, 3, 700, 32, true, 0},
                              Case{1, 2, 1, 1, 64, false, 0}, Case{1, 1, 4, 5000, 128, false, 0.1}})
            check_case(c, dt);
}

TEST_CASE("cuda attention: q, k, v as views of a packed projection", "[cuda][attention]") {
    const int64_t b = 2, t = 96, h = 4, d = 32;
    for (DType dt : {DType::bf16, DType::f32}) {
        const Tensor packed = random_tensor({b, t, 3, h, d}, dt, 5);
        const auto part = [&](const Tensor& p, int64_t i) { return p.select(2, i).permute({0, 2, 1, 3}); };
        kernels::AttentionArgs a;
        a.causal = true;
        a.scale = 1.0 / std::sqrt(double(d));
        const kernels::AttentionForward cpu =
            kernels::attention_forward(part(packed, 0), part(packed, 1), part(packed, 2), a);
        const Tensor pg = packed.to(kGpu);
        const kernels::AttentionForward gpu =
            kernels::attention_forward(part(pg, 0), part(pg, 1), part(pg, 2), a);
        check_close_scaled(gpu.out, cpu.out, dt == DType::bf16 ? 0.01 : 1e-5);
    }
}

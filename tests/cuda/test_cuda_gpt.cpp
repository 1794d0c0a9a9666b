// The transformer on CUDA against the CPU: attention (the composite CUDA
// path, the fused kernels' fallback, against the fused CPU kernel: forward,
// lse, gradients, causal or not,
// f32 without TF32 and bf16, dropout's mask), a GPT training step (loss,
// every gradient and the AdamW update, no host sync inside the step), and
// generation's cached logits. tools/device/check.sh runs these.
#include <algorithm>
#include <cmath>
#include <map>

#include "core/cuda_context.h"
#include "kernels/attention.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);

struct NoTf32 {
    bool was = allow_tf32();
    NoTf32() { set_allow_tf32(false); }
    ~NoTf32() { set_allow_tf32(was); }
};

}  // namespace

TEST_CASE("cuda attention: the composite path equals the CPU's fused kernel", "[cuda][attention]") {
    const NoTf32 no_tf32;
    struct Case {
        int64_t b, h, tq, tk, d;
        bool causal;
        double dropout;
    };
    for (const Case& c : {Case{2, 4, 128, 128, 32, true, 0}, Case{1, 2, 70, 45, 64, false, 0},
                          Case{1, 2, 65, 65, 128, true, 0.25}}) {
        for (DType dt : {DType::f32, DType::bf16}) {
            INFO("Tq " << c.tq << " Tk " << c.tk << " D " << c.d << (c.causal ? " causal" : "")
                       << " dropout " << c.dropout << " " << dtype_name(dt));
            const Tensor q = random_tensor({c.b, c.h, c.tq, c.d}, dt, 1),
                         kk = random_tensor({c.b, c.h, c.tk, c.d}, dt, 2),
                         v = random_tensor({c.b, c.h, c.tk, c.d}, dt, 3),
                         g = random_tensor({c.b, c.h, c.tq, c.d}, dt, 4);
            kernels::AttentionArgs a;
            a.causal = c.causal;
            a.scale = 1.0 / std::sqrt(double(c.d));
            a.dropout_p = c.dropout;
            a.seed = 17;
            a.first_block = 5;
            const kernels::AttentionForward cpu = kernels::attention_forward(q, kk, v, a);
            const kernels::AttentionGrads dcpu =
                kernels::attention_backward(g, q, kk, v, cpu.out, cpu.lse, a);
            const kernels::AttentionForward gpu =
                kernels::attention_forward_composite(q.to(kGpu), kk.to(kGpu), v.to(kGpu), a);
            REQUIRE(gpu.out.device() == kGpu);
            const kernels::AttentionGrads dgpu = kernels::attention_backward_composite(
                g.to(kGpu), q.to(kGpu), kk.to(kGpu), v.to(kGpu), gpu.out, gpu.lse, a);
            // bf16: the GPU's products and probabilities are rounded to bf16.
            const double tol = dt == DType::bf16 ? 3e-2 : 2e-5;
            check_close_scaled(gpu.out, cpu.out, tol);
            check_close_scaled(gpu.lse, cpu.lse, dt == DType::bf16 ? 1e-2 : 1e-5);
            check_close_scaled(dgpu.q, dcpu.q, 2 * tol);
            check_close_scaled(dgpu.k, dcpu.k, 2 * tol);
            check_close_scaled(dgpu.v, dcpu.v, 2 * tol);
        }
    }
}

TEST_CASE("cuda gpt: a training step equals the CPU's, with no host sync inside", "[cuda][gpt]") {
    const NoTf32 no_tf32;
    const nn::GPTConfig c{.vocab_size = 65, .block_size = 64, .layers = 2, .heads = 4, .embd = 64};
    manual_seed(3);
    nn::GPT cpu(c), gpu(c);
    gpu.load_state_dict(cpu.state_dict());
    gpu.to(kGpu);
    const optim::AdamWOptions adamw{.lr = 1e-3, .weight_decay = 0.05};
    optim::AdamW opt_cpu(optim::decay_groups(cpu, adamw.weight_decay), adamw);
    optim::AdamW opt_gpu(optim::decay_groups(gpu, adamw.weight_decay), adamw);
    const nn::NamedTensors pc = cpu.named_parameters(), pg = gpu.named_parameters();
    for (int step = 0; step < 3; ++step) {
        INFO("step " << step);
        for (size_t i = 0; i < pc.size(); ++i)  // each step from the GPU's weights
            pc[i].second.detach().copy_(pg[i].second.detach().to(Device::cpu()));
        Generator gen(100 + uint64_t(step));
        const Tensor x = randint(0, c.vocab_size, {4, 64}, {DType::i64}, &gen);
        const Tensor y = randint(0, c.vocab_size, {4, 64}, {DType::i64}, &gen);
        const Tensor loss_cpu = cross_entropy(cpu(x).reshape({-1, c.vocab_size}), y.reshape({-1}));
        loss_cpu.backward();
        const Tensor xg = x.to(kGpu), yg = y.to(kGpu);
        synchronize(kGpu);
        host_syncs();  // reset
        const Tensor loss_gpu = cross_entropy(gpu(xg).reshape({-1, c.vocab_size}), yg.reshape({-1}));
        loss_gpu.backward();
        std::vector<Tensor> grads;
        for (const auto& [n, p] : pg) grads.push_back(p.grad());
        opt_gpu.step();
        gpu.zero_grad();
        CHECK(host_syncs().empty());
        check_close_scaled(loss_gpu, loss_cpu, 1e-5);
        for (size_t i = 0; i < pc.size(); ++i) {
            INFO("gradient of " << pc[i].first);
            check_close_scaled(grads[i], pc[i].second.grad(), 2e-4);
            pc[i].second.set_grad(grads[i].to(Device::cpu()));
        }
        opt_cpu.step();
        opt_cpu.zero_grad();
        for (size_t i = 0; i < pc.size(); ++i) {
            INFO("updated " << pc[i].first);
            check_close_scaled(pg[i].second, pc[i].second.detach(), 1e-6);
        }
    }
}

TEST_CASE("cuda gpt: cached generation logits equal the CPU's", "[cuda][gpt]") {
    const NoTf32 no_tf32;
    const nn::GPTConfig c{.vocab_size = 40, .block_size = 32, .layers = 2, .heads = 2, .embd = 32};
    manual_seed(4);
    nn::GPT cpu(c), gpu(c);
    gpu.load_state_dict(cpu.state_dict());
    gpu.to(kGpu);
    cpu.eval();
    gpu.eval();
    NoGradGuard no_grad;
    Generator gen(9);
    const Tensor seq = randint(0, c.vocab_size, {1, 20}, {DType::i64}, &gen);
    const Tensor want = cpu(seq);
    nn::KVCache cache(c, 1, {DType::f32, kGpu});
    check_close_scaled(gpu.forward(seq.narrow(1, 0, 12).to(kGpu), cache), want.narrow(1, 0, 12).contiguous(), 1e-5);
    for (int64_t t = 12; t < 20; ++t)
        check_close_scaled(gpu.forward(seq.narrow(1, t, 1).to(kGpu), cache), want.narrow(1, t, 1).contiguous(), 1e-5);
}

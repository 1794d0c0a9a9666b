// A whole mlp training step on CUDA — forward, cross-entropy, backward, an SGD
// update — against the same step on the CPU, twice: with the linear layers as
// a broadcast multiply and a sum over the input dim, so that every op of the
// step runs on the hand-written kernels (elementwise, the reductions and the
// sum_to that broadcasting's backward makes, relu, cross-entropy forward and
// backward), and with `linear` on cuBLAS. Nothing in the step reads the device
// from the host (the host-sync counter stays at 0 until the loss is read).
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);

struct Params {
    std::vector<Tensor> t;  // w1 [H, I], b1 [H], w2 [C, H], b2 [C]
};

Params make_params(Device d) {
    const std::vector<Shape> shapes = {{32, 20}, {32}, {10, 32}, {10}};
    Params p;
    uint64_t seed = 40;
    for (const Shape& s : shapes) {
        Tensor t = mul(random_tensor(s, DType::f32, ++seed), 0.3).to(d);
        t.set_requires_grad();
        p.t.push_back(t);
    }
    return p;
}

// y[b, o] = Σ_i x[b, i]·w[o, i] + bias[o], without a matmul.
Tensor broadcast_linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
    return add(sum(mul(x.unsqueeze(1), w.unsqueeze(0)), {2}), bias);
}

using Linear = Tensor (*)(const Tensor&, const Tensor&, const Tensor&);

Tensor step(Params& p, const Tensor& x, const Tensor& target, double lr, Linear lin) {
    for (Tensor& t : p.t) t.set_grad(Tensor());
    const Tensor h = relu(lin(x, p.t[0], p.t[1]));
    const Tensor loss = cross_entropy(lin(h, p.t[2], p.t[3]), target);
    loss.backward();
    NoGradGuard no_grad;
    for (Tensor& t : p.t) sub_(t, mul(t.grad(), lr));
    return loss;
}

}  // namespace

TEST_CASE("cuda: an mlp training step equals the CPU's, with no host sync inside",
          "[cuda][train]") {
    const bool blas = GENERATE(false, true);
    INFO((blas ? "linear on cuBLAS" : "linear as a broadcast multiply and a sum"));
    const Linear lin = blas ? Linear([](const Tensor& x, const Tensor& w, const Tensor& b) {
        return linear(x, w, b);
    })
                            : broadcast_linear;
    Params cpu = make_params(Device::cpu()), gpu = make_params(kGpu);
    for (int s = 0; s < 3; ++s) {
        INFO("step " << s);
        const Tensor x = random_tensor({16, 20}, DType::f32, 100 + uint64_t(s));
        Generator gen(7 + uint64_t(s));
        const Tensor target = randint(0, 10, {16}, {DType::i64}, &gen);
        const Tensor want = step(cpu, x, target, 0.1, lin);
        host_syncs();  // reset
        const Tensor x_gpu = x.to(kGpu), t_gpu = target.to(kGpu);
        const Tensor got = step(gpu, x_gpu, t_gpu, 0.1, lin);
        CHECK(host_sync_total() == 0);
        check_close(got.to(Device::cpu()), want, 1e-5, 1e-6);
        for (size_t i = 0; i < cpu.t.size(); ++i) {
            INFO("parameter " << i);
            check_close(gpu.t[i].grad().to(Device::cpu()), cpu.t[i].grad(), 1e-4, 1e-6);
            check_close(gpu.t[i].to(Device::cpu()), cpu.t[i], 1e-5, 1e-6);
        }
    }
}

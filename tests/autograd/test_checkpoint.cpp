// checkpoint: gradients identical to the plain run (bit for bit), randomness
// replayed exactly in the recompute, and a lower peak of host memory.
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

struct Mlp {
    std::vector<Tensor> weights, biases;
    Mlp(int layers, int64_t width, uint64_t seed) {
        Generator g(seed);
        for (int i = 0; i < layers; ++i) {
            weights.push_back(mul(randn({width, width}, {}, &g), 1.0 / std::sqrt(double(width)))
                                  .set_requires_grad(true));
            biases.push_back(mul(randn({width}, {}, &g), 0.1).set_requires_grad(true));
        }
    }
    // One layer, with a dropout-like mask drawn from the default generator.
    Tensor layer(int i, const Tensor& x) const {
        Tensor keep = gt(rand(x.shape()), 0.2).to(x.dtype());
        return tanh(linear(x, weights[size_t(i)], biases[size_t(i)])) * keep * 1.25;
    }
    std::vector<Tensor> params() const {
        std::vector<Tensor> p = weights;
        p.insert(p.end(), biases.begin(), biases.end());
        return p;
    }
};

// Runs forward + backward; returns the input's and parameters' gradients and the peak
// host bytes held during the step.
std::pair<std::vector<Tensor>, size_t> step(const Mlp& m, const Tensor& input, bool ckpt,
                                            int per_segment) {
    for (const Tensor& p : m.params()) p.set_grad({});
    input.set_grad({});
    manual_seed(1234);
    reset_peak_memory_stats();
    const size_t before = memory_stats().allocated_bytes;
    Tensor h = input;
    const int n = int(m.weights.size());
    for (int i = 0; i < n; i += per_segment) {
        auto segment = [&m, i, per_segment](const std::vector<Tensor>& xs) {
            Tensor y = xs[0];
            for (int j = i; j < i + per_segment; ++j) y = m.layer(j, y);
            return y;
        };
        h = ckpt ? autograd::checkpoint(segment, {h}) : segment({h});
    }
    sum(h * h).backward();
    const size_t peak = memory_stats().peak_allocated_bytes - before;
    std::vector<Tensor> grads{input.grad()};
    for (const Tensor& p : m.params()) grads.push_back(p.grad());
    return {grads, peak};
}

}  // namespace

TEST_CASE("checkpoint: same gradients bit for bit, replayed masks, less memory",
          "[autograd][checkpoint]") {
    const Mlp m(8, 128, 7);
    Tensor input = random_tensor({1024, 128}, DType::f32, 3).set_requires_grad(true);
    auto [plain, plain_peak] = step(m, input, false, 2);
    auto [ckpt, ckpt_peak] = step(m, input, true, 2);
    REQUIRE(plain.size() == ckpt.size());
    for (size_t i = 0; i < plain.size(); ++i) {
        INFO("gradient " << i);
        REQUIRE(ckpt[i].defined());
        REQUIRE(values(ckpt[i]) == values(plain[i]));  // bit for bit
    }
    INFO("peak host bytes: plain " << plain_peak << ", checkpointed " << ckpt_peak);
    // 8 layers in 4 segments: only segment inputs stay alive through the forward.
    REQUIRE(double(ckpt_peak) < 0.6 * double(plain_peak));
}

TEST_CASE("checkpoint: without the RNG replay the masks would differ", "[autograd][checkpoint]") {
    // The replay matters: a segment that draws randomness gives different values
    // when run twice from different generator states.
    Tensor x = ones({1000});
    manual_seed(5);
    Tensor a = gt(rand(x.shape()), 0.5);
    Tensor b = gt(rand(x.shape()), 0.5);
    REQUIRE(values(a) != values(b));
}

TEST_CASE("checkpoint: parameters inside the segment get gradients when the input needs none",
          "[autograd][checkpoint]") {
    Tensor w = random_tensor({4, 3}, DType::f64, 11).set_requires_grad(true);
    Tensor x = random_tensor({2, 3}, DType::f64, 12);  // data: no grad
    auto seg = [&w](const std::vector<Tensor>& xs) { return linear(xs[0], w); };
    sum(autograd::checkpoint(seg, {x})).backward();
    Tensor expected = sum(x, {0}, true).expand({4, 3});  // d Σ(x·wᵀ) / dw = Σ_rows x
    check_close(w.grad(), expected, 1e-12, 1e-12);
}

TEST_CASE("checkpoint: off when grad mode is off", "[autograd][checkpoint]") {
    Tensor x = random_tensor({3}, DType::f64, 1).set_requires_grad(true);
    NoGradGuard g;
    Tensor y = autograd::checkpoint([](const std::vector<Tensor>& xs) { return xs[0] * 2.0; }, {x});
    REQUIRE_FALSE(y.requires_grad());
}

TEST_CASE("checkpoint: a segment that returns its input leaves the input a leaf",
          "[autograd][checkpoint]") {
    Tensor x = random_tensor({3}, DType::f64, 2).set_requires_grad(true);
    Tensor y = autograd::checkpoint([](const std::vector<Tensor>& xs) { return xs[0].contiguous(); },
                                    {x});
    REQUIRE(x.is_leaf());
    sum(y * 2.0).backward();
    REQUIRE(values(x.grad()) == std::vector<double>{2, 2, 2});
}

TEST_CASE("checkpoint: batch norm's running statistics are updated once, as without it",
          "[autograd][checkpoint]") {
    auto run = [](bool ckpt) {
        manual_seed(5);
        nn::BasicBlock block(3, 4, 1);
        const Tensor x = random_tensor({6, 3, 5, 5}, DType::f32, 11).set_requires_grad(true);
        auto fwd = [&block](const std::vector<Tensor>& xs) { return block.forward(xs[0]); };
        const Tensor y = ckpt ? autograd::checkpoint(fwd, {x}) : fwd({x});
        sum(mul(y, y)).backward();
        std::vector<std::vector<double>> out;
        for (const auto& [name, t] : block.named_buffers()) out.push_back(values(t));
        for (const Tensor& p : block.parameters()) out.push_back(values(p.grad()));
        return out;
    };
    const auto plain = run(false), ckpt = run(true);
    REQUIRE(plain.size() == ckpt.size());
    for (size_t i = 0; i < plain.size(); ++i) CHECK(plain[i] == ckpt[i]);
    CHECK_FALSE(autograd::is_recomputing());
}

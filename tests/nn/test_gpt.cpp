// The GPT: parameter count and names, GPT-2's initialization, causality, the
// whole model's gradients against finite differences, the KV cache (cached
// logits equal uncached ones; a cached step costs O(T) FLOPs, counted by the
// profiler), its config JSON, and errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/profile.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

nn::GPTConfig small(int64_t vocab = 11) {
    return {.vocab_size = vocab, .block_size = 16, .layers = 2, .heads = 2, .embd = 8};
}

Tensor tokens(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
    Generator g(seed);
    return randint(0, vocab, {b, t}, {DType::i64}, &g);
}

double std_of(const Tensor& t) {
    const std::vector<double> v = values(t);
    double m = 0, s = 0;
    for (double x : v) m += x;
    m /= double(v.size());
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size()));
}

// Total FLOPs the fronts counted while `fn` ran.
template <class F>
double flops_of(F&& fn) {
    kernels::Profiler prof;
    fn();
    double total = 0;
    for (const kernels::OpTime& r : prof.rows()) total += r.flops;
    return total;
}

}  // namespace

TEST_CASE("GPT: parameters, names and GPT-2's initialization", "[nn][gpt]") {
    manual_seed(0);
    const nn::GPTConfig c{.vocab_size = 65, .block_size = 32, .layers = 3, .heads = 4, .embd = 64};
    nn::GPT m(c);
    const int64_t C = c.embd;
    // Per block 12·C² + 13·C; the head is tied to wte.
    CHECK(nn::parameter_count(m) == c.layers * (12 * C * C + 13 * C) + c.vocab_size * C +
                                        c.block_size * C + 2 * C);
    const nn::NamedTensors p = m.named_parameters();
    std::vector<std::string> names;
    for (const auto& [n, t] : p) names.push_back(n);
    CHECK(names.front() == "wte.weight");
    CHECK(names[1] == "wpe.weight");
    CHECK(names[2] == "blocks.0.ln1.weight");
    CHECK(std::find(names.begin(), names.end(), "blocks.2.attn.qkv.weight") != names.end());
    CHECK(names.back() == "ln_f.bias");
    // N(0, 0.02), the residual projections 0.02/sqrt(2·layers), biases 0.
    CHECK(std::abs(std_of(m.wte->weight) - 0.02) < 0.002);
    CHECK(std::abs(std_of(m.block(0).fc->weight) - 0.02) < 0.002);
    const double residual = 0.02 / std::sqrt(6.0);
    CHECK(std::abs(std_of(m.block(1).proj->weight) - residual) < 0.1 * residual);
    CHECK(std::abs(std_of(m.block(2).attn->proj->weight) - residual) < 0.1 * residual);
    CHECK(values(m.block(0).attn->qkv->bias) == std::vector<double>(size_t(3 * C), 0.0));
    CHECK(values(m.block(0).ln1->weight) == std::vector<double>(size_t(C), 1.0));
}

TEST_CASE("GPT: logits at a position do not depend on later tokens", "[nn][gpt]") {
    manual_seed(1);
    nn::GPT m(small());
    m.eval();
    NoGradGuard no_grad;
    Tensor x = tokens(2, 12, 11, 3);
    const Tensor a = m(x);
    CHECK(a.shape() == Shape({2, 12, 11}));
    Tensor y = x.clone();
    y.data<int64_t>()[7] = (y.data<int64_t>()[7] + 1) % 11;  // batch 0, position 7
    const Tensor b = m(y);
    const std::vector<double> va = values(a), vb = values(b);
    for (int64_t t = 0; t < 12; ++t)
        for (int64_t v = 0; v < 11; ++v) {
            const size_t i = size_t(t * 11 + v);
            if (t < 7) REQUIRE(va[i] == vb[i]);  // before the change: identical bits
        }
    bool changed = false;
    for (size_t i = 7 * 11; i < 12 * 11; ++i) changed |= va[i] != vb[i];
    CHECK(changed);
    // Batch 1 is untouched.
    for (size_t i = 12 * 11; i < va.size(); ++i) REQUIRE(va[i] == vb[i]);
}

TEST_CASE("GPT: the whole model's gradients against finite differences", "[nn][gpt]") {
    manual_seed(2);
    nn::GPT m({.vocab_size = 7, .block_size = 6, .layers = 2, .heads = 2, .embd = 4});
    m.to(DType::f64);
    const Tensor x = tokens(2, 6, 7, 5), y = tokens(2, 6, 7, 6);
    auto loss = [&] { return cross_entropy(m(x).reshape({-1, 7}), y.reshape({-1})); };
    loss().backward();
    // Several entries of every kind of parameter (the tied wte gets the head's gradient too).
    NoGradGuard no_grad;
    int checked = 0;
    for (const auto& [name, p] : m.named_parameters()) {
        const std::vector<double> grad = values(p.grad());
        for (int64_t i : {int64_t(0), p.numel() / 2, p.numel() - 1}) {
            double* v = p.data<double>() + i;
            const double keep = *v, eps = 1e-6;
            *v = keep + eps;
            const double up = loss().item();
            *v = keep - eps;
            const double down = loss().item();
            *v = keep;
            const double numeric = (up - down) / (2 * eps);
            INFO(name << "[" << i << "]: autograd " << grad[size_t(i)] << ", numeric " << numeric);
            REQUIRE(std::abs(grad[size_t(i)] - numeric) <= 1e-7 + 1e-5 * std::abs(numeric));
            ++checked;
        }
    }
    CHECK(checked == 3 * int(m.named_parameters().size()));
}

TEST_CASE("GPT: cached logits equal uncached ones; a cached step costs O(T)", "[nn][gpt]") {
    manual_seed(3);
    const nn::GPTConfig c{.vocab_size = 13, .block_size = 64, .layers = 2, .heads = 4, .embd = 32};
    nn::GPT m(c);
    m.eval();
    NoGradGuard no_grad;
    const Tensor seq = tokens(2, 40, 13, 8);
    const Tensor full_logits = m(seq);  // [2, 40, 13]
    nn::KVCache cache(c, 2, {DType::f32});
    const Tensor prompt_logits = m.forward(seq.narrow(1, 0, 30), cache);  // the prompt at once
    CHECK(cache.length() == 30);
    check_close(prompt_logits, full_logits.narrow(1, 0, 30).contiguous(), 1e-5, 1e-5);
    for (int64_t t = 30; t < 40; ++t) {  // then one token at a time
        const Tensor step = m.forward(seq.narrow(1, t, 1), cache);
        check_close(step, full_logits.narrow(1, t, 1).contiguous(), 1e-5, 1e-5);
    }
    CHECK(cache.length() == 40);
    // A step at position 39 against the whole 40-token forward: the products
    // of one token, plus attention over 40 keys.
    nn::KVCache c2(c, 1, {DType::f32});
    m.forward(seq.narrow(0, 0, 1).narrow(1, 0, 39), c2);
    const double step = flops_of([&] { m.forward(seq.narrow(0, 0, 1).narrow(1, 39, 1), c2); });
    const double whole = flops_of([&] { m(seq.narrow(0, 0, 1)); });
    INFO("cached step " << step << " FLOPs, whole forward " << whole);
    CHECK(step > 0);
    CHECK(step * 20 < whole);
    // Per step, the cost grows with the position only through attention: linearly.
    nn::KVCache c3(c, 1, {DType::f32});
    m.forward(seq.narrow(0, 0, 1).narrow(1, 0, 9), c3);
    const double early = flops_of([&] { m.forward(seq.narrow(0, 0, 1).narrow(1, 9, 1), c3); });
    const double attention_per_key = 2.0 * 2 * c.layers * c.embd;  // q·k and p·v, every head
    CHECK(step - early == Approx(attention_per_key * (40 - 10)).epsilon(1e-9));
}

TEST_CASE("GPT: config JSON round trip; bad sizes and inputs are errors", "[nn][gpt]") {
    const nn::GPTConfig c{.vocab_size = 113, .block_size = 128, .layers = 4, .heads = 4,
                          .embd = 128, .dropout = 0.1};
    const nn::GPTConfig back = nn::GPTConfig::from_json(c.to_json());
    CHECK(back.vocab_size == 113);
    CHECK(back.embd == 128);
    CHECK(back.dropout == 0.1);
    REQUIRE_THROWS_WITH_MSG(nn::GPTConfig::from_json("{\"vocab_size\": 5}"), "'block_size' is missing");
    REQUIRE_THROWS_WITH_MSG(nn::GPT({.vocab_size = 5, .heads = 3, .embd = 8}),
                            "GPT: embd 8 must be a positive multiple of heads (3)");
    REQUIRE_THROWS_WITH_MSG(nn::GPT({.vocab_size = 0}), "vocab_size 0");
    manual_seed(4);
    nn::GPT m(small());
    REQUIRE_THROWS_WITH_MSG(m(tokens(1, 17, 11, 1)), "GPT: 17 positions exceed block_size 16");
    REQUIRE_THROWS_WITH_MSG(m(randn({2, 3})), "embedding");
    REQUIRE_THROWS_WITH_MSG(m(tokens(1, 4, 11, 1).view({4})), "expected tokens [B, T]");
    nn::KVCache cache(small(), 1, {DType::f32});
    NoGradGuard no_grad;
    m.forward(tokens(1, 3, 11, 1), cache);
    REQUIRE_THROWS_WITH_MSG(m.forward(tokens(1, 2, 11, 1), cache), "one token at a time");
}

// The differentiable attention ops: gradcheck of scaled_dot_product_attention
// (4-d and 3-d, causal and not, Tq != Tk, dropout with a fixed generator) and
// of self_attention; self_attention equal to splitting its packed input and
// calling scaled_dot_product_attention; autocast; errors.
#include <cstring>

#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
    const Tensor x = a.contiguous(), y = b.contiguous();
    return x.shape() == y.shape() && x.dtype() == y.dtype() &&
           std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel() * x.element_size())) == 0;
}

}  // namespace

TEST_CASE("grad: scaled_dot_product_attention", "[grad][attention]") {
    struct Case {
        const char* what;
        Shape q, k, v;
        bool causal;
    };
    const Case cases[] = {
        {"causal", {2, 2, 5, 4}, {2, 2, 5, 4}, {2, 2, 5, 3}, true},
        {"not causal, Tq != Tk", {1, 2, 3, 4}, {1, 2, 6, 4}, {1, 2, 6, 5}, false},
        {"causal, Tq > Tk", {1, 1, 6, 3}, {1, 1, 4, 3}, {1, 1, 4, 3}, true},
        {"3-d [N, T, D]", {2, 4, 3}, {2, 5, 3}, {2, 5, 2}, false},
    };
    uint64_t seed = 1;
    for (const Case& c : cases) {
        INFO(c.what);
        const Tensor q = leaf(c.q, seed++), kk = leaf(c.k, seed++), v = leaf(c.v, seed++);
        check_grad(
            [&](const std::vector<Tensor>& in) {
                return scaled_dot_product_attention(in[0], in[1], in[2], {.causal = c.causal});
            },
            {q, kk, v});
    }
    // A scale of one's own, and dropout with a mask that is the same at every call.
    const Tensor q = leaf({1, 2, 4, 3}, 50), kk = leaf({1, 2, 4, 3}, 51), v = leaf({1, 2, 4, 3}, 52);
    check_grad(
        [&](const std::vector<Tensor>& in) {
            Generator g(9);
            return scaled_dot_product_attention(in[0], in[1], in[2],
                                                {.causal = true, .scale = 0.7, .dropout_p = 0.4,
                                                 .generator = &g});
        },
        {q, kk, v});
}

TEST_CASE("grad: self_attention of a packed projection", "[grad][attention]") {
    const Tensor qkv = leaf({2, 5, 12}, 7);  // C = 4: 2 heads of 2
    check_grad([](const std::vector<Tensor>& in) { return self_attention(in[0], 2, {.causal = true}); },
               {qkv});
}

TEST_CASE("self_attention equals splitting the heads and scaled_dot_product_attention",
          "[attention]") {
    const int64_t B = 2, T = 67, H = 4, D = 16, C = H * D;
    for (DType dt : {DType::f32, DType::f64}) {
        Tensor a = random_tensor({B, T, 3 * C}, dt, 3);
        a.set_requires_grad(true);
        Tensor b = a.detach().clone();
        b.set_requires_grad(true);
        const Tensor go = random_tensor({B, T, C}, dt, 4);
        const Tensor ya = self_attention(a, H, {.causal = true});
        // The same by hand: [B, T, 3, H, D] → q, k, v [B, H, T, D].
        const Tensor p = b.view({B, T, 3, H, D});
        auto part = [&](int64_t i) { return p.select(2, i).permute({0, 2, 1, 3}); };
        const Tensor yb = scaled_dot_product_attention(part(0), part(1), part(2), {.causal = true})
                              .transpose(1, 2)
                              .reshape({B, T, C});
        CHECK(ya.shape() == Shape({B, T, C}));
        CHECK(same_bytes(ya, yb));
        sum(mul(ya, go)).backward();
        sum(mul(yb, go)).backward();
        CHECK(same_bytes(a.grad(), b.grad()));
    }
}

TEST_CASE("attention under autocast: low-precision inputs, f32 gradients of f32 leaves",
          "[attention][amp]") {
    Tensor q = random_tensor({1, 2, 9, 8}, DType::f32, 1), kk = random_tensor({1, 2, 9, 8}, DType::f32, 2),
           v = random_tensor({1, 2, 9, 8}, DType::f32, 3);
    for (Tensor* t : {&q, &kk, &v}) t->set_requires_grad(true);
    Tensor y;
    {
        amp::autocast ac(DType::bf16);
        y = scaled_dot_product_attention(q, kk, v, {.causal = true});
    }
    CHECK(y.dtype() == DType::bf16);
    const Tensor ref = scaled_dot_product_attention(q.detach(), kk.detach(), v.detach(), {.causal = true});
    check_close(y.to(DType::f32), ref, 3e-2, 3e-2);
    sum(y.to(DType::f32)).backward();
    CHECK(q.grad().dtype() == DType::f32);
    CHECK(v.grad().dtype() == DType::f32);
}

TEST_CASE("attention ops: bad arguments are errors", "[attention]") {
    const Tensor x = randn({2, 3, 4});
    REQUIRE_THROWS_WITH_MSG(scaled_dot_product_attention(randn({4, 3}), randn({4, 3}), randn({4, 3})),
                            "scaled_dot_product_attention: expected q, k, v of 4 dims");
    REQUIRE_THROWS_WITH_MSG(self_attention(randn({2, 3, 10}), 2),
                            "self_attention: expected qkv [B, T, 3·C] with C a multiple of 2 heads");
    REQUIRE_THROWS_WITH_MSG(scaled_dot_product_attention(x, x, x, {.dropout_p = 1.5}),
                            "dropout_p must be in [0, 1)");
}

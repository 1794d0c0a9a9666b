// Differentiable attention over kernels/attention.h. The forward saves its
// output and each row's log-sum-exp (not the probabilities); the backward
// draws the same dropout mask again from the reserved Philox blocks.
#include "autograd/ops/attention.h"

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/graph.h"
#include "kernels/attention.h"
#include "kernels/copy.h"

namespace ember {
using autograd::TensorList;

namespace {

// The kernel arguments of `options` for a head dim d over [B, H, Tq, Tk],
// reserving the dropout's Philox blocks.
kernels::AttentionArgs kernel_args(const AttentionOptions& o, int64_t d, int64_t b, int64_t h,
                                   int64_t tq, int64_t tk) {
    kernels::AttentionArgs a;
    a.causal = o.causal;
    a.scale = o.scale.value_or(1.0 / std::sqrt(double(d)));
    a.dropout_p = o.dropout_p;
    EMBER_CHECK(std::isfinite(a.scale), "scaled_dot_product_attention: scale must be finite, got ",
                a.scale);
    if (o.dropout_p > 0 && o.dropout_p < 1) {
        Generator& g = o.generator ? *o.generator : default_generator();
        const GeneratorState at = g.reserve(kernels::attention_dropout_blocks(b, h, tq, tk));
        a.seed = at.seed;
        a.first_block = at.offset;
    }
    return a;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q0, const Tensor& k0, const Tensor& v0,
                                    const AttentionOptions& options) {
    const char* op = "scaled_dot_product_attention";
    EMBER_CHECK(q0.defined() && k0.defined() && v0.defined(), op, ": undefined tensor");
    EMBER_CHECK((q0.dim() == 3 || q0.dim() == 4) && k0.dim() == q0.dim() && v0.dim() == q0.dim(),
                op, ": expected q, k, v of 4 dims [B, H, T, D] (or 3: [N, T, D]), got ",
                shape_str(q0.shape()), ", ", shape_str(k0.shape()), ", ", shape_str(v0.shape()));
    Tensor q = amp::cast_input(op, q0), kk = amp::cast_input(op, k0), v = amp::cast_input(op, v0);
    const bool three = q.dim() == 3;
    const Tensor q4 = three ? views::unsqueeze(q, 1) : q, k4 = three ? views::unsqueeze(kk, 1) : kk,
                 v4 = three ? views::unsqueeze(v, 1) : v;
    const kernels::AttentionArgs args =
        kernel_args(options, q4.size(3), q4.size(0), q4.size(1), q4.size(2), k4.size(2));
    kernels::AttentionForward f = kernels::attention_forward(q4, k4, v4, args);
    Tensor out = three ? views::squeeze(f.out, 1) : f.out;
    if (auto node = autograd::make_node(op, {q, kk, v})) {
        node->backward = [q = node->save(q4), kk = node->save(k4), v = node->save(v4),
                          o = node->save(f.out), lse = node->save(f.lse), args,
                          three](const TensorList& g) {
            const Tensor g4 = three ? views::unsqueeze(g[0], 1) : g[0];
            kernels::AttentionGrads d = kernels::attention_backward(g4, q, kk, v, o, lse, args);
            if (three) return TensorList{views::squeeze(d.q, 1), views::squeeze(d.k, 1),
                                         views::squeeze(d.v, 1)};
            return TensorList{d.q, d.k, d.v};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor self_attention(const Tensor& qkv0, int64_t heads, const AttentionOptions& options) {
    const char* op = "self_attention";
    EMBER_CHECK(qkv0.defined(), op, ": undefined tensor");
    EMBER_CHECK(heads >= 1 && qkv0.dim() == 3 && qkv0.size(2) % (3 * heads) == 0 &&
                    qkv0.size(2) > 0,
                op, ": expected qkv [B, T, 3·C] with C a multiple of ", heads, " heads, got ",
                shape_str(qkv0.shape()));
    const Tensor qkv = amp::cast_input(op, qkv0);
    const int64_t b = qkv.size(0), t = qkv.size(1), c = qkv.size(2) / 3, d = c / heads;
    // [B, T, 3, H, D] seen as q, k, v [B, H, T, D] (views: no copy).
    const Tensor packed = kernels::reshape(qkv, {b, t, 3, heads, d});
    auto part = [&](const Tensor& p, int64_t i) {
        return views::permute(views::select(p, 2, i), {0, 2, 1, 3});
    };
    const Tensor q = part(packed, 0), kk = part(packed, 1), v = part(packed, 2);
    const kernels::AttentionArgs args = kernel_args(options, d, b, heads, t, t);
    kernels::AttentionForward f = kernels::attention_forward(q, kk, v, args);
    // [B, H, T, D] → [B, T, H, D] → [B, T, C]: a view where the output is
    // [B, T, H, D] memory (the CPU), a copy otherwise.
    Tensor out = kernels::reshape(views::transpose(f.out, 1, 2), {b, t, c});
    if (auto node = autograd::make_node(op, {qkv})) {
        node->backward = [q = node->save(q), kk = node->save(kk), v = node->save(v),
                          o = node->save(f.out), lse = node->save(f.lse), args, b, t, c, d, heads,
                          shape = qkv.shape(),
                          options = TensorOptions{qkv.dtype(), qkv.device()}](const TensorList& g) {
            const Tensor g4 =
                views::transpose(kernels::reshape(g[0], {b, t, heads, d}), 1, 2);  // [B, H, T, D]
            Tensor dqkv = empty(shape, options);
            const Tensor dp = views::view(dqkv, {b, t, 3, heads, d});
            auto dpart = [&](int64_t i) {
                return views::permute(views::select(dp, 2, i), {0, 2, 1, 3});
            };
            const kernels::AttentionGrads into{dpart(0), dpart(1), dpart(2)};
            kernels::attention_backward(g4, q, kk, v, o, lse, args, &into);
            return TensorList{dqkv};
        };
        autograd::set_history(node, out);
    }
    return out;
}

}  // namespace ember

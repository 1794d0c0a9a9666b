// Attention composed of other kernels: the scores and probabilities
// [B, H, Tq, Tk] are materialized (memory grows with Tq·Tk). The CUDA path
// until a fused CUDA kernel exists, and on the CPU the fused kernel's peer
// (tests/kernels/test_attention.cpp, bench/attention.cpp). The same math as
// kernels/cpu/attention.cpp: P = exp(S − lse) with S = scale·q kᵀ masked,
// dropout by dropout_forward's rule on P's [B, H, Tq, Tk] elements.
#include <limits>

#include "kernels/attention.h"
#include "kernels/copy.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/front.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"

namespace ember::kernels {

namespace {

Tensor mT(const Tensor& t) { return views::transpose(t, -1, -2); }

// The scaled, masked scores in the accumulation dtype (f32; f64 for f64).
Tensor scores(const Tensor& q, const Tensor& k, const AttentionArgs& args) {
    const DType acc = q.dtype() == DType::f64 ? DType::f64 : DType::f32;
    Tensor s = mul(cast(matmul(q, mT(k)), acc), args.scale);
    if (args.causal) {  // row i keeps keys j <= i
        const int64_t tq = q.size(2), tk = k.size(2);
        const TensorOptions on{DType::i64, q.device()};
        const Tensor rows = views::view(arange(double(tq), on), {tq, 1});
        const Tensor cols = views::view(arange(double(tk), on), {1, tk});
        s = where(ge(rows, cols), s,
                  full({}, -std::numeric_limits<double>::infinity(), {acc, q.device()}));
    }
    return s;
}

}  // namespace

AttentionForward attention_forward_composite(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionArgs& args) {
    const Tensor s = scores(q, k, args);
    const Tensor m = amax(s, {3}, true);
    const Tensor lse = add(m, log(sum(exp(sub(s, m)), {3}, true)));  // [B, H, Tq, 1]
    Tensor p = exp(sub(s, lse));
    if (args.dropout_p > 0)
        p = dropout_forward(p, args.dropout_p, args.seed, args.first_block).output;
    AttentionForward r;
    r.out = matmul(cast(p, q.dtype()), v);
    r.lse = reshape(lse, {q.size(0), q.size(1), q.size(2)});
    return r;
}

AttentionGrads attention_backward_composite(const Tensor& grad_out, const Tensor& q,
                                            const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& lse, const AttentionArgs& args) {
    const DType acc = lse.dtype();
    const Tensor p = exp(sub(scores(q, k, args), views::unsqueeze(lse, 3)));
    Tensor kept = p, mask;
    if (args.dropout_p > 0) {
        DropoutForward d = dropout_forward(p, args.dropout_p, args.seed, args.first_block);
        kept = d.output;
        mask = d.mask;
    }
    AttentionGrads r;
    r.v = matmul(mT(cast(kept, q.dtype())), grad_out);
    Tensor dp = cast(matmul(grad_out, mT(v)), acc);
    if (args.dropout_p > 0) dp = dropout_backward(dp, mask, args.dropout_p);
    const Tensor d = sum(mul(cast(grad_out, acc), cast(out, acc)), {3}, true);  // [B, H, Tq, 1]
    const Tensor ds = cast(mul(mul(p, sub(dp, d)), args.scale), q.dtype());
    r.q = matmul(ds, k);
    r.k = matmul(mT(ds), q);
    return r;
}

}  // namespace ember::kernels

// Front for attention: checks (ranks, shapes, dtypes, devices, the dropout
// probability), the outputs, and one call through the dispatch — the fused
// kernels on the CPU (kernels/cpu/attention.cpp) and on CUDA
// (kernels/cuda/attention.h), and on CUDA the composite path
// (kernels/attention_composite.cpp) for what no fused kernel takes.
#include "kernels/attention.h"

#include "kernels/copy.h"
#include "kernels/cpu/attention.h"
#include "kernels/cuda/attention.h"
#include "kernels/dropout.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// The checks both paths share; names the op and the offending tensors.
void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
               const AttentionArgs& args) {
    EMBER_CHECK(q.defined() && k.defined() && v.defined(), op, ": undefined tensor");
    check_same_device({&q, &k, &v}, op);
    check_floating(q, op);
    EMBER_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op,
                ": q, k and v must have one dtype, got ", describe(q), ", ", describe(k), ", ",
                describe(v));
    EMBER_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
                ": expected [B, H, T, D] tensors, got q ", shape_str(q.shape()), ", k ",
                shape_str(k.shape()), ", v ", shape_str(v.shape()));
    EMBER_CHECK(k.size(0) == q.size(0) && v.size(0) == q.size(0) && k.size(1) == q.size(1) &&
                    v.size(1) == q.size(1) && k.size(3) == q.size(3) && v.size(2) == k.size(2),
                op, ": q ", shape_str(q.shape()), ", k ", shape_str(k.shape()), " and v ",
                shape_str(v.shape()),
                " do not fit: q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]");
    EMBER_CHECK(q.size(2) >= 1 && k.size(2) >= 1 && q.size(3) >= 1 && v.size(3) >= 1, op,
                ": empty sequence or head dim (q ", shape_str(q.shape()), ", v ",
                shape_str(v.shape()), ")");
    // Written so that NaN fails too.
    EMBER_CHECK(args.dropout_p >= 0 && args.dropout_p < 1, op, ": dropout_p must be in [0, 1), got ",
                args.dropout_p);
}

// A 4-d operand whose rows the kernel can read: its last dim unit-stride.
Tensor rows_of(const Tensor& t) {
    return t.size(3) == 1 || t.stride(3) == 1 ? t : contiguous(t);
}

DType lse_dtype(DType d) { return d == DType::f64 ? DType::f64 : DType::f32; }

// FLOPs of the two products over the (row, key) pairs the mask keeps.
double attention_flops(const Tensor& q, const Tensor& v, bool causal) {
    const int64_t tq = q.size(2), tk = v.size(2);
    double pairs = double(tq) * double(tk);
    if (causal) {  // row i sees min(Tk, i + 1) keys
        const int64_t full = std::max<int64_t>(0, tq - tk);  // rows that see all Tk
        const int64_t ramp = tq - full;                     // rows 0..ramp-1 see i + 1
        pairs = double(ramp) * double(ramp + 1) / 2 + double(full) * double(tk);
    }
    return 2.0 * double(q.size(0) * q.size(1)) * pairs * double(q.size(3) + v.size(3));
}

}  // namespace

uint64_t attention_dropout_blocks(int64_t b, int64_t h, int64_t tq, int64_t tk) {
    return dropout_blocks(b * h * tq * tk);
}

AttentionForward attention_forward(const Tensor& q0, const Tensor& k0, const Tensor& v0,
                                   const AttentionArgs& args) {
    const char* op = "attention_forward";
    check_qkv(op, q0, k0, v0, args);
    const Tensor q = rows_of(q0), k = rows_of(k0), v = rows_of(v0);
    const int64_t b = q.size(0), h = q.size(1), tq = q.size(2), dv = v.size(3);
    AttentionForward r;
    // [B, Tq, H, Dv] memory seen as [B, H, Tq, Dv]: heads side by side per row.
    const auto outputs = [&] {
        r.out = views::permute(empty({b, tq, h, dv}, like(q)), {0, 2, 1, 3});
        r.lse = empty({b, h, tq}, like(q, lse_dtype(q.dtype())));
    };
    dispatch({op, q.device(), {&q, &k, &v}, attention_flops(q, v, args.causal)},
             [&] {
                 outputs();
                 cpu::attention_forward(view_of(r.out, op), view_of(r.lse, op), view_of(q, op),
                                        view_of(k, op), view_of(v, op), args);
             },
             [&](auto stream) {
                 outputs();
                 if (!cuda::attention_forward(view_of(r.out, op), view_of(r.lse, op),
                                              view_of(q, op), view_of(k, op), view_of(v, op), args,
                                              stream))
                     r = attention_forward_composite(q, k, v, args);
             });
    return r;
}

AttentionGrads attention_backward(const Tensor& grad_out0, const Tensor& q0, const Tensor& k0,
                                  const Tensor& v0, const Tensor& out0, const Tensor& lse,
                                  const AttentionArgs& args, const AttentionGrads* into) {
    const char* op = "attention_backward";
    check_qkv(op, q0, k0, v0, args);
    EMBER_CHECK(grad_out0.defined() && out0.defined() && lse.defined(), op, ": undefined tensor");
    check_same_device({&q0, &grad_out0, &out0, &lse}, op);
    const Shape out_shape = {q0.size(0), q0.size(1), q0.size(2), v0.size(3)};
    EMBER_CHECK(grad_out0.shape() == out_shape && out0.shape() == out_shape &&
                    grad_out0.dtype() == q0.dtype() && out0.dtype() == q0.dtype(),
                op, ": grad_out ", describe(grad_out0), " and out ", describe(out0),
                " must be ", dtype_name(q0.dtype()), " ", shape_str(out_shape));
    EMBER_CHECK(lse.shape() == Shape({q0.size(0), q0.size(1), q0.size(2)}) &&
                    lse.dtype() == lse_dtype(q0.dtype()) && lse.is_contiguous(),
                op, ": lse ", describe(lse), " is not the forward's");
    if (into) {
        const auto fits = [&](const Tensor& d, const Tensor& like_t) {
            return d.defined() && d.shape() == like_t.shape() && d.dtype() == q0.dtype() &&
                   d.device() == q0.device() && (d.size(3) == 1 || d.stride(3) == 1);
        };
        EMBER_CHECK(fits(into->q, q0) && fits(into->k, k0) && fits(into->v, v0), op,
                    ": the gradients' destinations must have the shapes and dtype of q, k and v "
                    "and unit-stride rows, got ", describe(into->q), ", ", describe(into->k), ", ",
                    describe(into->v));
    }
    const Tensor q = rows_of(q0), k = rows_of(k0), v = rows_of(v0), g = rows_of(grad_out0),
                 out = rows_of(out0);
    AttentionGrads r;
    if (into) r = *into;
    const auto outputs = [&] {
        if (into) return;
        r.q = empty(q.shape(), like(q));
        r.k = empty(k.shape(), like(k));
        r.v = empty(v.shape(), like(v));
    };
    dispatch({op, q.device(), {&g, &q, &k, &v, &out, &lse}, 2.5 * attention_flops(q, v, args.causal)},
             [&] {
                 outputs();
                 cpu::attention_backward(view_of(r.q, op), view_of(r.k, op), view_of(r.v, op),
                                         view_of(g, op), view_of(q, op), view_of(k, op),
                                         view_of(v, op), view_of(out, op), view_of(lse, op), args);
             },
             [&](auto stream) {
                 outputs();
                 if (cuda::attention_backward(view_of(r.q, op), view_of(r.k, op),
                                              view_of(r.v, op), view_of(g, op), view_of(q, op),
                                              view_of(k, op), view_of(v, op), view_of(out, op),
                                              view_of(lse, op), args, stream))
                     return;
                 AttentionGrads c = attention_backward_composite(g, q, k, v, out, lse, args);
                 if (!into) {
                     r = std::move(c);
                     return;
                 }
                 copy(r.q, c.q);
                 copy(r.k, c.k);
                 copy(r.v, c.v);
             });
    return r;
}

}  // namespace ember::kernels

// Front for the matrix products: argument checks (shapes, dtypes and devices
// in the message), torch.matmul's promotion of 1-d operands and broadcasting
// of batch dims, output allocation, then one call through the dispatch. Every
// product funnels into `broadcast_gemm`, which funnels into one backend call.
#include "kernels/matmul.h"

#include <algorithm>

#include "kernels/copy.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/policy.h"
#include "kernels/cuda/linear.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/policy.h"
#include "kernels/elementwise.h"
#include "kernels/front.h"
#include "kernels/reduce.h"

namespace ember::kernels {

namespace {

// All operands defined, on one device, of one dtype the products support.
void check_operands(std::initializer_list<const Tensor*> ts, const char* op) {
    check_same_device(ts, op);
    const Tensor& first = **ts.begin();
    for (const Tensor* t : ts)
        EMBER_CHECK(t->dtype() == first.dtype(), op, ": expected operands of one dtype, got ",
                    describe(first), " and ", describe(*t));
    const DType t = first.dtype();
    EMBER_CHECK(is_floating(t) || t == DType::i32 || t == DType::i64, op, ": dtype ", dtype_name(t),
                " is not supported (f32, f64, f16, bf16, i32, i64), got ", describe(first));
    const bool takes = backend_choice(
        op, first.device(), [&] { return cpu::matmul_takes(t); },
        [&](auto) { return cuda::matmul_takes(t); });
    EMBER_CHECK(takes, op, ": integer dtypes are not ",
                "supported on cuda (cuBLAS multiplies f32, f64, f16 and bf16), got ",
                describe(first), "; cast to a floating dtype or multiply on the CPU");
}

Shape batch_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// t ready for the GEMM, in dtype `ct`: read in place where the backend
// reads it (kernels/*/policy.h: one of its matrix strides is 1, a transposed
// view included; on CUDA also a leading dim that describes it to cuBLAS, not
// broadcast or overlapping rows: Note [Row-major products on column-major
// cuBLAS]); else a copy.
Tensor gemm_operand(const Tensor& t, DType ct, const char* op) {
    if (t.dtype() != ct) return cast(t, ct);  // contiguous already
    if (t.numel() == 0) return t;
    const int64_t n = t.dim();
    const int64_t rows = t.size(n - 2), cols = t.size(n - 1);
    const int64_t rs = t.stride(n - 2), cs = t.stride(n - 1);
    const bool mapped = backend_choice(
        op, t.device(), [&] { return cpu::gemm_reads_in_place(rows, cols, rs, cs); },
        [&](auto) { return cuda::gemm_reads_in_place(rows, cols, rs, cs); });
    return mapped ? t : contiguous(t);
}

// out (=|+=) a · b on out's device; the operands' batch dims already agree.
void gemm_into(const Tensor& out, const Tensor& a, const Tensor& b, bool accumulate,
               const char* op) {
    const View o = view_of(out, op), va = view_of(a, op), vb = view_of(b, op);
    const double flops = 2.0 * double(out.numel()) * double(a.size(-1));
    // CUDA: cuBLAS, strided-batched where the batch dims fold evenly
    // (kernels/cuda/matmul_plan.h); addmm and linear start from the bias
    // copied into out and accumulate (beta = 1).
    dispatch(
        {op, out.device(), {&out, &a, &b}, flops}, [&] { cpu::matmul(o, va, vb, accumulate); },
        [&](auto stream) { cuda::matmul(o, va, vb, accumulate, stream); });
}

// a · b (+ c) for operands of >= 2 dims whose batch dims broadcast; c, when
// defined, broadcasts to the result and is its starting value. a0 and b0 are
// the caller's tensors, named in messages.
Tensor broadcast_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& a0,
               const Tensor& b0, const char* op) {
    const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
    EMBER_CHECK(b.size(-2) == k, op, ": cannot multiply ", describe(a0), " by ", describe(b0),
                ": inner dims ", k, " and ", b.size(-2), " differ");
    EMBER_CHECK(broadcastable(batch_dims(a), batch_dims(b)), op, ": batch dims of ", describe(a0),
                " and ", describe(b0), " do not broadcast");
    const Shape batch = broadcast_shapes(batch_dims(a), batch_dims(b), op);
    Shape shape = batch, sa = batch, sb = batch;
    shape.insert(shape.end(), {m, n});
    sa.insert(sa.end(), {m, k});
    sb.insert(sb.end(), {k, n});
    if (c.defined())
        EMBER_CHECK(c.dim() <= int64_t(shape.size()) && broadcastable(c.shape(), shape) &&
                        broadcast_shapes(c.shape(), shape, op) == shape,
                    op, ": ", describe(c), " does not broadcast to the product's shape ",
                    shape_str(shape));

    // The CPU computes f16 in f32, rounded once at the end, and bf16 on its
    // bf16 GEMM; cuBLAS reads and writes both as they are; both sum in f32.
    const DType dt = a.dtype();
    const DType ct = backend_choice(
        op, a.device(), [&] { return cpu::matmul_dtype(dt); },
        [&](auto) { return cuda::matmul_dtype(dt); });
    Tensor out = empty(shape, like(a, ct));
    if (c.defined()) copy(out, c);
    if (out.numel() > 0)
        gemm_into(out, views::expand(gemm_operand(a, ct, op), sa),
                  views::expand(gemm_operand(b, ct, op), sb), c.defined(), op);
    return ct == dt ? out : cast(out, dt);
}

// A matrix cuBLASLt reads in place: unit column stride and rows that do
// not overlap (a single row or column may have any stride).
bool lt_rows(const Tensor& t) {
    return (t.size(1) <= 1 || t.stride(1) == 1) && (t.size(0) <= 1 || t.stride(0) >= t.size(1));
}

// linear with the bias and the activation in the GEMM's epilogue: on CUDA
// cuBLASLt's (kernels/cuda/linear.h; f32/f16/bf16), on the CPU ember's own
// GEMMs' (kernels/cpu/gemm.cpp, gemm_bf16.cpp; f32 and bf16, the same bits
// as the plain path). x's
// rows as one [R, in] matrix; for gelu_tanh with `pre`, *pre receives the
// pre-activation (rows padded to a multiple of 8, cuBLASLt's rule). An
// undefined Tensor where that does not apply or the backend has no kernel
// for it: the caller takes the plain path (bias copied into out, GEMM
// accumulating onto it, the activation after). A bias-free linear with
// nothing to fuse takes the plain path directly.
Tensor epilogue_linear(const Tensor& x, const Tensor& w, const Tensor& bias, LinearActivation act,
                       const char* op, Tensor* pre = nullptr) {
    if ((!bias.defined() && act == LinearActivation::none) || x.dtype() == DType::f64 ||
        w.size(1) == 0)
        return Tensor();
    const int64_t in = w.size(1), out_f = w.size(0);
    const std::optional<Tensor> x2 = views::try_view(x, {-1, in});
    if (!x2 || x2->size(0) == 0 || out_f == 0 || !lt_rows(*x2) || !lt_rows(w)) return Tensor();
    const Tensor b = bias.defined() ? contiguous(bias) : Tensor();
    Shape shape = x.shape();
    shape.back() = out_f;
    Tensor out = empty(shape, like(x));
    Tensor aux;  // gelu_tanh: [rows, out_f] of a [rows, padded] buffer
    if (act == LinearActivation::gelu_tanh && pre != nullptr) {
        const int64_t rows = x2->size(0), padded = (out_f + 7) / 8 * 8;
        aux = views::slice(empty({rows, padded}, like(x)), 1, 0, out_f, 1);
    }
    const View o = view_of(views::view(out, {-1, out_f}), op), vx = view_of(*x2, op),
               vw = view_of(w, op), vb = b.defined() ? view_of(b, op) : View{},
               va = aux.defined() ? view_of(aux, op) : View{};
    bool ran = false;
    dispatch({op, x.device(), {&out, &aux, &x, &w, &b}, 2.0 * double(out.numel()) * double(in)},
             [&] { ran = cpu::linear_forward(o, vx, vw, vb, act, va); },
             [&](auto stream) { ran = cuda::linear_forward(o, vx, vw, vb, act, va, stream); });
    if (!ran) return Tensor();
    if (pre != nullptr) *pre = x.dim() == 1 ? views::squeeze(aux, 0) : views::view(aux, shape);
    return out;
}

// linear's argument checks (op names the entry point).
void check_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const char* op) {
    if (bias.defined())
        check_operands({&x, &w, &bias}, op);
    else
        check_operands({&x, &w}, op);
    EMBER_CHECK(w.dim() == 2, op, ": expected a 2-d weight [out, in], got ", describe(w));
    EMBER_CHECK(x.dim() >= 1 && x.size(-1) == w.size(1), op, ": input ", describe(x),
                " does not end in the ", w.size(1), " input features of weight ", describe(w));
    EMBER_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == w.size(0)), op,
                ": expected bias [", w.size(0), "] for weight ", describe(w), ", got ",
                describe(bias));
}

// x · wᵀ + bias by the plain path: x [..., in] · wᵀ, wᵀ a column-major view
// of w shared by every row of x, so the GEMM runs as one [rows, in] · [in,
// out] product when x's rows stack.
Tensor plain_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const char* op) {
    if (x.dim() == 1)
        return views::squeeze(broadcast_gemm(views::unsqueeze(x, 0), views::t(w), bias, x, w, op), 0);
    return broadcast_gemm(x, views::t(w), bias, x, w, op);
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
    check_operands({&a, &b}, "matmul");
    EMBER_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both operands need at least 1 dim, got ",
                describe(a), " and ", describe(b));
    // A 1-d operand is a row vector on the left, a column vector on the right;
    // the added dim is removed from the result.
    Tensor out = broadcast_gemm(a.dim() == 1 ? views::unsqueeze(a, 0) : a,
                         b.dim() == 1 ? views::unsqueeze(b, 1) : b, Tensor(), a, b, "matmul");
    if (a.dim() == 1) out = views::squeeze(out, -2);
    if (b.dim() == 1) out = views::squeeze(out, -1);
    return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
    check_operands({&a, &b}, "bmm");
    EMBER_CHECK(a.dim() == 3 && b.dim() == 3,
                "bmm: expected 3-d operands [B, M, K] and [B, K, N], got ", describe(a), " and ",
                describe(b));
    EMBER_CHECK(a.size(0) == b.size(0), "bmm: batch sizes differ: ", describe(a), " and ",
                describe(b));
    return broadcast_gemm(a, b, Tensor(), a, b, "bmm");
}

Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b) {
    check_operands({&c, &a, &b}, "addmm");
    EMBER_CHECK(a.dim() == 2 && b.dim() == 2, "addmm: expected 2-d operands, got ", describe(a),
                " and ", describe(b));
    return broadcast_gemm(a, b, c, a, b, "addmm");
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
    check_linear(x, w, bias, "linear");
    if (Tensor y = epilogue_linear(x, w, bias, LinearActivation::none, "linear"); y.defined())
        return y;
    return plain_linear(x, w, bias, "linear");
}

Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& bias) {
    check_linear(x, w, bias, "linear_relu");
    if (Tensor y = epilogue_linear(x, w, bias, LinearActivation::relu, "linear_relu"); y.defined())
        return y;
    return relu(plain_linear(x, w, bias, "linear_relu"));
}

LinearGelu linear_gelu(const Tensor& x, const Tensor& w, const Tensor& bias, bool want_pre) {
    check_linear(x, w, bias, "linear_gelu");
    LinearGelu r;
    r.out = epilogue_linear(x, w, bias, LinearActivation::gelu_tanh, "linear_gelu",
                            want_pre ? &r.pre : nullptr);
    if (r.out.defined()) return r;
    const Tensor pre = plain_linear(x, w, bias, "linear_gelu");
    r.out = gelu(pre, GeluApprox::tanh);
    if (want_pre) r.pre = pre;
    return r;
}

LinearWeightGrads linear_weight_grad(const Tensor& grad, const Tensor& x, bool want_bias,
                                     std::optional<DType> out) {
    const char* op = "linear_weight_grad";
    check_operands({&grad, &x}, op);
    EMBER_CHECK(grad.dim() == 2 && x.dim() == 2 && grad.size(0) == x.size(0), op,
                ": expected grad [rows, out] and input [rows, in], got ", describe(grad), " and ",
                describe(x));
    const DType dt = out.value_or(x.dtype());
    const bool low = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
    EMBER_CHECK(dt == x.dtype() || (dt == DType::f32 && low), op, ": gradients in ",
                dtype_name(dt), " from ", dtype_name(x.dtype()),
                " operands (f32 from f16 or bf16, else the operands' dtype)");
    const int64_t out_f = grad.size(1), in = x.size(1);
    // f32 from bf16 operands where a kernel writes them: the CPU's fused
    // kernel (its f32 sums); cuBLASLt's epilogue here takes one dtype.
    const bool widen = dt != x.dtype() && grad.dtype() == x.dtype() &&
                       backend_choice(
                           op, x.device(), [&] { return x.dtype() == DType::bf16; },
                           [](auto) { return false; });
    if (widen && !(lt_rows(grad) && lt_rows(x)))  // the kernel reads rows of unit stride
        return linear_weight_grad(contiguous(grad), contiguous(x), want_bias, dt);
    if (dt != x.dtype() && !(widen && grad.numel() > 0 && in > 0)) {
        // Where no kernel writes f32 from low-precision operands: theirs, cast.
        LinearWeightGrads r = linear_weight_grad(grad, x, want_bias);
        return {r.weight.to(dt), r.bias.defined() ? r.bias.to(dt) : r.bias};
    }
    if ((want_bias || widen) && grad.dtype() != DType::f64 && grad.numel() > 0 && in > 0 &&
        lt_rows(grad) && lt_rows(x)) {
        LinearWeightGrads r{empty({out_f, in}, like(x, dt)), empty({out_f}, like(x, dt))};
        const View vw = view_of(r.weight, op), vb = view_of(r.bias, op), vg = view_of(grad, op),
                   vx = view_of(x, op);
        bool ran = false;
        dispatch({op,
                  x.device(),
                  {&r.weight, &r.bias, &grad, &x},
                  2.0 * double(out_f) * double(in) * double(x.size(0))},
                 [&] { ran = cpu::linear_weight_grad(vw, vb, vg, vx); },
                 [&](auto stream) { ran = cuda::linear_weight_grad(vw, vb, vg, vx, stream); });
        if (ran) {
            if (!want_bias) r.bias = Tensor();
            return r;
        }
        EMBER_INTERNAL_CHECK(!widen, op, ": the CPU kernel declined f32 gradients from bf16");
    }
    return {matmul(views::transpose(grad, 0, 1), x), want_bias ? sum(grad, {0}) : Tensor()};
}

}  // namespace ember::kernels

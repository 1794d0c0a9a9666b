// Front for the fused cross-entropy: argument checks with the shapes in the
// message, output allocation, contiguous operands, and one call through the
// dispatch. On the CPU the targets are range-checked before any kernel runs
// (inside the CPU entry: a host read); a CUDA kernel reports a bad one through
// the device error flag at the next synchronization, and nothing is read back.
// Kernels: kernels/cpu/loss.cpp, kernels/cuda/loss.cu.
#include "kernels/loss.h"
#include "kernels/copy.h"

#include "kernels/cpu/loss.h"
#include "kernels/cuda/loss.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

CrossEntropyArgs check_args(const char* op, const Tensor& logits, const Tensor& target,
                                 double label_smoothing, int64_t ignore_index) {
    EMBER_CHECK(logits.defined() && target.defined(), op, ": undefined tensor (logits ",
                describe(logits), ", target ", describe(target), ")");
    check_same_device({&logits, &target}, op);
    check_floating(logits, op);
    EMBER_CHECK(logits.dim() == 2, op, ": expected logits [N, C], got ", describe(logits));
    EMBER_CHECK(logits.size(1) >= 1, op, ": logits ", describe(logits), " have no classes");
    EMBER_CHECK(
        target.dtype() == DType::i64 && target.dim() == 1 && target.size(0) == logits.size(0), op,
        ": expected target i64 [", logits.size(0), "] (class indices) for logits ",
        describe(logits), ", got ", describe(target));
    // Written so that NaN fails too.
    EMBER_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op,
                ": label_smoothing must be in [0, 1], got ", label_smoothing);
    return {logits.size(1), label_smoothing, ignore_index};
}

// Throws for the first target outside [0, C) that is not ignore_index.
// `t` is the contiguous host copy the kernels then read.
void check_targets(const char* op, const Tensor& t, const CrossEntropyArgs& a) {
    if (const auto bad = cpu::cross_entropy_bad_target(view_of(t, op), a))
        EMBER_FAIL(op, ": target ", t.data<int64_t>()[*bad], " at row ", *bad,
                   " is out of range for ", a.classes, " classes (ignore_index ", a.ignore_index,
                   ")");
}

}  // namespace

void check_class_targets(const char* op, const Tensor& target, int64_t classes,
                         int64_t ignore_index) {
    EMBER_CHECK(target.defined(), op, ": undefined target");
    EMBER_CHECK(target.dtype() == DType::i64 && target.dim() == 1, op,
                ": expected target i64 [N] (class indices), got ", describe(target));
    const CrossEntropyArgs a{classes, 0.0, ignore_index};
    const Tensor t = contiguous(target);
    dispatch({"check_class_targets", target.device(), {&t}}, [&] { check_targets(op, t, a); },
             [&](auto stream) { cuda::check_class_targets(op, view_of(t, op), a, stream); });
}

CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& target,
                                          double label_smoothing, int64_t ignore_index) {
    const char* op = "cross_entropy_forward";
    const CrossEntropyArgs a = check_args(op, logits, target, label_smoothing, ignore_index);
    const int64_t n = logits.size(0);
    CrossEntropyForward r{empty({n}, like(logits, acc_dtype(logits.dtype()))),
                          empty({n}, like(logits, DType::f64))};  // Note [lse in f64]
    // perf: strided inputs are copied first; the kernel reads contiguous rows.
    const Tensor t = contiguous(target), x = contiguous(logits);
    const View loss = view_of(r.loss, op), lse = view_of(r.lse, op), vx = view_of(x, op),
               vt = view_of(t, op);
    dispatch({op, logits.device(), {&r.loss, &r.lse, &x, &t}},
             [&] {
                 check_targets(op, t, a);
                 if (n > 0) cpu::cross_entropy_forward(loss, lse, vx, vt, a);
             },
             [&](auto stream) { cuda::cross_entropy_forward(loss, lse, vx, vt, a, stream); });
    return r;
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& lse,
                              const Tensor& target, double label_smoothing, int64_t ignore_index) {
    const char* op = "cross_entropy_backward";
    const CrossEntropyArgs a = check_args(op, logits, target, label_smoothing, ignore_index);
    const int64_t n = logits.size(0);
    const DType acc = acc_dtype(logits.dtype());
    EMBER_CHECK(grad_loss.defined() && lse.defined(), op, ": undefined tensor (grad_loss ",
                describe(grad_loss), ", lse ", describe(lse), ")");
    check_same_device({&logits, &grad_loss, &lse}, op);
    check_floating(grad_loss, op);
    EMBER_CHECK(grad_loss.shape() == Shape{n}, op, ": expected grad_loss [", n, "] for logits ",
                describe(logits), ", got ", describe(grad_loss));
    EMBER_CHECK(lse.shape() == Shape{n} && lse.dtype() == DType::f64, op,
                ": expected lse f64 [", n, "] (cross_entropy_forward's) for logits ",
                describe(logits), ", got ", describe(lse));
    Tensor out = empty(logits.shape(), like(logits));
    // perf: strided inputs are copied first (grad_loss also to the
    // accumulation dtype, which the kernel reads).
    const Tensor t = contiguous(target), x = contiguous(logits), l = contiguous(lse);
    const Tensor g = grad_loss.dtype() == acc ? contiguous(grad_loss) : cast(grad_loss, acc);
    const View vo = view_of(out, op), vg = view_of(g, op), vx = view_of(x, op),
               vl = view_of(l, op), vt = view_of(t, op);
    dispatch({op, logits.device(), {&out, &g, &x, &l, &t}},
             [&] {
                 check_targets(op, t, a);
                 if (n > 0) cpu::cross_entropy_backward(vo, vg, vx, vl, vt, a);
             },
             [&](auto stream) { cuda::cross_entropy_backward(vo, vg, vx, vl, vt, a, stream); });
    return out;
}

}  // namespace ember::kernels

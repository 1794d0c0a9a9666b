// Front for the fused cross-entropy: argument checks with the shapes in the
// message, the target range check (before any kernel runs), output
// allocation, and the switch on the device. Kernels: kernels/cpu/loss.cpp.
#include "kernels/loss.h"
#include "kernels/copy.h"

#include "kernels/cpu/loss.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// Statistics and per-sample losses of half-precision logits are kept in f32.
DType acc_dtype(DType d) { return d == DType::f64 ? DType::f64 : DType::f32; }

cpu::CrossEntropyArgs check_args(const char* op, const Tensor& logits, const Tensor& target,
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
void check_targets(const char* op, const Tensor& t, const cpu::CrossEntropyArgs& a) {
    if (const auto bad = cpu::cross_entropy_bad_target(view_of(t, op), a))
        EMBER_FAIL(op, ": target ", t.data<int64_t>()[*bad], " at row ", *bad,
                   " is out of range for ", a.classes, " classes (ignore_index ", a.ignore_index,
                   ")");
}

}  // namespace

CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& target,
                                          double label_smoothing, int64_t ignore_index) {
    const char* op = "cross_entropy_forward";
    const cpu::CrossEntropyArgs a = check_args(op, logits, target, label_smoothing, ignore_index);
    const int64_t n = logits.size(0);
    const TensorOptions o = like(logits, acc_dtype(logits.dtype()));
    CrossEntropyForward r{empty({n}, o), empty({n}, o)};
    switch (logits.device().type) {
        case DeviceType::cpu: {
            const Tensor t = contiguous(target);
            check_targets(op, t, a);
            if (n == 0) return r;
            // perf: a strided input is copied first; the kernel reads contiguous rows.
            const Tensor x = contiguous(logits);
            cpu::cross_entropy_forward(view_of(r.loss, op), view_of(r.lse, op), view_of(x, op),
                                       view_of(t, op), a);
            return r;
        }
        case DeviceType::cuda:
            // cuda::cross_entropy_forward goes here (one block per row; bad
            // targets reported through a device flag).
            break;
    }
    unsupported_device(op, logits.device());
}

Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& lse,
                              const Tensor& target, double label_smoothing, int64_t ignore_index) {
    const char* op = "cross_entropy_backward";
    const cpu::CrossEntropyArgs a = check_args(op, logits, target, label_smoothing, ignore_index);
    const int64_t n = logits.size(0);
    const DType acc = acc_dtype(logits.dtype());
    EMBER_CHECK(grad_loss.defined() && lse.defined(), op, ": undefined tensor (grad_loss ",
                describe(grad_loss), ", lse ", describe(lse), ")");
    check_same_device({&logits, &grad_loss, &lse}, op);
    check_floating(grad_loss, op);
    EMBER_CHECK(grad_loss.shape() == Shape{n}, op, ": expected grad_loss [", n, "] for logits ",
                describe(logits), ", got ", describe(grad_loss));
    EMBER_CHECK(lse.shape() == Shape{n} && lse.dtype() == acc, op, ": expected lse ",
                dtype_name(acc), " [", n, "] (cross_entropy_forward's) for logits ",
                describe(logits), ", got ", describe(lse));
    Tensor out = empty(logits.shape(), like(logits));
    switch (logits.device().type) {
        case DeviceType::cpu: {
            const Tensor t = contiguous(target);
            check_targets(op, t, a);
            if (n == 0) return out;
            // perf: strided inputs are copied first (grad_loss also to the
            // accumulation dtype, which the kernel reads).
            const Tensor x = contiguous(logits), l = contiguous(lse);
            const Tensor g = grad_loss.dtype() == acc ? contiguous(grad_loss) : cast(grad_loss, acc);
            cpu::cross_entropy_backward(view_of(out, op), view_of(g, op), view_of(x, op),
                                        view_of(l, op), view_of(t, op), a);
            return out;
        }
        case DeviceType::cuda:
            // cuda::cross_entropy_backward goes here.
            break;
    }
    unsupported_device(op, logits.device());
}

}  // namespace ember::kernels

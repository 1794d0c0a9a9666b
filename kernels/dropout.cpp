// Front for dropout: checks (p, dtypes, the mask's shape), outputs, and the
// switch on the device. Kernels: kernels/cpu/dropout.cpp.
#include "kernels/dropout.h"
#include "kernels/copy.h"

#include "kernels/cpu/dropout.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

void check_p(const char* op, double p) {
    // Written so that NaN fails too.
    EMBER_CHECK(p >= 0 && p < 1, op, ": p must be in [0, 1), got ", p);
}

}  // namespace

uint64_t dropout_blocks(int64_t n) {
    EMBER_CHECK(n >= 0, "dropout_blocks: negative element count ", n);
    return (uint64_t(n) + 3) / 4;  // the f32 uniform stream: 4 elements per block
}

DropoutForward dropout_forward(const Tensor& x, double p, uint64_t seed, uint64_t first_block) {
    const char* op = "dropout_forward";
    EMBER_CHECK(x.defined(), op, ": undefined input");
    check_floating(x, op);
    check_p(op, p);
    DropoutForward r{empty(x.shape(), like(x)), empty(x.shape(), like(x, DType::u8))};
    if (x.numel() == 0) return r;
    switch (x.device().type) {
        case DeviceType::cpu: {
            const Tensor xc = contiguous(x);  // perf: a strided input is copied first
            cpu::dropout_forward(view_of(r.output, op), view_of(r.mask, op), view_of(xc, op), p,
                                 seed, first_block);
            return r;
        }
        case DeviceType::cuda:
            // cuda::dropout_forward goes here (math::uniform_at per element, like the CPU).
            break;
    }
    unsupported_device(op, x.device());
}

Tensor dropout_backward(const Tensor& grad_y, const Tensor& mask, double p) {
    const char* op = "dropout_backward";
    EMBER_CHECK(grad_y.defined() && mask.defined(), op, ": undefined tensor (grad_y ",
                describe(grad_y), ", mask ", describe(mask), ")");
    check_same_device({&grad_y, &mask}, op);
    check_floating(grad_y, op);
    EMBER_CHECK(mask.dtype() == DType::u8 && mask.shape() == grad_y.shape(), op,
                ": expected mask u8 ", shape_str(grad_y.shape()), " for grad_y ", describe(grad_y),
                ", got ", describe(mask));
    check_p(op, p);
    Tensor out = empty(grad_y.shape(), like(grad_y));
    if (out.numel() == 0) return out;
    switch (grad_y.device().type) {
        case DeviceType::cpu: {
            // perf: strided inputs are copied first.
            const Tensor g = contiguous(grad_y), m = contiguous(mask);
            cpu::dropout_backward(view_of(out, op), view_of(g, op), view_of(m, op), p);
            return out;
        }
        case DeviceType::cuda:
            // cuda::dropout_backward goes here.
            break;
    }
    unsupported_device(op, grad_y.device());
}

}  // namespace ember::kernels

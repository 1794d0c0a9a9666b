// Front for dropout: checks (p, dtypes, the mask's shape), outputs, and one
// call through the dispatch. Kernels: kernels/cpu/dropout.cpp, kernels/cuda/dropout.cu.
#include "kernels/dropout.h"
#include "kernels/copy.h"

#include "kernels/cpu/dropout.h"
#include "kernels/cuda/dropout.h"
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
    const Tensor xc = contiguous(x);  // perf: a strided input is copied first
    const View out = view_of(r.output, op), mask = view_of(r.mask, op), in = view_of(xc, op);
    // CUDA: the same Philox stream (kernels/random_math.h): the same mask.
    dispatch({op, x.device(), {&r.output, &r.mask, &xc}},
             [&] { cpu::dropout_forward(out, mask, in, p, seed, first_block); },
             [&](auto stream) {
                 cuda::dropout_forward(out, mask, in, p, seed, first_block, stream);
             });
    return r;
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
    // perf: strided inputs are copied first.
    const Tensor g = contiguous(grad_y), m = contiguous(mask);
    const View o = view_of(out, op), vg = view_of(g, op), vm = view_of(m, op);
    dispatch({op, grad_y.device(), {&out, &g, &m}}, [&] { cpu::dropout_backward(o, vg, vm, p); },
             [&](auto stream) { cuda::dropout_backward(o, vg, vm, p, stream); });
    return out;
}

}  // namespace ember::kernels

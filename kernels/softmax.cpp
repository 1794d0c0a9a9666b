// Front for softmax and log_softmax and their backwards: checks, contiguous
// [outer, size, inner] inputs, a new output of the same dtype and shape, and
// one call through the dispatch.
#include "kernels/softmax.h"
#include "kernels/copy.h"

#include <algorithm>

#include "kernels/cpu/softmax.h"
#include "kernels/cuda/softmax.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// Checks dim against x and returns it wrapped.
int64_t check_dim(const char* op, const Tensor& x, int64_t dim) {
    const int64_t n = std::max<int64_t>(x.dim(), 1);  // a 0-d tensor takes dim 0 / -1
    EMBER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for input ", describe(x));
    return wrap_dim(dim, x.dim(), op);
}

// x's [outer, size, inner] split at dim d. Only for a non-empty x: the sizes
// of an empty one may multiply past int64.
ReduceShape split_at(const Tensor& x, int64_t d) {
    ReduceShape s;
    for (int64_t i = 0; i < x.dim(); ++i) {
        const int64_t size = x.shape()[size_t(i)];
        (i < d ? s.outer : i == d ? s.size : s.inner) *= size;
    }
    return s;
}

Tensor softmax_front(const char* op, const Tensor& x, int64_t dim, bool log) {
    EMBER_CHECK(x.defined(), op, ": undefined tensor");
    check_floating(x, op);
    const int64_t d = check_dim(op, x, dim);
    Tensor out = empty(x.shape(), like(x));
    if (out.numel() == 0) return out;
    const ReduceShape s = split_at(x, d);
    // perf: a strided input is copied first; the kernels read contiguous rows.
    const Tensor src = contiguous(x);
    const View o = view_of(out, op), i = view_of(src, op);
    dispatch({op, x.device(), {&out, &src}},
             [&] { (log ? cpu::log_softmax : cpu::softmax)(o, i, s); },
             [&](auto stream) { (log ? cuda::log_softmax : cuda::softmax)(o, i, s, stream); });
    return out;
}

Tensor backward_front(const char* op, const Tensor& grad_y, const Tensor& y, int64_t dim,
                      bool log) {
    EMBER_CHECK(grad_y.defined() && y.defined(), op, ": undefined tensor (grad_y ",
                describe(grad_y), ", y ", describe(y), ")");
    check_same_device({&grad_y, &y}, op);
    check_floating(y, op);
    EMBER_CHECK(grad_y.shape() == y.shape() && grad_y.dtype() == y.dtype(), op, ": grad_y ",
                describe(grad_y), " must have the shape and dtype of y ", describe(y));
    const int64_t d = check_dim(op, y, dim);
    Tensor out = empty(y.shape(), like(y));
    if (out.numel() == 0) return out;
    const ReduceShape s = split_at(y, d);
    // perf: strided inputs are copied first; the kernels read contiguous rows.
    const Tensor g = contiguous(grad_y), yc = contiguous(y);
    const View o = view_of(out, op), vg = view_of(g, op), vy = view_of(yc, op);
    dispatch({op, y.device(), {&out, &g, &yc}},
             [&] { (log ? cpu::log_softmax_backward : cpu::softmax_backward)(o, vg, vy, s); },
             [&](auto stream) {
                 (log ? cuda::log_softmax_backward : cuda::softmax_backward)(o, vg, vy, s, stream);
             });
    return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_front("softmax", x, dim, false); }

Tensor log_softmax(const Tensor& x, int64_t dim) {
    return softmax_front("log_softmax", x, dim, true);
}

Tensor softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) {
    return backward_front("softmax_backward", grad_y, y, dim, false);
}

Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim) {
    return backward_front("log_softmax_backward", grad_y, y, dim, true);
}

}  // namespace ember::kernels

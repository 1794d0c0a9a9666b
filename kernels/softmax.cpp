// Front for softmax and log_softmax: checks, a contiguous [outer, size, inner]
// input, a new output of the same dtype and shape, and the switch on the device.
#include "kernels/softmax.h"

#include <algorithm>

#include "kernels/cpu/softmax.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

Tensor softmax_front(const char* op, const Tensor& x, int64_t dim, bool log) {
    EMBER_CHECK(x.defined(), op, ": undefined tensor");
    check_floating(x, op);
    const int64_t n = std::max<int64_t>(x.dim(), 1);  // a 0-d tensor takes dim 0 / -1
    EMBER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for input ", describe(x));
    const int64_t d = wrap_dim(dim, x.dim(), op);
    Tensor out = empty(x.shape(), like(x));
    if (out.numel() == 0) return out;
    cpu::ReduceShape s;
    for (int64_t i = 0; i < x.dim(); ++i) {
        const int64_t size = x.shape()[size_t(i)];
        (i < d ? s.outer : i == d ? s.size : s.inner) *= size;
    }
    switch (x.device().type) {
        case DeviceType::cpu: {
            // perf: a strided input is copied first; the kernels read contiguous rows.
            const Tensor src = x.contiguous();
            (log ? cpu::log_softmax : cpu::softmax)(view_of(out, op), view_of(src, op), s);
            return out;
        }
        case DeviceType::cuda:
            // cuda::softmax / cuda::log_softmax go here.
            break;
    }
    unsupported_device(op, x.device());
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_front("softmax", x, dim, false); }

Tensor log_softmax(const Tensor& x, int64_t dim) {
    return softmax_front("log_softmax", x, dim, true);
}

}  // namespace ember::kernels

// Tensor's computing methods, defined here beside the kernels they call (the
// autograd layer will record them for differentiation when it lands).
#include "core/tensor.h"
#include "kernels/copy.h"
#include "kernels/front.h"

namespace ember {

Tensor Tensor::contiguous() const {
    if (is_contiguous()) return *this;
    return clone();
}

Tensor Tensor::clone() const {
    Tensor out = empty(shape(), kernels::like(*this));
    kernels::copy(out, *this);
    return out;
}

Tensor Tensor::to(DType dt) const {
    if (dt == dtype()) return *this;
    return kernels::cast(*this, dt);
}

Tensor Tensor::to(Device d, bool non_blocking) const {
    if (d == device()) return *this;
    // A non-blocking copy to the host lands in pinned memory, so it can really be async.
    Tensor out = empty(shape(), {dtype(), d, non_blocking && d.is_cpu()});
    kernels::copy(out, *this, non_blocking);
    return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
    kernels::copy(*this, src);
    return *this;
}

Tensor& Tensor::fill_(double value) {
    kernels::fill(*this, value);
    return *this;
}

}  // namespace ember

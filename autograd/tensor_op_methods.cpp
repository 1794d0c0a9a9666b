// Tensor's reductions and softmax as methods (declared in core/tensor.h), as
// libtorch spells them: `x.sum()`, `x.argmax(1)`, `x.softmax(-1)`. Each is
// the free function of the same name (autograd/ops/reduce.h), recorded for
// backward as that function is.
#include "autograd/ops/reduce.h"
#include "core/tensor.h"
#include "kernels/op_types.h"

namespace ember {

Tensor Tensor::sum() const { return ember::sum(*this); }
Tensor Tensor::sum(int64_t dim, bool keepdim) const { return ember::sum(*this, {dim}, keepdim); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return ember::sum(*this, dims, keepdim); }

Tensor Tensor::mean() const { return ember::mean(*this); }
Tensor Tensor::mean(int64_t dim, bool keepdim) const { return ember::mean(*this, {dim}, keepdim); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const {
    return ember::mean(*this, dims, keepdim);
}

Tensor Tensor::norm(double p, const Shape& dims, bool keepdim) const {
    return ember::norm(*this, p, dims, keepdim);
}

Tensor Tensor::var(const Shape& dims, double correction, bool keepdim) const {
    return ember::var(*this, dims, correction, keepdim);
}

Tensor Tensor::amax(const Shape& dims, bool keepdim) const { return ember::amax(*this, dims, keepdim); }
Tensor Tensor::amin(const Shape& dims, bool keepdim) const { return ember::amin(*this, dims, keepdim); }
Tensor Tensor::max() const { return ember::amax(*this); }
Tensor Tensor::min() const { return ember::amin(*this); }
ValuesIndices Tensor::max(int64_t dim, bool keepdim) const { return ember::max(*this, dim, keepdim); }
ValuesIndices Tensor::min(int64_t dim, bool keepdim) const { return ember::min(*this, dim, keepdim); }

Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
    return ember::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
    return ember::argmin(*this, dim, keepdim);
}

Tensor Tensor::softmax(int64_t dim) const { return ember::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ember::log_softmax(*this, dim); }

}  // namespace ember

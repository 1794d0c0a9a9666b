// Tensor's view methods: the layout math is views:: (core/tensor_views.cpp);
// here each records its backward, which maps the gradient of the view back to
// the shape of its base.
#include <functional>

#include "autograd/graph.h"
#include "core/tensor.h"
#include "kernels/copy.h"
#include "kernels/factories.h"

namespace ember {

using autograd::TensorList;

namespace {

// Records out = view of self; `back` turns the view's gradient into self's.
Tensor record_view(const char* name, const Tensor& self, const Tensor& out,
                   std::function<Tensor(const Tensor&)> back) {
    if (out.is_same(self) || !is_floating(out.dtype())) return out;  // a no-op view
    if (auto node = autograd::make_node(name, {self})) {
        node->backward = [back = std::move(back)](const TensorList& g) {
            return TensorList{back(g[0])};
        };
        autograd::set_history(node, out);
    }
    return out;
}

// The backward of a view that selects elements without overlap (slice,
// narrow, select): the same view of a zero tensor of self's shape receives g.
std::function<Tensor(const Tensor&)> scatter_into_zeros(
    const Tensor& self, std::function<Tensor(const Tensor&)> same_view) {
    return [shape = self.shape(), dtype = self.dtype(), device = self.device(),
            same_view = std::move(same_view)](const Tensor& g) {
        Tensor z = zeros(shape, {dtype, device});
        kernels::copy(same_view(z), g);
        return z;
    };
}

std::function<Tensor(const Tensor&)> reshape_back(const Tensor& self) {
    return [shape = self.shape()](const Tensor& g) { return kernels::reshape(g, shape); };
}

}  // namespace

Tensor Tensor::view(const Shape& s) const {
    return record_view("view", *this, views::view(*this, s), reshape_back(*this));
}

namespace {
// A view recorded as `name` when the strides allow one; else a recorded copy
// (clone) and a view of it, as PyTorch's reshape.
Tensor reshape_as(const char* name, const Tensor& self, const Shape& s) {
    if (auto v = views::try_view(self, s)) return record_view(name, self, *v, reshape_back(self));
    return self.clone().view(s);
}
}  // namespace

Tensor Tensor::reshape(const Shape& s) const { return reshape_as("reshape", *this, s); }

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
    return reshape_as("flatten", *this, views::flatten_shape(shape(), start_dim, end_dim));
}

Tensor Tensor::squeeze() const {
    return record_view("squeeze", *this, views::squeeze(*this), reshape_back(*this));
}

Tensor Tensor::squeeze(int64_t d) const {
    return record_view("squeeze", *this, views::squeeze(*this, d), reshape_back(*this));
}

Tensor Tensor::unsqueeze(int64_t d) const {
    return record_view("unsqueeze", *this, views::unsqueeze(*this, d), reshape_back(*this));
}

Tensor Tensor::permute(const Shape& dims) const {
    Tensor out = views::permute(*this, dims);  // validates dims
    Shape inverse(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) inverse[size_t(wrap_dim(dims[i], dim(), "permute"))] = int64_t(i);
    return record_view("permute", *this, out,
                       [inverse](const Tensor& g) { return views::permute(g, inverse); });
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
    return record_view("transpose", *this, views::transpose(*this, d0, d1),
                       [d0, d1](const Tensor& g) { return views::transpose(g, d0, d1); });
}

Tensor Tensor::t() const {
    return record_view("t", *this, views::t(*this), [](const Tensor& g) { return views::t(g); });
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
    return record_view("slice", *this, views::slice(*this, d, start, end, step),
                       scatter_into_zeros(*this, [=](const Tensor& z) {
                           return views::slice(z, d, start, end, step);
                       }));
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
    return record_view("narrow", *this, views::narrow(*this, d, start, length),
                       scatter_into_zeros(*this, [=](const Tensor& z) {
                           return views::narrow(z, d, start, length);
                       }));
}

Tensor Tensor::select(int64_t d, int64_t index) const {
    return record_view("select", *this, views::select(*this, d, index),
                       scatter_into_zeros(*this, [=](const Tensor& z) {
                           return views::select(z, d, index);
                       }));
}

Tensor Tensor::expand(const Shape& s) const {
    return record_view("expand", *this, views::expand(*this, s),
                       [shape = shape()](const Tensor& g) { return autograd::sum_to(g, shape); });
}

Tensor Tensor::as_strided(const Shape& s, const Shape& st, int64_t off) const {
    // Its gradient depends on how the storage is shared, which ember does not track.
    EMBER_CHECK(!autograd::needs_grad({*this}), "as_strided: not differentiable; use view, "
                "slice, permute or expand on a tensor that requires grad");
    return views::as_strided(*this, s, st, off);
}

}  // namespace ember

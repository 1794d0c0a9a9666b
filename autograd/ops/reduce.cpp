// Differentiable reductions and softmax. A reduction's gradient is the
// upstream gradient broadcast back over the reduced dims (expand: no copy),
// times the op's local derivative.
#include "autograd/ops/reduce.h"
#include "kernels/copy.h"

#include <cmath>

#include "autograd/autocast.h"
#include "autograd/graph.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/index.h"
#include "kernels/softmax.h"

namespace ember {
using autograd::TensorList;

namespace {

// The shape of a keepdim reduction of `shape` over `dims` (empty: all).
Shape kept_shape(const Shape& shape, const Shape& dims) {
    Shape s = shape;
    // A 0-d input reduces over dim 0 or -1 as over all: there is no dim to keep.
    if (dims.empty() || shape.empty()) {
        for (auto& d : s) d = 1;
        return s;
    }
    for (int64_t d : dims) s[size_t(wrap_dim(d, int64_t(shape.size()), "reduce"))] = 1;
    return s;
}

// g of a reduction (keepdim or not) as a view broadcast to `shape`.
Tensor expand_back(const Tensor& g, const Shape& shape, const Shape& dims) {
    if (shape.empty()) return kernels::reshape(g, shape);
    return views::expand(kernels::reshape(g, kept_shape(shape, dims)), shape);
}

// Number of elements reduced into each output element.
double reduced_count(const Shape& shape, const Shape& dims) {
    double n = 1;
    const Shape kept = kept_shape(shape, dims);
    for (size_t i = 0; i < shape.size(); ++i)
        if (kept[i] == 1) n *= double(shape[i]);
    return n;
}

// The backward of amax/amin/norm-inf: ties at the extreme share g evenly.
Tensor share_among_ties(const Tensor& g, const Tensor& x, const Tensor& out, const Shape& dims) {
    const Tensor hit = kernels::eq(x, expand_back(out, x.shape(), dims)).to(g.dtype());
    const Tensor count = kernels::sum(hit, dims.empty() ? Shape{} : dims, true);
    const Tensor share = kernels::div(
        expand_back(g, x.shape(), dims),
        views::expand(kernels::reshape(count, kept_shape(x.shape(), dims)), x.shape()));
    return kernels::mul(share, hit);
}

}  // namespace

Tensor sum(const Tensor& x0, const Shape& dims, bool keepdim) {
    const Tensor x = amp::cast_input("sum", x0);
    Tensor out = kernels::sum(x, dims, keepdim);
    if (!is_floating(out.dtype())) return out;
    if (auto node = autograd::make_node("sum", {x})) {
        node->backward = [shape = x.shape(), dims](const TensorList& g) {
            return TensorList{expand_back(g[0], shape, dims)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor mean(const Tensor& x0, const Shape& dims, bool keepdim) {
    const Tensor x = amp::cast_input("mean", x0);
    Tensor out = kernels::mean(x, dims, keepdim);
    if (auto node = autograd::make_node("mean", {x})) {
        node->backward = [shape = x.shape(), dims](const TensorList& g) {
            const double n = reduced_count(shape, dims);
            return TensorList{expand_back(kernels::div(g[0], n), shape, dims)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor norm(const Tensor& x0, double p, const Shape& dims, bool keepdim) {
    const Tensor x = amp::cast_input("norm", x0);
    Tensor out = kernels::norm(x, p, dims, keepdim);
    if (auto node = autograd::make_node("norm", {x})) {
        node->backward = [x = node->save(x), out = node->save(out), p, dims](const TensorList& g) {
            const Shape& shape = x.shape();
            const Tensor sign =
                kernels::sub(kernels::gt(x, 0.0).to(x.dtype()), kernels::lt(x, 0.0).to(x.dtype()));
            // p = inf: d max|x| / dx = sign(x) at the extremes (ties share).
            if (std::isinf(p))
                return TensorList{
                    kernels::mul(share_among_ties(g[0], kernels::abs(x), out, dims), sign)};
            if (p == 1) return TensorList{kernels::mul(expand_back(g[0], shape, dims), sign)};
            // p = 2: g·x/‖x‖, and 0 where the norm is 0.
            const Tensor n = expand_back(out, shape, dims);
            const Tensor safe = kernels::where(kernels::eq(n, 0.0), ones_like(n), n);
            return TensorList{kernels::div(kernels::mul(expand_back(g[0], shape, dims), x), safe)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor var(const Tensor& x0, const Shape& dims, double correction, bool keepdim) {
    const Tensor x = amp::cast_input("var", x0);
    Tensor out = kernels::var(x, dims, correction, keepdim);
    if (auto node = autograd::make_node("var", {x})) {
        node->backward = [x = node->save(x), dims, correction](const TensorList& g) {
            // d var / dx = 2 (x − mean) / (n − correction)
            const Shape& shape = x.shape();
            const double n = reduced_count(shape, dims);
            const Tensor centered =
                kernels::sub(x, expand_back(kernels::mean(x, dims, true), shape, dims));
            const Tensor scale =
                kernels::div(expand_back(g[0], shape, dims), (n - correction) / 2.0);
            return TensorList{kernels::mul(scale, centered)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor std(const Tensor& x0, const Shape& dims, double correction, bool keepdim) {
    const Tensor x = amp::cast_input("std", x0);
    Tensor out = kernels::std(x, dims, correction, keepdim);
    if (auto node = autograd::make_node("std", {x})) {
        node->backward = [x = node->save(x), out = node->save(out), dims,
                          correction](const TensorList& g) {
            // d std / dx = (x − mean) / ((n − correction) · std)
            const Shape& shape = x.shape();
            const double n = reduced_count(shape, dims);
            const Tensor centered =
                kernels::sub(x, expand_back(kernels::mean(x, dims, true), shape, dims));
            const Tensor denom = kernels::mul(expand_back(out, shape, dims), n - correction);
            const Tensor d =
                kernels::div(kernels::mul(expand_back(g[0], shape, dims), centered), denom);
            // Where std is 0 every element equals the mean: 0, not 0/0 (as PyTorch).
            return TensorList{kernels::where(kernels::eq(denom, 0.0), zeros_like(d), d)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

namespace {

// amax/amin: the gradient goes to the extreme elements, shared among ties.
Tensor extreme_over(const char* name, bool is_max, const Tensor& x, const Shape& dims,
                    bool keepdim) {
    Tensor out = is_max ? kernels::amax(x, dims, keepdim) : kernels::amin(x, dims, keepdim);
    if (!is_floating(out.dtype())) return out;
    if (auto node = autograd::make_node(name, {x})) {
        node->backward = [x = node->save(x), out = node->save(out), dims](const TensorList& g) {
            return TensorList{share_among_ties(g[0], x, out, dims)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

}  // namespace

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
    return extreme_over("amax", true, x, dims, keepdim);
}
Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
    return extreme_over("amin", false, x, dims, keepdim);
}

namespace {

ValuesIndices extreme_along(const char* name, bool is_max, const Tensor& x, int64_t dim,
                            bool keepdim) {
    ValuesIndices r = is_max ? kernels::max(x, dim, keepdim) : kernels::min(x, dim, keepdim);
    if (!is_floating(r.values.dtype())) return r;
    if (auto node = autograd::make_node(name, {x})) {
        const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), name);
        node->backward = [idx = node->save(r.indices), shape = x.shape(), d,
                          keepdim](const TensorList& g) {
            if (shape.empty()) return TensorList{kernels::reshape(g[0], shape)};
            Tensor gi = keepdim ? g[0] : views::unsqueeze(g[0], d);
            Tensor ii = keepdim ? idx : views::unsqueeze(idx, d);
            Tensor z = zeros(shape, {g[0].dtype(), g[0].device()});
            return TensorList{kernels::scatter_add(z, d, ii, gi)};
        };
        autograd::set_history(node, r.values);
    }
    return r;
}

}  // namespace

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
    return extreme_along("max", true, x, dim, keepdim);
}
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
    return extreme_along("min", false, x, dim, keepdim);
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
    return kernels::argmax(x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
    return kernels::argmin(x, dim, keepdim);
}

Tensor softmax(const Tensor& x0, int64_t dim) {
    const Tensor x = amp::cast_input("softmax", x0);
    Tensor y = kernels::softmax(x, dim);
    if (auto node = autograd::make_node("softmax", {x})) {
        node->backward = [y = node->save(y), dim](const TensorList& g) {
            // y · (g − Σ g·y)
            const Tensor dot = kernels::sum(kernels::mul(g[0], y), {dim}, true);
            return TensorList{kernels::mul(y, kernels::sub(g[0], dot))};
        };
        autograd::set_history(node, y);
    }
    return y;
}

Tensor log_softmax(const Tensor& x0, int64_t dim) {
    const Tensor x = amp::cast_input("log_softmax", x0);
    Tensor y = kernels::log_softmax(x, dim);
    if (auto node = autograd::make_node("log_softmax", {x})) {
        node->backward = [y = node->save(y), dim](const TensorList& g) {
            // g − exp(y) · Σ g
            const Tensor total = kernels::sum(g[0], {dim}, true);
            return TensorList{kernels::sub(g[0], kernels::mul(kernels::exp(y), total))};
        };
        autograd::set_history(node, y);
    }
    return y;
}

}  // namespace ember

// Views: new shape/strides/offset over the same storage. Every argument is
// checked; a bad view is an ember::Error naming the op and the shapes. These
// record nothing and never copy: Tensor's view methods (autograd/ops/views.cpp)
// call them and record the backward; a reshape that must copy is
// kernels::reshape (kernels/copy.h) or Tensor::reshape.
#include <algorithm>
#include <optional>

#include "core/tensor.h"

namespace ember {

namespace {

Tensor with_layout(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
    Tensor v = make_tensor(t.storage(), shape, strides, offset, t.dtype());
    return v;
}

// Replaces one -1 by the size that keeps numel; checks the product.
Shape infer_size(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
    Shape out = shape;
    int64_t known = 1;
    int infer_at = -1;
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i] == -1) {
            EMBER_CHECK(infer_at < 0, op, ": only one dimension can be -1, got ", shape_str(shape));
            infer_at = int(i);
        } else {
            EMBER_CHECK(out[i] >= 0, op, ": invalid size in ", shape_str(shape));
            EMBER_CHECK(!__builtin_mul_overflow(known, out[i], &known), op, ": shape ",
                        shape_str(shape), " has too many elements");
        }
    }
    if (infer_at >= 0) {
        EMBER_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape),
                    " is invalid for input of shape ", shape_str(from));
        out[size_t(infer_at)] = numel / known;
        EMBER_CHECK(shape_numel(out) == numel, op, ": shape ", shape_str(shape),
                    " is invalid for input of shape ", shape_str(from));
    } else {
        EMBER_CHECK(shape_numel(out) == numel, op, ": shape ", shape_str(shape),
                    " is invalid for input of shape ", shape_str(from), " (", numel,
                    " elements)");
    }
    return out;
}

// Strides that view (old_shape, old_strides) as new_shape, if the memory allows
// it: each run of old dims that is contiguous in memory may be re-split freely.
std::optional<Shape> view_strides(const Shape& old_shape, const Shape& old_strides,
                                  const Shape& new_shape) {
    Shape ns(new_shape.size(), 0);
    if (old_shape.empty() || shape_numel(old_shape) == 0) return contiguous_strides(new_shape);
    int64_t view_d = int64_t(new_shape.size()) - 1;
    int64_t chunk_stride = old_strides.back();
    int64_t tensor_numel = 1, view_numel = 1;
    for (int64_t d = int64_t(old_shape.size()) - 1; d >= 0; --d) {
        tensor_numel *= old_shape[size_t(d)];
        const bool chunk_ends =
            d == 0 || (old_shape[size_t(d - 1)] != 1 &&
                       old_strides[size_t(d - 1)] != tensor_numel * chunk_stride);
        if (!chunk_ends) continue;
        while (view_d >= 0 && (view_numel < tensor_numel || new_shape[size_t(view_d)] == 1)) {
            ns[size_t(view_d)] = view_numel * chunk_stride;
            view_numel *= new_shape[size_t(view_d)];
            --view_d;
        }
        if (view_numel != tensor_numel) return std::nullopt;
        if (d > 0) {
            chunk_stride = old_strides[size_t(d - 1)];
            tensor_numel = view_numel = 1;
        }
    }
    if (view_d != -1) return std::nullopt;
    return ns;
}

}  // namespace

namespace views {

Tensor view(const Tensor& self, const Shape& new_shape) {
    const Shape s = infer_size(new_shape, self.numel(), "view", self.shape());
    auto st = view_strides(self.shape(), self.strides(), s);
    EMBER_CHECK(st.has_value(), "view: cannot view a tensor of shape ", shape_str(self.shape()),
                " and strides ", shape_str(self.strides()), " as ", shape_str(s),
                " without a copy; use reshape");
    return with_layout(self, s, *st, self.offset());
}

std::optional<Tensor> try_view(const Tensor& self, const Shape& new_shape) {
    const Shape s = infer_size(new_shape, self.numel(), "reshape", self.shape());
    if (auto st = view_strides(self.shape(), self.strides(), s))
        return with_layout(self, s, *st, self.offset());
    return std::nullopt;
}

Shape flatten_shape(const Shape& shape, int64_t start_dim, int64_t end_dim) {
    const int64_t nd = int64_t(shape.size());
    if (nd == 0) return {1};
    const int64_t a = wrap_dim(start_dim, nd, "flatten"), b = wrap_dim(end_dim, nd, "flatten");
    EMBER_CHECK(a <= b, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim);
    Shape s(shape.begin(), shape.begin() + a);
    int64_t n = 1;
    for (int64_t i = a; i <= b; ++i)  // only an empty tensor's can overflow
        EMBER_CHECK(!__builtin_mul_overflow(n, shape[size_t(i)], &n), "flatten: dims ", a, " to ",
                    b, " of shape ", shape_str(shape), " hold more elements than int64 counts");
    s.push_back(n);
    s.insert(s.end(), shape.begin() + b + 1, shape.end());
    return s;
}

Tensor permute(const Tensor& self, const Shape& dims) {
    EMBER_CHECK(int64_t(dims.size()) == self.dim(), "permute: got ", dims.size(), " dims ",
                shape_str(dims), " for a tensor of shape ", shape_str(self.shape()));
    Shape s(dims.size()), st(dims.size());
    std::vector<bool> seen(dims.size(), false);
    for (size_t i = 0; i < dims.size(); ++i) {
        const int64_t d = wrap_dim(dims[i], self.dim(), "permute");
        EMBER_CHECK(!seen[size_t(d)], "permute: dims ", shape_str(dims), " repeat ", dims[i]);
        seen[size_t(d)] = true;
        s[i] = self.shape()[size_t(d)];
        st[i] = self.strides()[size_t(d)];
    }
    return with_layout(self, s, st, self.offset());
}

Tensor transpose(const Tensor& self, int64_t d0, int64_t d1) {
    if (self.dim() == 0) return self;
    const int64_t a = wrap_dim(d0, self.dim(), "transpose"), b = wrap_dim(d1, self.dim(), "transpose");
    Shape s = self.shape(), st = self.strides();
    std::swap(s[size_t(a)], s[size_t(b)]);
    std::swap(st[size_t(a)], st[size_t(b)]);
    return with_layout(self, s, st, self.offset());
}

Tensor t(const Tensor& self) {
    EMBER_CHECK(self.dim() <= 2, "t: expected a tensor with at most 2 dims, got shape ",
                shape_str(self.shape()));
    return self.dim() < 2 ? self : transpose(self, 0, 1);
}

Tensor slice(const Tensor& self, int64_t d, int64_t start, int64_t end, int64_t step) {
    d = wrap_dim(d, self.dim(), "slice");
    EMBER_CHECK(self.dim() > 0, "slice: cannot slice a 0-d tensor");
    EMBER_CHECK(step > 0, "slice: step must be positive, got ", step);
    const int64_t n = self.shape()[size_t(d)];
    auto clamp = [n](int64_t i) { return std::clamp(i < 0 ? i + n : i, int64_t(0), n); };
    start = clamp(start);
    end = std::max(clamp(end), start);
    Shape s = self.shape(), st = self.strides();
    s[size_t(d)] = end > start ? (end - start - 1) / step + 1 : 0;
    // Note [Views of empty tensors]
    // The strides of an empty tensor never reach an element and may be
    // anything (huge sizes elsewhere, contiguous_strides' reset on overflow,
    // or a huge stride on a size-1 dim): views of one, and views that come
    // out empty, do no arithmetic on them, and the offset stays put. (An
    // empty slice at the end of a size-1 dim would otherwise step its
    // offset a whole stride past the storage: found by fuzzing.)
    if (self.numel() == 0 || s[size_t(d)] == 0) return with_layout(self, s, st, self.offset());
    if (s[size_t(d)] > 1) st[size_t(d)] *= step;  // cannot overflow: the result stays in the storage
    return with_layout(self, s, st, self.offset() + start * self.strides()[size_t(d)]);
}

Tensor narrow(const Tensor& self, int64_t d, int64_t start, int64_t length) {
    d = wrap_dim(d, self.dim(), "narrow");
    EMBER_CHECK(self.dim() > 0, "narrow: cannot narrow a 0-d tensor");
    const int64_t n = self.shape()[size_t(d)];
    if (start < 0) start += n;
    EMBER_CHECK(start >= 0 && start <= n && length >= 0 && length <= n - start, "narrow: start ",
                start, " and length ", length, " out of bounds for dim ", d, " of shape ",
                shape_str(self.shape()));
    return slice(self, d, start, start + length, 1);
}

Tensor select(const Tensor& self, int64_t d, int64_t index) {
    EMBER_CHECK(self.dim() > 0, "select: cannot select from a 0-d tensor");
    d = wrap_dim(d, self.dim(), "select");
    const int64_t n = self.shape()[size_t(d)];
    EMBER_CHECK(index >= -n && index < n, "select: index ", index, " out of range for dim ", d,
                " of shape ", shape_str(self.shape()));
    if (index < 0) index += n;
    Shape s = self.shape(), st = self.strides();
    s.erase(s.begin() + d);
    st.erase(st.begin() + d);
    // Note [Views of empty tensors] (in slice)
    const int64_t step = self.numel() == 0 ? 0 : index * self.strides()[size_t(d)];
    return with_layout(self, s, st, self.offset() + step);
}

Tensor expand(const Tensor& self, const Shape& target) {
    EMBER_CHECK(int64_t(target.size()) >= self.dim(), "expand: target ", shape_str(target),
                " has fewer dims than shape ", shape_str(self.shape()));
    const size_t lead = target.size() - size_t(self.dim());
    Shape s(target.size()), st(target.size());
    for (size_t i = 0; i < target.size(); ++i) {
        if (i < lead) {
            EMBER_CHECK(target[i] >= 0, "expand: size -1 not allowed for new leading dim in ",
                        shape_str(target));
            s[i] = target[i];
            st[i] = 0;
            continue;
        }
        const int64_t cur = self.shape()[i - lead];
        const int64_t want = target[i] == -1 ? cur : target[i];
        EMBER_CHECK(want >= 0 && (cur == want || cur == 1), "expand: shape ", shape_str(self.shape()),
                    " cannot expand to ", shape_str(target));
        s[i] = want;
        st[i] = cur == want ? self.strides()[i - lead] : 0;
    }
    (void)shape_numel(s);  // throws if the element count overflows
    return with_layout(self, s, st, self.offset());
}

Tensor squeeze(const Tensor& self) {
    Shape s, st;
    for (size_t i = 0; i < self.shape().size(); ++i) {
        if (self.shape()[i] == 1) continue;
        s.push_back(self.shape()[i]);
        st.push_back(self.strides()[i]);
    }
    return with_layout(self, s, st, self.offset());
}

Tensor squeeze(const Tensor& self, int64_t d) {
    if (self.dim() == 0) return self;
    d = wrap_dim(d, self.dim(), "squeeze");
    if (self.shape()[size_t(d)] != 1) return self;
    Shape s = self.shape(), st = self.strides();
    s.erase(s.begin() + d);
    st.erase(st.begin() + d);
    return with_layout(self, s, st, self.offset());
}

Tensor unsqueeze(const Tensor& self, int64_t d) {
    d = wrap_dim(d, self.dim() + 1, "unsqueeze");
    Shape s = self.shape(), st = self.strides();
    // The new size-1 dim's stride is never stepped; the usual size x stride
    // of the dim after it, unless that overflows (an empty tensor's may).
    int64_t stride = 1;
    if (d < self.dim() && __builtin_mul_overflow(s[size_t(d)], st[size_t(d)], &stride))
        stride = 1;
    s.insert(s.begin() + d, 1);
    st.insert(st.begin() + d, stride);
    return with_layout(self, s, st, self.offset());
}

Tensor as_strided(const Tensor& self, const Shape& s, const Shape& st, int64_t off) {
    EMBER_CHECK(s.size() == st.size(), "as_strided: shape ", shape_str(s), " and strides ",
                shape_str(st), " differ in length");
    EMBER_CHECK(off >= 0, "as_strided: negative offset ", off);
    for (int64_t d : s) EMBER_CHECK(d >= 0, "as_strided: negative size in shape ", shape_str(s));
    for (int64_t d : st)
        EMBER_CHECK(d >= 0, "as_strided: negative stride in ", shape_str(st));
    const int64_t capacity = int64_t(self.storage()->nbytes()) / self.element_size();
    if (shape_numel(s) == 0) {
        // Nothing is read through an empty view, but its offset still makes
        // its data pointer: it may end the storage (as an empty slice does),
        // not lie past it (found by fuzzing: tests/fuzz/regressions).
        EMBER_CHECK(off <= capacity, "as_strided: offset ", off, " of an empty view is past the ",
                    capacity, " elements of the storage");
        return with_layout(self, s, st, off);
    }
    int64_t last = off;
    for (size_t i = 0; i < s.size(); ++i) {
        int64_t span = 0;
        EMBER_CHECK(!__builtin_mul_overflow(s[i] - 1, st[i], &span) &&
                        !__builtin_add_overflow(last, span, &last),
                    "as_strided: shape ", shape_str(s), " with strides ", shape_str(st),
                    " overflows");
    }
    EMBER_CHECK(last < capacity, "as_strided: shape ", shape_str(s), " strides ", shape_str(st),
                " offset ", off, " reach element ", last, " of a storage holding ", capacity);
    return with_layout(self, s, st, off);
}

}  // namespace views
}  // namespace ember

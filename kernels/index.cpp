// Front for the indexing ops: argument checks, output allocation, and the
// stride-0 views that turn index_select and embedding into one gather kernel
// and index_add into a scatter_add, then one call through the dispatch.
// Kernels: kernels/cpu/index.cpp, kernels/cuda/index.cu.
#include "kernels/index.h"
#include "kernels/copy.h"

#include <optional>

#include "kernels/cpu/index.h"
#include "kernels/cuda/index.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

void check_index_dtype(const Tensor& index, const char* op) {
    EMBER_CHECK(index.dtype() == DType::i64 || index.dtype() == DType::i32, op,
                ": index must be i64 or i32, got ", describe(index));
}

[[noreturn]] void bad_index(const char* op, int64_t value, int64_t dim, const char* what,
                            const Tensor& input) {
    EMBER_FAIL(op, ": index ", value, " is out of range for dim ", dim, " of size ",
               input.size(dim), " (", what, " ", describe(input), ")");
}

// A View with an explicit layout (shape and strides in elements).
View make_view(char* data, DType dtype, const Shape& shape, const Shape& strides, const char* op) {
    EMBER_CHECK(int64_t(shape.size()) <= kMaxDims, op, ": tensors of more than ", kMaxDims,
                " dims are not supported, got shape ", shape_str(shape));
    View v;
    v.data = data;
    v.dtype = dtype;
    v.ndim = int(shape.size());
    for (int d = 0; d < v.ndim; ++d) {
        v.shape[d] = shape[size_t(d)];
        v.strides[d] = strides[size_t(d)];
    }
    return v;
}

// `t` seen through `shape` with dim `dim`'s stride zeroed: the rows a gather
// reads from, before the index steps along dim.
View rows_view(const Tensor& t, const Shape& shape, int64_t dim, const char* op) {
    Shape strides = t.strides();
    strides[size_t(dim)] = 0;
    return make_view(static_cast<char*>(t.data_ptr()), t.dtype(), shape, strides, op);
}

// A 1-d (or 0-d) index seen through `shape`: it varies only along dim.
View spread_index(const Tensor& index, const Shape& shape, int64_t dim, const char* op) {
    Shape strides(shape.size(), 0);
    strides[size_t(dim)] = index.dim() == 1 ? index.stride(0) : 0;
    return make_view(static_cast<char*>(index.data_ptr()), index.dtype(), shape, strides, op);
}

// Runs the gather kernel for `out` (`input` is the tensor named in errors).
// An empty output still has its indices checked, as PyTorch does.
void run_gather(const char* op, const Tensor& out, const View& in, const View& index,
                const Tensor& input, int64_t dim, const char* what, const Tensor& index_tensor) {
    std::optional<int64_t> bad;
    const View o = view_of(out, op), all = view_of(index_tensor, op);
    const int64_t stride = input.stride(dim), size = input.size(dim);
    // CUDA: a bad index raises the device error flag (an Error naming op at
    // the next synchronization).
    dispatch({op, out.device(), {&out, &input, &index_tensor}},
             [&] {
                 if (out.numel() > 0)
                     bad = cpu::gather(o, in, index, stride, size);
                 else if (index_tensor.numel() > 0)
                     bad = cpu::find_bad_index(all, size);
             },
             [&](auto stream) {
                 if (out.numel() > 0)
                     cuda::gather(o, in, index, stride, size, op, stream);
                 else if (index_tensor.numel() > 0)
                     cuda::find_bad_index(all, size, op, stream);
             });
    if (bad) bad_index(op, *bad, dim, what, input);
}

// scatter_add_ and index_add_ after their own checks: validate every index
// first so self is untouched on error, then accumulate.
void run_scatter_add(const char* op, const Tensor& self, int64_t dim, const View& index,
                     const Tensor& src) {
    for (int64_t d = 0; d < self.dim(); ++d)  // two lines would add into one element
        EMBER_CHECK(self.stride(d) != 0 || self.size(d) <= 1, op, ": self ", describe(self),
                    " has stride 0 in dim ", d, " (an expanded tensor); write into a clone");
    if (index.numel() == 0) return;
    View s = view_of(src, op);
    for (int d = 0; d < s.ndim; ++d) s.shape[d] = index.shape[d];  // the part index covers
    const View out = view_of(self, op);
    // CUDA: deterministic (one thread per line along dim); a bad index raises
    // the device error flag and is skipped, so self keeps the valid sums.
    dispatch({op, self.device(), {&self, &src}},
             [&] {
                 if (auto bad = cpu::find_bad_index(index, self.size(dim)))
                     bad_index(op, *bad, dim, "self", self);
                 cpu::scatter_add(out, index, s, int(dim));
             },
             [&](auto stream) { cuda::scatter_add(out, index, s, int(dim), op, stream); });
    self.storage()->bump_version();
}

}  // namespace

Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index) {
    const char* op = "index_select";
    check_same_device({&input, &index}, op);
    check_index_dtype(index, op);
    EMBER_CHECK(index.dim() <= 1, op, ": index must be 1-d, got ", describe(index));
    EMBER_CHECK(input.dim() >= 1, op, ": input must have at least one dim, got ", describe(input));
    dim = wrap_dim(dim, input.dim(), op);
    Shape shape = input.shape();
    shape[size_t(dim)] = index.numel();
    Tensor out = empty(shape, like(input));
    run_gather(op, out, rows_view(input, shape, dim, op), spread_index(index, shape, dim, op),
               input, dim, "input", index);
    return out;
}

Tensor gather(const Tensor& input, int64_t dim, const Tensor& index) {
    const char* op = "gather";
    check_same_device({&input, &index}, op);
    check_index_dtype(index, op);
    EMBER_CHECK(input.dim() >= 1, op, ": input must have at least one dim, got ", describe(input));
    EMBER_CHECK(index.dim() == input.dim(), op,
                ": index must have as many dims as input, got index ", describe(index),
                " and input ", describe(input));
    dim = wrap_dim(dim, input.dim(), op);
    for (int64_t d = 0; d < input.dim(); ++d)
        EMBER_CHECK(d == dim || index.size(d) <= input.size(d), op, ": index ", describe(index),
                    " is larger than input ", describe(input), " in dim ", d, " (only dim ", dim,
                    " may be larger)");
    Tensor out = empty(index.shape(), like(input));
    run_gather(op, out, rows_view(input, index.shape(), dim, op), view_of(index, op), input, dim,
               "input", index);
    return out;
}

Tensor embedding(const Tensor& weight, const Tensor& indices) {
    const char* op = "embedding";
    check_same_device({&weight, &indices}, op);
    check_index_dtype(indices, op);
    EMBER_CHECK(weight.dim() == 2, op, ": weight must be 2-d [V, D], got ", describe(weight));
    // out[..., j] = weight[indices[...], j]: a gather along a new dim of size D.
    Shape shape = indices.shape(), in_strides(indices.dim(), 0), index_strides = indices.strides();
    shape.push_back(weight.size(1));
    in_strides.push_back(weight.stride(1));
    index_strides.push_back(0);
    Tensor out = empty(shape, like(weight));
    const View in =
        make_view(static_cast<char*>(weight.data_ptr()), weight.dtype(), shape, in_strides, op);
    const View index = make_view(static_cast<char*>(indices.data_ptr()), indices.dtype(), shape,
                                 index_strides, op);
    run_gather(op, out, in, index, weight, 0, "weight", indices);
    return out;
}

Tensor scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
    const char* op = "scatter_add";
    check_same_device({&self, &index, &src}, op);
    check_index_dtype(index, op);
    EMBER_CHECK(src.dtype() == self.dtype(), op, ": src must have self's dtype, got src ",
                describe(src), " and self ", describe(self));
    EMBER_CHECK(self.dim() >= 1, op, ": self must have at least one dim, got ", describe(self));
    EMBER_CHECK(index.dim() == self.dim() && src.dim() == self.dim(), op,
                ": self, index and src must have the same number of dims, got self ",
                describe(self), ", index ", describe(index), " and src ", describe(src));
    dim = wrap_dim(dim, self.dim(), op);
    for (int64_t d = 0; d < self.dim(); ++d) {
        EMBER_CHECK(index.size(d) <= src.size(d), op, ": index ", describe(index),
                    " is larger than src ", describe(src), " in dim ", d);
        EMBER_CHECK(d == dim || index.size(d) <= self.size(d), op, ": index ", describe(index),
                    " is larger than self ", describe(self), " in dim ", d, " (only dim ", dim,
                    " may be larger)");
    }
    const Tensor idx = unaliased(index, self), from = unaliased(src, self);
    run_scatter_add(op, self, dim, view_of(idx, op), from);
    return self;
}

Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src) {
    return scatter_add_(clone(self), dim, index, src);
}

Tensor index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
    const char* op = "index_add";
    check_same_device({&self, &index, &source}, op);
    check_index_dtype(index, op);
    EMBER_CHECK(index.dim() <= 1, op, ": index must be 1-d, got ", describe(index));
    EMBER_CHECK(source.dtype() == self.dtype(), op, ": source must have self's dtype, got source ",
                describe(source), " and self ", describe(self));
    EMBER_CHECK(self.dim() >= 1, op, ": self must have at least one dim, got ", describe(self));
    dim = wrap_dim(dim, self.dim(), op);
    bool shapes_ok = source.dim() == self.dim() && source.size(dim) == index.numel();
    for (int64_t d = 0; shapes_ok && d < self.dim(); ++d)
        shapes_ok = d == dim || source.size(d) == self.size(d);
    EMBER_CHECK(shapes_ok, op, ": source must have self's shape except in dim ", dim,
                ", where it needs the index's length ", index.numel(), "; got source ",
                describe(source), " and self ", describe(self));
    const Tensor idx = unaliased(index, self), from = unaliased(source, self);
    run_scatter_add(op, self, dim, spread_index(idx, source.shape(), dim, op), from);
    return self;
}

Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source) {
    return index_add_(clone(self), dim, index, source);
}

}  // namespace ember::kernels

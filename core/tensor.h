// Tensor: a strided view (shape, strides, element offset) of a Storage, with a
// dtype and a device. Views share storage; nothing here computes on elements.
// Methods that compute (contiguous, clone, to, copy_) are declared here for
// convenience and defined beside the kernels that implement them.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "device.h"
#include "dtype.h"
#include "storage.h"

namespace ember {

using Shape = std::vector<int64_t>;

/// "[2, 3, 4]", for messages.
std::string shape_str(const Shape& s);
/// Prints shape_str(s): `std::cout << x.shape()`.
std::ostream& operator<<(std::ostream& os, const Shape& s);
/// Product of the sizes; throws on a negative size or if the product overflows int64.
int64_t shape_numel(const Shape& s);
/// Row-major strides for `s` (the contiguous layout).
Shape contiguous_strides(const Shape& s);

/// How a 4-d [N, C, H, W] tensor's elements lie in memory: contiguous is
/// row-major NCHW; channels_last is NHWC (a pixel's C channels adjacent),
/// strides [H·W·C, 1, W·C, C], the layout the CPU's and cuDNN's fastest
/// convolutions read (docs/linalg.md, "Channels-last"). The shape and the
/// indexing stay [N, C, H, W] in both.
enum class MemoryFormat { contiguous, channels_last };
const char* memory_format_name(MemoryFormat f);
/// The strides of `format` for shape `s` (channels_last needs 4 dims).
Shape format_strides(const Shape& s, MemoryFormat format);
/// Wraps a possibly negative dim into [0, ndim); `op` names the caller in the error.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

/// What a factory makes: element type, device, and (host only) pinned memory.
/// Used with designated initializers: `zeros({2, 3}, {.dtype = DType::f64})`.
struct TensorOptions {
    DType dtype = DType::f32;
    Device device = Device::cpu();
    bool pinned = false;
};

struct AutogradMeta;  // defined by autograd/; null for tensors that never took part in it
namespace autograd {
struct Node;
}
struct ValuesIndices;  // what max(dim) and min(dim) return (kernels/op_types.h)

/// Shared state of one tensor handle. Users work with Tensor.
struct TensorImpl {
    Storage storage;
    Shape shape;
    Shape strides;
    int64_t offset = 0;  // in elements
    DType dtype = DType::f32;
    std::shared_ptr<AutogradMeta> autograd;
};

/// A reference-counted handle; copying a Tensor aliases the same data (like
/// torch::Tensor). A default-constructed Tensor is undefined.
class Tensor {
  public:
    Tensor() = default;
    explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

    bool defined() const { return impl_ != nullptr; }
    const Shape& shape() const { return impl().shape; }
    const Shape& strides() const { return impl().strides; }
    int64_t dim() const { return int64_t(impl().shape.size()); }
    /// Size of dimension `d` (negative counts from the end).
    int64_t size(int64_t d) const;
    int64_t stride(int64_t d) const;
    int64_t numel() const;
    int64_t offset() const { return impl().offset; }
    DType dtype() const { return impl().dtype; }
    Device device() const { return impl().storage->device(); }
    int64_t element_size() const { return dtype_size(dtype()); }
    const Storage& storage() const { return impl().storage; }
    /// Address of element 0 (storage base + offset).
    void* data_ptr() const;
    /// Typed address of element 0; throws if T does not match the dtype.
    template <class T>
    T* data() const {
        EMBER_CHECK(dtype_of<T>() == dtype(), "data<", dtype_name(dtype_of<T>()),
                    ">() called on a tensor of dtype ", dtype_name(dtype()));
        return static_cast<T*>(data_ptr());
    }
    /// Row-major with no gaps (size-1 dims may have any stride).
    bool is_contiguous() const;
    /// Laid out densely in `format` (size-1 dims may have any stride); for
    /// channels_last, false unless 4-d.
    bool is_contiguous(MemoryFormat format) const;
    /// channels_last when this is a 4-d tensor laid out NHWC, and not also
    /// NCHW unless its strides are exactly NHWC's (one channel, or one pixel,
    /// is both: contiguous(channels_last) gives it NHWC's strides);
    /// contiguous otherwise. The format an op's result takes from its input.
    MemoryFormat suggest_memory_format() const;
    /// True when both handles refer to the same TensorImpl.
    bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
    TensorImpl* unsafe_impl() const { return impl_.get(); }
    const std::shared_ptr<TensorImpl>& shared_impl() const { return impl_; }

    // ---- Views: share storage, never copy. Defined in autograd/ops/views.cpp,
    // which records their backward; the layout math is views:: in core. ----
    /// Same data with a new shape; one size may be -1. Throws if the strides do not allow it.
    Tensor view(const Shape& shape) const;
    /// Like view, but copies when the strides do not allow a view.
    Tensor reshape(const Shape& shape) const;
    Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
    Tensor permute(const Shape& dims) const;
    Tensor transpose(int64_t d0, int64_t d1) const;
    /// Transpose of a matrix (dims <= 2).
    Tensor t() const;
    /// Python-style slice [start:end:step] along dim; start/end clamp, step > 0.
    Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
    /// Elements [start, start + length) along dim; out of range is an error.
    Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
    /// Removes dim, taking element `index` of it.
    Tensor select(int64_t dim, int64_t index) const;
    /// Broadcasts size-1 dims (stride 0) and prepends new ones; -1 keeps a size.
    Tensor expand(const Shape& shape) const;
    Tensor squeeze() const;
    Tensor squeeze(int64_t dim) const;
    Tensor unsqueeze(int64_t dim) const;
    /// Raw view with explicit shape, strides and offset, bounds-checked against the storage.
    Tensor as_strided(const Shape& shape, const Shape& strides, int64_t offset) const;

    // ---- Computing methods (defined in autograd/tensor_methods.cpp) ----
    /// This tensor if contiguous, else a contiguous copy.
    Tensor contiguous() const;
    /// This tensor if laid out densely in `format` (for channels_last: and
    /// suggesting it), else a copy that is (channels_last needs 4 dims).
    /// Differentiable; values are unchanged.
    Tensor contiguous(MemoryFormat format) const;
    /// A contiguous copy with its own storage.
    Tensor clone() const;
    /// Converts the element type (returns *this when already `dtype`): a
    /// new contiguous tensor, channels-last where this one suggests it.
    Tensor to(DType dtype) const;
    /// Moves to `device` (returns *this when already there). With non_blocking,
    /// a copy from pinned host memory may return before it completes.
    Tensor to(Device device, bool non_blocking = false) const;
    /// Copies src into this tensor, broadcasting src and converting its dtype.
    Tensor& copy_(const Tensor& src);
    /// Sets every element to `value` (converted to the dtype).
    Tensor& fill_(double value);

    // ---- The reductions and softmax as methods, as in libtorch
    // (autograd/tensor_op_methods.cpp): each is the free function of the same
    // name (autograd/ops/reduce.h) with this tensor first. ----
    /// Over every element (`x.sum()`), one dim (`x.sum(1)`) or several (`x.sum({0, 1})`).
    Tensor sum() const;
    Tensor sum(int64_t dim, bool keepdim = false) const;
    Tensor sum(const Shape& dims, bool keepdim = false) const;
    Tensor mean() const;
    Tensor mean(int64_t dim, bool keepdim = false) const;
    Tensor mean(const Shape& dims, bool keepdim = false) const;
    Tensor norm(double p = 2, const Shape& dims = {}, bool keepdim = false) const;
    Tensor var(const Shape& dims = {}, double correction = 1, bool keepdim = false) const;
    Tensor amax(const Shape& dims = {}, bool keepdim = false) const;
    Tensor amin(const Shape& dims = {}, bool keepdim = false) const;
    /// The largest element (0-d), as libtorch's `x.max()`.
    Tensor max() const;
    Tensor min() const;
    /// Values and indices along `dim` (needs kernels/op_types.h, which ember.h includes).
    ValuesIndices max(int64_t dim, bool keepdim = false) const;
    ValuesIndices min(int64_t dim, bool keepdim = false) const;
    /// Index of the largest element of the flattened tensor, or along `dim`.
    Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
    Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
    Tensor softmax(int64_t dim) const;
    Tensor log_softmax(int64_t dim) const;

    // ---- Autograd (autograd/tensor_methods.cpp; docs/autograd.md) ----
    /// True for a floating tensor that is a leaf marked with set_requires_grad,
    /// or the result of a recorded op.
    bool requires_grad() const;
    /// Marks a leaf as needing its gradient (floating dtypes only); false
    /// turns it off. Returns *this (PyTorch's requires_grad_).
    const Tensor& set_requires_grad(bool on = true) const;
    /// True unless the tensor is the result of a recorded op.
    bool is_leaf() const;
    /// The accumulated gradient (a leaf's, or a non-leaf's after retain_grad);
    /// undefined until a backward reaches it or after zero_grad.
    Tensor grad() const;
    /// Replaces the gradient (undefined clears it); used by optimizers and zero_grad.
    void set_grad(const Tensor& grad) const;
    /// The node that made this tensor, or null for a leaf.
    std::shared_ptr<autograd::Node> grad_fn() const;
    /// Back-propagates from this tensor. `gradient` seeds it (may be omitted
    /// for a one-element tensor: 1). With retain_graph the graph may be
    /// walked again; otherwise its saved tensors are freed.
    void backward(const Tensor& gradient = {}, bool retain_graph = false) const;
    /// The same data without history: shares storage, requires no grad.
    Tensor detach() const;
    /// Keeps this non-leaf's gradient in grad() after backward.
    void retain_grad() const;
    /// Calls `hook(grad)` when the gradient with respect to this tensor is
    /// computed, before it flows on (for a leaf: before it is accumulated). A
    /// defined return value replaces the gradient.
    void register_hook(std::function<Tensor(const Tensor&)> hook) const;
    /// Calls `hook(leaf)` after a backward has accumulated into this leaf's
    /// grad() (data parallelism starts all-reduces from here).
    void register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;

    // ---- Element access, mainly for tests (copies from the device when needed;
    // defined in kernels/tensor_access.cpp, beside the copies they use) ----
    /// The single element of a one-element tensor, as double.
    double item() const;
    /// The single element as T (float, double, int32_t, int64_t, uint8_t),
    /// converted from the dtype as to_vector<T> does: `x.item<int64_t>()`
    /// keeps every bit of an i64 that double would round.
    template <class T>
    T item() const;
    /// Element at a full index (negative indices count from the end), as double.
    double at(const Shape& index) const;
    /// Writes one element (converted to the dtype). Host tensors only.
    void set(const Shape& index, double value);
    /// All elements in row-major order, converted to T.
    template <class T>
    std::vector<T> to_vector() const;

  private:
    TensorImpl& impl() const {
        EMBER_CHECK(impl_ != nullptr, "operation on an undefined tensor");
        return *impl_;
    }
    std::shared_ptr<TensorImpl> impl_;
};

/// The layout math of Tensor's view methods, recording nothing and never
/// copying (kernels and the autograd layer use these; users call the Tensor
/// methods). A reshape that may copy is kernels::reshape.
namespace views {
Tensor view(const Tensor& self, const Shape& shape);
/// `self` seen with `shape` (one size may be -1) when its strides allow it
/// without a copy; nullopt when they do not. Bad shapes are errors.
std::optional<Tensor> try_view(const Tensor& self, const Shape& shape);
/// The shape flatten(start_dim, end_dim) gives a tensor of `shape`.
Shape flatten_shape(const Shape& shape, int64_t start_dim, int64_t end_dim);
Tensor permute(const Tensor& self, const Shape& dims);
Tensor transpose(const Tensor& self, int64_t d0, int64_t d1);
Tensor t(const Tensor& self);
Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step);
Tensor narrow(const Tensor& self, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& self, int64_t dim, int64_t index);
Tensor expand(const Tensor& self, const Shape& shape);
Tensor squeeze(const Tensor& self);
Tensor squeeze(const Tensor& self, int64_t dim);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor as_strided(const Tensor& self, const Shape& shape, const Shape& strides, int64_t offset);
}  // namespace views

/// The storage offset (in elements) of the element at a full index (negative
/// entries count from the end); an Error names `op` when the index is bad.
int64_t element_offset(const Tensor& t, const Shape& index, const char* op);

/// Prints dtype, device and shape, then the values nested by dimension as
/// PyTorch does: every value up to 1000 elements, beyond that the first and
/// last 3 of each dimension around "..."; floating values with 4 decimals
/// (scientific where they span too wide a range). kernels/tensor_print.cpp.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// An uninitialized tensor.
Tensor empty(const Shape& shape, TensorOptions options = {});
/// An uninitialized tensor laid out in `format` (channels_last needs 4 dims).
Tensor empty(const Shape& shape, TensorOptions options, MemoryFormat format);
/// A tensor over existing storage (no copy).
Tensor make_tensor(Storage storage, const Shape& shape, const Shape& strides, int64_t offset,
                   DType dtype);
/// Zero-copy view of caller memory (docs/tips.md #11). The memory must outlive the
/// tensor unless `deleter` is given, which runs when the last view dies.
Tensor from_blob(void* data, const Shape& shape, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});
Tensor from_blob(void* data, const Shape& shape, const Shape& strides, TensorOptions options = {},
                 std::function<void(void*)> deleter = {});

extern template std::vector<float> Tensor::to_vector<float>() const;
extern template std::vector<double> Tensor::to_vector<double>() const;
extern template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
extern template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
extern template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

}  // namespace ember

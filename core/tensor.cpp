// Tensor metadata, construction over storage, and writing one host element.
// Reading elements (which may copy from a device) and printing live in
// kernels/tensor_access.cpp.
#include "core/tensor.h"

#include <limits>
#include <sstream>

namespace ember {

std::string shape_str(const Shape& s) {
    std::ostringstream os;
    os << "[";
    for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
    os << "]";
    return os.str();
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << shape_str(s); }

int64_t shape_numel(const Shape& s) {
    for (int64_t d : s) EMBER_CHECK(d >= 0, "negative size in shape ", shape_str(s));
    for (int64_t d : s)
        if (d == 0) return 0;  // empty, whatever the other sizes
    int64_t n = 1;
    for (int64_t d : s)
        EMBER_CHECK(!__builtin_mul_overflow(n, d, &n), "shape ", shape_str(s),
                    " has too many elements");
    return n;
}

Shape contiguous_strides(const Shape& s) {
    Shape st(s.size());
    int64_t acc = 1;
    for (size_t i = s.size(); i-- > 0;) {
        st[i] = acc;
        // Only an empty tensor's sizes can overflow here; its strides are never used.
        if (__builtin_mul_overflow(acc, s[i] > 0 ? s[i] : 1, &acc)) acc = 1;
    }
    return st;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
    const int64_t n = ndim > 0 ? ndim : 1;  // a 0-d tensor accepts dim 0 and -1
    EMBER_CHECK(dim >= -n && dim < n, op, ": dim ", dim, " out of range for a tensor with ", ndim,
                " dimension(s)");
    return dim < 0 ? dim + n : dim;
}

int64_t Tensor::size(int64_t d) const {
    EMBER_CHECK(dim() > 0, "size: a 0-d tensor has no dims (asked for dim ", d, ")");
    return shape()[size_t(wrap_dim(d, dim(), "size"))];
}
int64_t Tensor::stride(int64_t d) const {
    EMBER_CHECK(dim() > 0, "stride: a 0-d tensor has no dims (asked for dim ", d, ")");
    return strides()[size_t(wrap_dim(d, dim(), "stride"))];
}

int64_t Tensor::numel() const {
    // Shapes are checked when made (shape_numel): the product fits unless a
    // size is 0, and then it is 0.
    for (int64_t d : shape())
        if (d == 0) return 0;
    int64_t n = 1;
    for (int64_t d : shape()) n *= d;
    return n;
}

void* Tensor::data_ptr() const {
    char* base = static_cast<char*>(storage()->data());
    // from_blob(nullptr, ...) makes empty tensors over no memory: no offset
    // may be applied to that null pointer, even for views of them.
    return base ? base + offset() * element_size() : nullptr;
}

bool Tensor::is_contiguous() const {
    if (numel() == 0) return true;
    int64_t expected = 1;
    for (int64_t i = dim() - 1; i >= 0; --i) {
        const int64_t sz = shape()[size_t(i)];
        if (sz == 0) return true;
        if (sz != 1 && strides()[size_t(i)] != expected) return false;
        expected *= sz;
    }
    return true;
}

bool Tensor::is_contiguous(MemoryFormat format) const {
    if (format == MemoryFormat::contiguous) return is_contiguous();
    if (dim() != 4) return false;
    if (numel() == 0) return true;
    // Dims in NHWC order, innermost first: C, W, H, N.
    int64_t expected = 1;
    for (int64_t d : {1, 3, 2, 0}) {
        const int64_t sz = shape()[size_t(d)];
        if (sz != 1 && strides()[size_t(d)] != expected) return false;
        expected *= sz;
    }
    return true;
}

MemoryFormat Tensor::suggest_memory_format() const {
    if (!is_contiguous(MemoryFormat::channels_last)) return MemoryFormat::contiguous;
    if (!is_contiguous()) return MemoryFormat::channels_last;
    // Both (one channel, or one pixel): the strides as they are decide.
    return strides() == format_strides(shape(), MemoryFormat::channels_last) &&
                   strides() != contiguous_strides(shape())
               ? MemoryFormat::channels_last
               : MemoryFormat::contiguous;
}

const char* memory_format_name(MemoryFormat f) {
    return f == MemoryFormat::channels_last ? "channels_last" : "contiguous";
}

Shape format_strides(const Shape& s, MemoryFormat format) {
    if (format == MemoryFormat::contiguous) return contiguous_strides(s);
    EMBER_CHECK(s.size() == 4, "memory format channels_last needs a 4-d [N, C, H, W] shape, got ",
                shape_str(s));
    const int64_t c = s[1], h = s[2], w = s[3];
    return {h * w * c, 1, w * c, c};
}

Tensor make_tensor(Storage storage, const Shape& shape, const Shape& strides, int64_t offset,
                   DType dtype) {
    EMBER_INTERNAL_ASSERT(shape.size() == strides.size());
    auto impl = std::make_shared<TensorImpl>();
    impl->storage = std::move(storage);
    impl->shape = shape;
    impl->strides = strides;
    impl->offset = offset;
    impl->dtype = dtype;
    return Tensor(std::move(impl));
}

Tensor empty(const Shape& shape, TensorOptions o) {
    const int64_t n = shape_numel(shape);
    const int64_t esz = dtype_size(o.dtype);
    EMBER_CHECK(n <= std::numeric_limits<int64_t>::max() / esz, "empty: shape ", shape_str(shape),
                " of ", dtype_name(o.dtype), " is too large");
    return make_tensor(make_storage(o.device, size_t(n * esz), o.pinned), shape,
                       contiguous_strides(shape), 0, o.dtype);
}

Tensor empty(const Shape& shape, TensorOptions o, MemoryFormat format) {
    const Shape strides = format_strides(shape, format);
    Tensor t = empty(shape, o);
    return make_tensor(t.storage(), shape, strides, 0, o.dtype);
}

Tensor from_blob(void* data, const Shape& shape, const Shape& strides, TensorOptions o,
                 std::function<void(void*)> deleter) {
    EMBER_CHECK(shape.size() == strides.size(), "from_blob: shape ", shape_str(shape),
                " and strides ", shape_str(strides), " differ in length");
    for (int64_t d : shape)
        EMBER_CHECK(d >= 0, "from_blob: negative size in shape ", shape_str(shape));
    const int64_t n = shape_numel(shape);
    EMBER_CHECK(data != nullptr || n == 0, "from_blob: null data for shape ", shape_str(shape));
    for (int64_t st : strides)
        EMBER_CHECK(st >= 0, "from_blob: negative stride in ", shape_str(strides));
    int64_t extent = n > 0 ? 1 : 0, nbytes = 0;  // elements spanned
    for (size_t i = 0; i < shape.size() && n > 0; ++i) {
        int64_t span = 0;
        EMBER_CHECK(!__builtin_mul_overflow(shape[i] - 1, strides[i], &span) &&
                        !__builtin_add_overflow(extent, span, &extent),
                    "from_blob: shape ", shape_str(shape), " with strides ", shape_str(strides),
                    " overflows");
    }
    // In bytes too (found by fuzzing: tests/fuzz).
    EMBER_CHECK(!__builtin_mul_overflow(extent, dtype_size(o.dtype), &nbytes), "from_blob: shape ",
                shape_str(shape), " with strides ", shape_str(strides), " spans ", extent,
                " elements of ", dtype_name(o.dtype), ", more bytes than int64 can count");
    return make_tensor(wrap_storage(data, size_t(nbytes), o.device, std::move(deleter)), shape,
                       strides, 0, o.dtype);
}

Tensor from_blob(void* data, const Shape& shape, TensorOptions o,
                 std::function<void(void*)> deleter) {
    return from_blob(data, shape, contiguous_strides(shape), o, std::move(deleter));
}

int64_t element_offset(const Tensor& t, const Shape& index, const char* op) {
    EMBER_CHECK(int64_t(index.size()) == t.dim(), op, ": index ", shape_str(index), " has ",
                index.size(), " entries for a tensor of shape ", shape_str(t.shape()));
    int64_t off = t.offset();
    for (size_t i = 0; i < index.size(); ++i) {
        int64_t k = index[i];
        const int64_t sz = t.shape()[i];
        EMBER_CHECK(k >= -sz && k < sz, op, ": index ", shape_str(index),
                    " out of range for shape ", shape_str(t.shape()));
        if (k < 0) k += sz;
        off += k * t.strides()[i];
    }
    return off;
}

namespace {

// The documented float -> integer rule (docs/dtypes.md): truncate, saturate, NaN -> 0.
template <class T>
T saturate(double v) {
    if (v != v) return T(0);
    if (v <= double(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return T(v);
}

}  // namespace

void Tensor::set(const Shape& index, double value) {
    EMBER_CHECK(device().is_cpu(), "set: tensor is on ", device(), "; only host tensors");
    const int64_t off = element_offset(*this, index, "set");
    visit_dtype(dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* p = static_cast<T*>(storage()->data()) + off;
        if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
            *p = T(float(value));
        else if constexpr (std::is_same_v<T, bool>)
            *p = value != 0.0;
        else if constexpr (std::is_integral_v<T>)
            *p = saturate<T>(value);
        else
            *p = T(value);
    });
    storage()->bump_version();
}

}  // namespace ember

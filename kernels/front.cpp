// Shared checks and conversions for the front functions.
#include "kernels/front.h"
#include "kernels/copy.h"

#include <algorithm>

#include "kernels/math.h"

namespace ember::kernels {

View view_of(const Tensor& t, const char* op) {
    EMBER_CHECK(t.defined(), op, ": undefined tensor");
    EMBER_CHECK(t.dim() <= kMaxDims, op, ": tensors of more than ", kMaxDims,
                " dims are not supported, got shape ", shape_str(t.shape()));
    View v;
    v.data = static_cast<char*>(t.data_ptr());
    v.dtype = t.dtype();
    v.ndim = int(t.dim());
    for (int i = 0; i < v.ndim; ++i) {
        v.shape[i] = t.shape()[size_t(i)];
        v.strides[i] = t.strides()[size_t(i)];
    }
    return v;
}

View broadcast_view(const Tensor& t, const Shape& shape, const char* op) {
    if (t.shape() == shape) return view_of(t, op);
    return view_of(views::expand(t, shape), op);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
    const size_t n = std::max(a.size(), b.size());
    Shape out(n);
    for (size_t i = 0; i < n; ++i) {
        const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
        EMBER_CHECK(da == db || da == 1 || db == 1, op, ": shapes ", shape_str(a), " and ",
                    shape_str(b), " cannot be broadcast together");
        out[i] = da == 1 ? db : da;
    }
    return out;
}

bool broadcastable(const Shape& a, const Shape& b) {
    for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
        const int64_t x = a[a.size() - i], y = b[b.size() - i];
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}

DType acc_dtype(DType d) {
    return visit_dtype(d, [](auto tag) { return dtype_of<math::Acc<typename decltype(tag)::type>>(); });
}

std::string describe(const Tensor& t) {
    if (!t.defined()) return "undefined";
    return str(dtype_name(t.dtype()), " ", shape_str(t.shape()), " on ", t.device());
}

void check_same_device(std::initializer_list<const Tensor*> ts, const char* op) {
    const Tensor* first = nullptr;
    for (const Tensor* t : ts) {
        EMBER_CHECK(t->defined(), op, ": undefined tensor argument");
        if (!first) {
            first = t;
            continue;
        }
        EMBER_CHECK(t->device() == first->device(), op, ": expected all tensors on one device, got ",
                    describe(*first), " and ", describe(*t));
    }
}

void check_floating(const Tensor& t, const char* op) {
    EMBER_CHECK(is_floating(t.dtype()), op, ": expected a floating-point tensor, got ",
                describe(t));
}

bool overlaps_differently(const Tensor& a, const Tensor& b) {
    return a.storage() == b.storage() &&
           !(a.shape() == b.shape() && a.strides() == b.strides() && a.offset() == b.offset());
}

Tensor unaliased(const Tensor& t, const Tensor& dst) {
    return overlaps_differently(dst, t) ? clone(t) : t;
}

}  // namespace ember::kernels

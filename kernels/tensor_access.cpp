// Tensor's element reads and printing (declared in core/tensor.h). They may
// copy from a device, so they live beside the copies, above core.
#include <ostream>
#include <type_traits>
#include <vector>

#include "core/host_sync.h"
#include "core/tensor.h"
#include "kernels/copy.h"
#include "kernels/front.h"

namespace ember {

namespace {

// Element `off` of `t` as a double; `op` names the read for the host-sync
// counter when it has to wait for a device.
double read_element(const Tensor& t, int64_t off, const char* op) {
    Tensor host = t;
    if (!t.device().is_cpu()) {  // copy that one element, not the tensor
        count_host_sync(op);
        const Tensor one = make_tensor(t.storage(), {}, {}, off, t.dtype());
        host = empty({}, {t.dtype(), Device::cpu()});
        kernels::copy(host, one);
    }
    const int64_t at = t.device().is_cpu() ? off : 0;
    return visit_dtype(t.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T v = static_cast<const T*>(host.storage()->data())[at];
        if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>)
            return double(float(v));
        else
            return double(v);
    });
}

}  // namespace

double Tensor::at(const Shape& index) const {
    return read_element(*this, element_offset(*this, index, "at"), "at");
}

double Tensor::item() const {
    EMBER_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ",
                shape_str(shape()));
    return read_element(*this, element_offset(*this, Shape(size_t(dim()), 0), "item"), "item");
}

template <class T>
std::vector<T> Tensor::to_vector() const {
    Tensor c = *this;
    if (!device().is_cpu() || dtype() != dtype_of<T>() || !is_contiguous()) {
        if (!device().is_cpu()) count_host_sync("to_vector");
        c = empty(shape(), {dtype_of<T>(), Device::cpu()});
        kernels::copy(c, *this);
    }
    const T* p = c.data<T>();
    return std::vector<T>(p, p + c.numel());
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

template <class T>
T Tensor::item() const {
    EMBER_CHECK(numel() == 1, "item: expected a tensor with one element, got shape ",
                shape_str(shape()));
    return to_vector<T>()[0];
}

template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;
template uint8_t Tensor::item<uint8_t>() const;

}  // namespace ember

// View: what a kernel sees of a tensor — a data pointer, a dtype, and up to
// kMaxDims sizes and strides (in elements). Kernel files take Views, never
// Tensors, so tests and benchmarks can call them on raw buffers.
#pragma once

#include <cstdint>

#include "../core/dtype.h"
#include "../core/macros.h"

namespace ember::kernels {

inline constexpr int kMaxDims = 12;

struct View {
    char* data = nullptr;  // address of element 0
    DType dtype = DType::f32;
    int ndim = 0;
    int64_t shape[kMaxDims] = {};
    int64_t strides[kMaxDims] = {};  // in elements; 0 for broadcast dims

    int64_t numel() const {  // sizes come from checked shapes: no overflow unless one is 0
        for (int i = 0; i < ndim; ++i)
            if (shape[i] == 0) return 0;
        int64_t n = 1;
        for (int i = 0; i < ndim; ++i) n *= shape[i];
        return n;
    }
    bool is_contiguous() const {
        if (numel() == 0) return true;
        int64_t expected = 1;
        for (int i = ndim - 1; i >= 0; --i) {
            if (shape[i] == 0) return true;
            if (shape[i] != 1 && strides[i] != expected) return false;
            expected *= shape[i];
        }
        return true;
    }
    template <class T>
    T* ptr() const {
        return reinterpret_cast<T*>(data);
    }
};

}  // namespace ember::kernels

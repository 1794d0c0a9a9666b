// What both backends' scatter_add share (kernels/cpu/index.cpp,
// kernels/cuda/index.cu and index_sorted.cu through kernels/cuda/
// index_plan.h), defined once so that their sums agree bit for bit: an
// operand seen without the scatter dim (one element per line along it), and
// the one scalar add every line folds with.
#pragma once

#include <type_traits>

#include "../core/macros.h"
#include "math.h"
#include "view.h"

namespace ember::kernels {

/// `v` without dim `dim`, seen through `shape`'s sizes (index's, also
/// without dim): one element per line along dim, its strides v's own.
inline View drop_dim(const View& v, int dim, const View& shape) {
    View r = v;
    r.ndim = 0;
    for (int d = 0; d < v.ndim; ++d) {
        if (d == dim) continue;
        r.shape[r.ndim] = shape.shape[d];
        r.strides[r.ndim++] = v.strides[d];
    }
    return r;
}

/// a + b as scatter_add adds: in Acc<T> for floats with one rounding back to
/// T, modulo 2^bits for integers (no signed overflow), `or` for bool.
template <class T>
EMBER_HD inline T scatter_add_step(T a, T b) {
    if constexpr (std::is_same_v<T, bool>) {
        return a || b;
    } else if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        return T(U(U(a) + U(b)));
    } else {
        return math::cast<T>(math::load(a) + math::load(b));
    }
}

}  // namespace ember::kernels

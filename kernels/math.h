// Scalar math shared by the CPU and CUDA backends: every elementwise op is an
// EMBER_HD functor here, applied by the CPU loop (kernels/cpu/loop.h) and the
// CUDA kernels alike, so the CPU tests check the math the GPU runs.
// Half types compute in f32 (`Acc<T>`); conversions are in core/half.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/half.h"
#include "core/macros.h"

namespace ember::math {

template <class T> struct AccType { using type = T; };
template <> struct AccType<Half> { using type = float; };
template <> struct AccType<BFloat16> { using type = float; };
/// The type arithmetic on T happens in: f32 for f16/bf16, T otherwise.
template <class T> using Acc = typename AccType<T>::type;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;
template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<T> || is_half_v<T>;

/// Converts between any two element types. Rules (docs/dtypes.md):
/// float -> integer truncates toward zero, saturates at the integer's range and
/// maps NaN to 0 (no undefined behaviour); anything -> bool is `x != 0`;
/// integer -> narrower integer wraps modulo 2^bits; f16/bf16 go through f32.
template <class To, class From>
EMBER_HD EMBER_INLINE To cast(From v) {
    if constexpr (std::is_same_v<To, From>) {
        return v;
    } else if constexpr (is_half_v<From>) {
        return cast<To>(float(v));
    } else if constexpr (is_half_v<To>) {
        return To(float(v));
    } else if constexpr (std::is_same_v<To, bool>) {
        return v != From(0);
    } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
        if (v != v) return To(0);
        constexpr From lo = From(std::numeric_limits<To>::min());
        // max() of a 64-bit integer is not representable; compare against 2^bits.
        constexpr From hi = From(std::numeric_limits<To>::max()) + From(1);
        if (v <= lo) return std::numeric_limits<To>::min();
        if (v >= hi) return std::numeric_limits<To>::max();
        return To(v);
    } else {
        return To(v);
    }
}

/// Loads T as its accumulation type.
template <class T>
EMBER_HD EMBER_INLINE Acc<T> load(T v) {
    return cast<Acc<T>>(v);
}

}  // namespace ember::math

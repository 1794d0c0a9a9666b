// Element types, their sizes and names, type promotion, and the one dtype
// switch (`visit_dtype`) every front function uses to pick a template.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "error.h"
#include "half.h"

namespace ember {

/// The element types ember stores. f16/bf16 are computed in f32.
enum class DType : uint8_t { f32, f64, f16, bf16, i32, i64, u8, boolean };

inline constexpr int kNumDTypes = 8;

/// Bytes per element.
constexpr int64_t dtype_size(DType t) {
    switch (t) {
        case DType::f64:
        case DType::i64: return 8;
        case DType::f32:
        case DType::i32: return 4;
        case DType::f16:
        case DType::bf16: return 2;
        case DType::u8:
        case DType::boolean: return 1;
    }
    return 0;
}

/// "f32", "bool", ... as printed in error messages.
const char* dtype_name(DType t);
/// Parses a name printed by dtype_name (also "float32", "float16", "bfloat16", ...).
DType dtype_from_name(const std::string& name);

constexpr bool is_floating(DType t) {
    return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}
constexpr bool is_integral(DType t) {  // bool excluded
    return t == DType::i32 || t == DType::i64 || t == DType::u8;
}

/// Result dtype of a binary op on tensors of dtypes a and b, as in PyTorch:
/// bool < integers < floating point; within a category the wider type wins;
/// f16 with bf16 gives f32; u8 with i32 gives i32.
DType promote_types(DType a, DType b);

/// Result dtype of a binary op between a tensor and a Python-like scalar:
/// the scalar does not widen the tensor's dtype unless it is of a higher
/// category (float scalar with an integer tensor gives f32; an integer scalar
/// with a bool tensor gives i64).
DType promote_with_scalar(DType tensor, bool scalar_is_floating);

std::ostream& operator<<(std::ostream& os, DType t);

/// C++ element type for each DType.
template <DType D> struct CppType;
template <> struct CppType<DType::f32> { using type = float; };
template <> struct CppType<DType::f64> { using type = double; };
template <> struct CppType<DType::f16> { using type = Half; };
template <> struct CppType<DType::bf16> { using type = BFloat16; };
template <> struct CppType<DType::i32> { using type = int32_t; };
template <> struct CppType<DType::i64> { using type = int64_t; };
template <> struct CppType<DType::u8> { using type = uint8_t; };
template <> struct CppType<DType::boolean> { using type = bool; };

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<Half>() { return DType::f16; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::bf16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::i32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::i64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::u8; }
template <> constexpr DType dtype_of<bool>() { return DType::boolean; }

/// Tag passed to visit_dtype's callable; `typename decltype(tag)::type` is the element type.
template <class T> struct TypeTag { using type = T; };

/// Calls f(TypeTag<T>{}) with T the element type of `t`. The single dtype switch.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
    switch (t) {
        case DType::f32: return f(TypeTag<float>{});
        case DType::f64: return f(TypeTag<double>{});
        case DType::f16: return f(TypeTag<Half>{});
        case DType::bf16: return f(TypeTag<BFloat16>{});
        case DType::i32: return f(TypeTag<int32_t>{});
        case DType::i64: return f(TypeTag<int64_t>{});
        case DType::u8: return f(TypeTag<uint8_t>{});
        case DType::boolean: return f(TypeTag<bool>{});
    }
    EMBER_FAIL("internal error: invalid dtype ", int(t));
}

/// Like visit_dtype, restricted to the floating dtypes; `op` names the caller in the error.
template <class F>
decltype(auto) visit_floating(DType t, const char* op, F&& f) {
    switch (t) {
        case DType::f32: return f(TypeTag<float>{});
        case DType::f64: return f(TypeTag<double>{});
        case DType::f16: return f(TypeTag<Half>{});
        case DType::bf16: return f(TypeTag<BFloat16>{});
        default: break;
    }
    EMBER_FAIL(op, ": expected a floating dtype (f32, f64, f16, bf16), got ", dtype_name(t));
}

}  // namespace ember

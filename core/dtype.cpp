// DType names and promotion rules.
#include "core/dtype.h"

namespace ember {

const char* dtype_name(DType t) {
    switch (t) {
        case DType::f32: return "f32";
        case DType::f64: return "f64";
        case DType::f16: return "f16";
        case DType::bf16: return "bf16";
        case DType::i32: return "i32";
        case DType::i64: return "i64";
        case DType::u8: return "u8";
        case DType::boolean: return "bool";
    }
    return "invalid";
}

DType dtype_from_name(const std::string& n) {
    if (n == "f32" || n == "float32" || n == "float") return DType::f32;
    if (n == "f64" || n == "float64" || n == "double") return DType::f64;
    if (n == "f16" || n == "float16" || n == "half") return DType::f16;
    if (n == "bf16" || n == "bfloat16") return DType::bf16;
    if (n == "i32" || n == "int32") return DType::i32;
    if (n == "i64" || n == "int64") return DType::i64;
    if (n == "u8" || n == "uint8") return DType::u8;
    if (n == "bool") return DType::boolean;
    EMBER_FAIL("unknown dtype '", n, "' (expected one of f32, f64, f16, bf16, i32, i64, u8, bool)");
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

namespace {
int category(DType t) { return t == DType::boolean ? 0 : is_integral(t) ? 1 : 2; }
}  // namespace

DType promote_types(DType a, DType b) {
    if (a == b) return a;
    const int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if (ca == 2) {
        if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16))
            return DType::f32;
        return dtype_size(a) >= dtype_size(b) ? a : b;
    }
    // Integers: u8 is unsigned, the others signed and wider, so the wider wins.
    return dtype_size(a) >= dtype_size(b) ? a : b;
}

DType promote_with_scalar(DType tensor, bool scalar_is_floating) {
    if (scalar_is_floating) return is_floating(tensor) ? tensor : DType::f32;
    return tensor == DType::boolean ? DType::i64 : tensor;
}

}  // namespace ember

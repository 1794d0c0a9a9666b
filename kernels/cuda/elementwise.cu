// CUDA elementwise kernels: unary math, clamp, binary arithmetic (tensor or
// scalar right operand), comparisons and where. Each op applies its functor
// from kernels/math.h — the very code the CPU twin kernels/cpu/elementwise.cpp
// runs — through cuda::map (kernels/cuda/loop.cuh): 16-byte vector loads when
// dense, an offset calculator when strided or broadcast.
// Math: out[i] = f(in[i], ...) in Acc<T> (f32 for f16/bf16). Dtypes as the CPU twin.
// Bytes per element (s = dtype size): unary, clamp, scalar binary 2s; binary 3s;
// compare 2s + 1; where 3s + 1. FLOPs: 1-2 for arithmetic, ~10-30 for
// transcendental ops (all memory-bound on a GPU). Launch: grid-stride, 256
// threads; deterministic. Test: tests/cuda/test_cuda_elementwise.cpp; bench:
// `ember bench elementwise` (GPU rows on a machine with a device).
#include <cmath>
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/loop.cuh"

namespace ember::kernels::cuda {

namespace {

using math::Acc;

// Compare and where produce or consume bool; Apply would cast through Acc, so
// comparisons get their own adaptor that loads and compares.
template <class Op>
struct CompareApply {
    Op op;
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return op(math::load(a), math::load(b));
    }
};

template <class Op>
struct CompareScalarApply {
    Op op;
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a) const {
        return op(math::load(a));
    }
};

struct WhereBytes {  // the condition read as bytes, as on the CPU
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(uint8_t c, T a, T b) const {
        return math::Where{}(c != 0, a, b);
    }
};

template <class Op>
void unary_typed(const View& out, const View& in, Op op, bool floating_only) {
    auto body = [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
            EMBER_INTERNAL_ASSERT(!"bool reached a numeric-only CUDA elementwise kernel");
        } else {
            map<T, T>(out, Apply<T, Op>{op}, in);
        }
    };
    if (floating_only) visit_floating(in.dtype, "cuda elementwise (internal error)", body);
    else visit_dtype(in.dtype, body);
}

template <class Op>
void binary_typed(const View& out, const View& a, const View& b, Op op, bool floating_only,
                  bool allow_bool) {
    auto body = [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
            if (!allow_bool) EMBER_INTERNAL_ASSERT(!"bool reached a numeric-only CUDA kernel");
            else map<T, T, T>(out, Apply<T, Op>{op}, a, b);
        } else {
            map<T, T, T>(out, Apply<T, Op>{op}, a, b);
        }
    };
    if (floating_only) visit_floating(a.dtype, "cuda elementwise (internal error)", body);
    else visit_dtype(a.dtype, body);
}

}  // namespace

void unary(UnaryOp op, const View& out, const View& in, int device) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    switch (op) {
        case UnaryOp::neg: return unary_typed(out, in, math::Neg{}, false);
        case UnaryOp::abs: return unary_typed(out, in, math::Abs{}, false);
        case UnaryOp::relu: return unary_typed(out, in, math::Relu{}, false);
        case UnaryOp::exp: return unary_typed(out, in, math::Exp{}, true);
        case UnaryOp::log: return unary_typed(out, in, math::Log{}, true);
        case UnaryOp::sqrt: return unary_typed(out, in, math::Sqrt{}, true);
        case UnaryOp::rsqrt: return unary_typed(out, in, math::Rsqrt{}, true);
        case UnaryOp::gelu: return unary_typed(out, in, math::Gelu{}, true);
        case UnaryOp::gelu_tanh: return unary_typed(out, in, math::GeluTanh{}, true);
        case UnaryOp::sigmoid: return unary_typed(out, in, math::Sigmoid{}, true);
        case UnaryOp::tanh: return unary_typed(out, in, math::Tanh{}, true);
    }
    EMBER_INTERNAL_ASSERT(!"invalid UnaryOp");
}

void clamp(const View& out, const View& in, double lo, double hi, int device) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    visit_dtype(in.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_same_v<T, bool>) {
            EMBER_INTERNAL_ASSERT(!"bool reached CUDA clamp");
        } else {
            // Integers: the nearest integers inside [lo, hi] (as the CPU twin).
            const double l = std::is_integral_v<T> ? std::ceil(lo) : lo;
            const double h = std::is_integral_v<T> ? std::floor(hi) : hi;
            using C = math::Clamp<Acc<T>>;
            map<T, T>(out, Apply<T, C>{C{math::cast<Acc<T>>(l), math::cast<Acc<T>>(h)}}, in);
        }
    });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b, int device) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype && a.dtype == b.dtype);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    switch (op) {
        case BinaryOp::add: return binary_typed(out, a, b, math::Add{}, false, true);
        case BinaryOp::sub: return binary_typed(out, a, b, math::Sub{}, false, false);
        case BinaryOp::mul: return binary_typed(out, a, b, math::Mul{}, false, true);
        case BinaryOp::div: return binary_typed(out, a, b, math::Div{}, true, false);
        case BinaryOp::pow: return binary_typed(out, a, b, math::Pow{}, false, false);
        case BinaryOp::maximum: return binary_typed(out, a, b, math::Maximum{}, false, true);
        case BinaryOp::minimum: return binary_typed(out, a, b, math::Minimum{}, false, true);
    }
    EMBER_INTERNAL_ASSERT(!"invalid BinaryOp");
}

void binary_scalar(BinaryOp op, const View& out, const View& a, double s, int device) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    visit_floating(a.dtype, "cuda binary_scalar (internal error)", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const A v = math::cast<A>(s);
        auto with = [&](auto f) {
            using R = math::RightScalar<decltype(f), A>;
            map<T, T>(out, Apply<T, R>{R{f, v}}, a);
        };
        switch (op) {
            case BinaryOp::add: return with(math::Add{});
            case BinaryOp::sub: return with(math::Sub{});
            case BinaryOp::mul: return with(math::Mul{});
            case BinaryOp::div: return with(math::Div{});
            case BinaryOp::pow: return with(math::Pow{});
            case BinaryOp::maximum: return with(math::Maximum{});
            case BinaryOp::minimum: return with(math::Minimum{});
        }
        EMBER_INTERNAL_ASSERT(!"invalid BinaryOp");
    });
}

void compare(CompareOp op, const View& out, const View& a, const View& b, int device) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean && a.dtype == b.dtype);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    visit_dtype(a.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        auto with = [&](auto f) { map<bool, T, T>(out, CompareApply<decltype(f)>{f}, a, b); };
        switch (op) {
            case CompareOp::eq: return with(math::Eq{});
            case CompareOp::ne: return with(math::Ne{});
            case CompareOp::lt: return with(math::Lt{});
            case CompareOp::le: return with(math::Le{});
            case CompareOp::gt: return with(math::Gt{});
            case CompareOp::ge: return with(math::Ge{});
        }
        EMBER_INTERNAL_ASSERT(!"invalid CompareOp");
    });
}

void compare_scalar(CompareOp op, const View& out, const View& a, double s, int device) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    visit_floating(a.dtype, "cuda compare_scalar (internal error)", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const A v = math::cast<A>(s);
        auto with = [&](auto f) {
            using R = math::RightScalar<decltype(f), A>;
            map<bool, T>(out, CompareScalarApply<R>{R{f, v}}, a);
        };
        switch (op) {
            case CompareOp::eq: return with(math::Eq{});
            case CompareOp::ne: return with(math::Ne{});
            case CompareOp::lt: return with(math::Lt{});
            case CompareOp::le: return with(math::Le{});
            case CompareOp::gt: return with(math::Gt{});
            case CompareOp::ge: return with(math::Ge{});
        }
        EMBER_INTERNAL_ASSERT(!"invalid CompareOp");
    });
}

void where(const View& out, const View& cond, const View& a, const View& b, int device) {
    EMBER_INTERNAL_ASSERT(cond.dtype == DType::boolean && out.dtype == a.dtype &&
                          a.dtype == b.dtype);
    EMBER_CUDA_CHECK(cudaSetDevice(device));
    View c = cond;
    c.dtype = DType::u8;  // same bytes; see WhereBytes
    visit_dtype(out.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        map<T, uint8_t, T, T>(out, WhereBytes{}, c, a, b);
    });
}

}  // namespace ember::kernels::cuda

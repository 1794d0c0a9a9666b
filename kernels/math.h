// Scalar math shared by the CPU and CUDA backends: every elementwise op is an
// EMBER_HD functor here, applied by the CPU loop (kernels/cpu/loop.h) and the
// CUDA kernels alike, so the CPU tests check the math the GPU runs.
// Half types compute in f32 (`Acc<T>`); conversions are in core/half.h.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "../core/dtype.h"
#include "../core/half.h"
#include "../core/macros.h"

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

/// exp(x) for x <= 0 (softmax's exp(x - max)). On the host, f32 without a
/// libm call, so loops over it vectorize (glibc's vector expf needs
/// -ffast-math): x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so
/// n * kLn2Hi is exact), exp(r) by its degree-7 Taylor polynomial (truncation
/// < 1e-8 relative), 2^n written into the exponent bits. Error under 1.3 ulp
/// over [-87.3, 0] (tests/kernels/test_math.cpp). Below ln(FLT_MIN) = -87.3365
/// the result (subnormal in libm) is flushed to 0: a softmax term under
/// 1.2e-38 of the largest. NaN stays NaN. n is rounded by adding and
/// removing 1.5 * 2^23, not std::floor, which GCC 12 does not vectorize.
/// On the device, the hardware's __expf (about 2 ulp), also flushing below
/// FLT_MIN: the two agree within a few ulp, not bit for bit.
EMBER_HD EMBER_INLINE float exp_nonpositive(float x) {
#if defined(__CUDA_ARCH__)
    return x > -87.3365f ? __expf(x) : (x != x ? x : 0.0f);
#else
    constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;
    constexpr float kRound = 12582912.0f;            // 1.5 * 2^23: float spacing 1 around it
    const float xc = x > -87.3365f ? x : -87.3365f;  // also maps NaN to a finite value
    const float n = (xc * kLog2e + kRound) - kRound;
    const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const float scale = std::bit_cast<float>((int32_t(n) + 127) << 23);
    const float y = p * scale;
    return x != x ? x : x > -87.3365f ? y : 0.0f;
#endif
}
EMBER_HD EMBER_INLINE double exp_nonpositive(double x) { return std::exp(x); }

}  // namespace ember::math

// ---- Elementwise ops ------------------------------------------------------
// Each functor's operator() takes the accumulation type (Acc<T>) of the
// tensor's dtype; the backends load, apply and cast back. No exceptions, no
// host-only calls: these compile as CUDA device code unchanged.

namespace ember::kernels {

/// The elementwise families' ops; the front picks one, each backend's switch
/// maps it to the functor below of the same name.
enum class UnaryOp { neg, abs, exp, log, sqrt, rsqrt, relu, gelu, gelu_tanh, sigmoid, tanh, silu };
enum class BinaryOp {
    add, sub, mul, div, pow, maximum, minimum,
    // Activation backwards, (grad, saved) -> grad_input: one pass instead of three.
    relu_backward, gelu_backward, gelu_tanh_backward, sigmoid_backward, tanh_backward,
    silu_backward
};
enum class CompareOp { eq, ne, lt, le, gt, ge };

}  // namespace ember::kernels

namespace ember::math {

/// Integer types whose arithmetic wraps modulo 2^bits in ember (bool excluded).
template <class T>
inline constexpr bool is_wrapping_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Note [Integer overflow]: ember's integer arithmetic wraps (two's complement),
// as PyTorch's does in practice. Signed overflow is undefined in C++, so the
// integer paths compute in the unsigned type of the same width, where wrapping
// is defined; the conversion back is modular since C++20. The unsigned forms
// vectorize exactly like the signed ones.
template <class T>
using Wrap = std::make_unsigned_t<T>;

struct Add {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T a, T b) const {
        if constexpr (std::is_same_v<T, bool>)
            return a || b;
        else if constexpr (is_wrapping_v<T>)
            return T(Wrap<T>(a) + Wrap<T>(b));
        else
            return a + b;
    }
};

struct Sub {  // bool is rejected by the front
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T a, T b) const {
        if constexpr (is_wrapping_v<T>)
            return T(Wrap<T>(a) - Wrap<T>(b));
        else
            return a - b;
    }
};

struct Mul {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T a, T b) const {
        if constexpr (std::is_same_v<T, bool>)
            return a && b;
        else if constexpr (is_wrapping_v<T>)
            return T(Wrap<T>(a) * Wrap<T>(b));
        else
            return a * b;
    }
};

struct Div {  // true division: the front computes integer inputs in f32
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T a, T b) const {
        return a / b;
    }
};

/// Integer power by squaring, wrapping on overflow. A negative exponent gives
/// the truncated 1 / base^-e: 1 for base 1, ±1 for base -1, else 0 (device
/// code cannot raise PyTorch's error).
template <class T>
EMBER_HD EMBER_INLINE T int_pow(T base, T e) {
    if constexpr (std::is_signed_v<T>) {
        if (e < 0) return base == 1 ? T(1) : base == -1 ? ((e & 1) ? T(-1) : T(1)) : T(0);
    }
    Wrap<T> result = 1, b = Wrap<T>(base);
    for (; e != 0; e = T(e >> 1)) {
        if (e & 1) result = Wrap<T>(result * b);
        b = Wrap<T>(b * b);
    }
    return T(result);
}

struct Pow {  // bool is rejected by the front
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T a, T b) const {
        if constexpr (is_wrapping_v<T>)
            return int_pow(a, b);
        else
            return std::pow(a, b);
    }
};

// maximum/minimum propagate NaN (as torch.maximum does); `a != a` is the NaN
// test that also compiles to a vector compare. The select has no branch.
struct Maximum {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T a, T b) const {
        if constexpr (std::is_floating_point_v<T>)
            return (a > b || a != a) ? a : b;
        else
            return a > b ? a : b;
    }
};

struct Minimum {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T a, T b) const {
        if constexpr (std::is_floating_point_v<T>)
            return (a < b || a != a) ? a : b;
        else
            return a < b ? a : b;
    }
};

struct Neg {  // bool is rejected by the front
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        if constexpr (is_wrapping_v<T>)
            return T(Wrap<T>(0) - Wrap<T>(x));
        else
            return -x;
    }
};

struct Abs {  // abs(INT_MIN) wraps to INT_MIN, as in PyTorch
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        if constexpr (std::is_unsigned_v<T>)
            return x;
        else if constexpr (is_wrapping_v<T>)
            return x < 0 ? Neg{}(x) : x;
        else
            return std::abs(x);
    }
};

/// max(x, 0) with NaN propagated (relu(NaN) = NaN, as in PyTorch): the
/// comparison is false for NaN, so x passes through.
struct Relu {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        if constexpr (std::is_unsigned_v<T>)
            return x;
        else
            return x < T(0) ? T(0) : x;
    }
};

/// Clamp to [lo, hi]; an absent bound is ±inf or the integer's limit. NaN
/// passes through; lo > hi gives hi (as torch.clamp).
template <class T>
struct Clamp {
    T lo, hi;
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        const T y = x < lo ? lo : x;
        return y > hi ? hi : y;
    }
};

struct Exp {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return std::exp(x);
    }
};

struct Log {  // log(0) = -inf, log(x < 0) = NaN
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return std::log(x);
    }
};

struct Sqrt {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return std::sqrt(x);
    }
};

struct Rsqrt {  // rsqrt(0) = inf
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return T(1) / std::sqrt(x);
    }
};

struct Sigmoid {  // exp(-x) overflows to inf for x < -88 (f32), giving exactly 0
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return T(1) / (T(1) + std::exp(-x));
    }
};

/// SiLU (swish): x·sigmoid(x) = x / (1 + exp(−x)); for very negative x the
/// exp overflows to inf and the result is −0, the limit.
struct Silu {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return x / (T(1) + std::exp(-x));
    }
};

struct Tanh {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return std::tanh(x);
    }
};

/// Exact GELU: x * Phi(x) = 0.5 x (1 + erf(x / sqrt(2))).
struct Gelu {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
    }
};

/// GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3),
/// computed as the identical x * sigmoid(2u), the sigmoid from e = exp(-|2u|)
/// (1/(1 + e) for u >= 0, e/(1 + e) below): exp_nonpositive has no libm
/// call, so the CPU loop vectorizes (std::tanh and std::exp do not). As the
/// tanh form: -> 0 for very negative x, -> x for large x, inf at inf, NaN at -inf.
struct GeluTanh {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T x) const {
        const T two_u = T(1.5957691216057307118) * (x + T(0.044715) * x * x * x);
        const T e = exp_nonpositive(two_u < T(0) ? two_u : -two_u);
        return x * (two_u >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e));
    }
};

// Activation backwards: (g, saved) -> dL/dx. `saved` is the op's output y for
// relu/sigmoid/tanh and its input x for the GELUs and SiLU.
struct ReluBackward {  // g where y > 0 (PyTorch's convention: 0 at the kink)
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T g, T y) const {
        return y > T(0) ? g : T(0);
    }
};

/// d/dx x·Φ(x) = Φ(x) + x·φ(x), φ the standard normal density.
struct GeluBackward {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T g, T x) const {
        const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
        const T pdf = T(0.39894228040143267794) * std::exp(T(-0.5) * x * x);
        return g * (cdf + x * pdf);
    }
};

/// d/dx 0.5·x·(1 + tanh(u)) = 0.5·(1 + t) + 0.5·x·(1 − t²)·u', u = √(2/π)(x + 0.044715x³).
/// t = sign(u)·(1 − e)/(1 + e) with e = exp(−2|u|) (vectorizes, as GeluTanh);
/// near u = 0 it loses relative precision in t, not in the result, where t
/// only shifts 1 by at most its own size.
struct GeluTanhBackward {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T g, T x) const {
        const T k = T(0.79788456080286535588);
        const T u = k * (x + T(0.044715) * x * x * x);
        const T du = k * (T(1) + T(3) * T(0.044715) * x * x);
        const T au = u < T(0) ? -u : u;
        const T e = exp_nonpositive(T(-2) * au);
        const T ta = (T(1) - e) / (T(1) + e);
        const T t = u < T(0) ? -ta : ta;
        return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
    }
};

struct SigmoidBackward {  // g·y·(1 − y)
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T g, T y) const {
        return g * y * (T(1) - y);
    }
};

/// d/dx x·σ(x) = σ(x)·(1 + x·(1 − σ(x))); the saved tensor is the input x.
struct SiluBackward {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T g, T x) const {
        const T s = T(1) / (T(1) + std::exp(-x));
        return g * s * (T(1) + x * (T(1) - s));
    }
};

struct TanhBackward {  // g·(1 − y²)
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(T g, T y) const {
        return g * (T(1) - y * y);
    }
};

// Comparisons return bool; NaN compares unequal to everything (IEEE).
struct Eq {
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return a == b;
    }
};
struct Ne {
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return a != b;
    }
};
struct Lt {
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return a < b;
    }
};
struct Le {
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return a <= b;
    }
};
struct Gt {
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return a > b;
    }
};
struct Ge {
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return a >= b;
    }
};

/// cond ? a : b on stored values (no conversion, so it works on f16/bf16 bits).
struct Where {
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(bool cond, T a, T b) const {
        return cond ? a : b;
    }
};

/// A binary functor with its right operand fixed to a scalar: add(t, 2.0)
/// without a broadcast tensor for the 2.0.
template <class F, class S>
struct RightScalar {
    F f;
    S s;
    template <class T>
    EMBER_HD EMBER_INLINE auto operator()(T a) const {
        return f(a, s);
    }
};

// ---- Op enum -> functor: the one place each op's math is chosen ----
// Both backends call these, so an op cannot mean one thing on the CPU and
// another on CUDA. Host-only (they run before the kernel launch).

/// Which dtypes an op's functor accepts; the front rejects the others with a
/// user error, so the backends instantiate each functor only for these.
enum class Accepts { all, numeric, floating };  // numeric: every dtype but bool

template <class F> inline constexpr Accepts accepts_v = Accepts::all;
template <> inline constexpr Accepts accepts_v<Neg> = Accepts::numeric;
template <> inline constexpr Accepts accepts_v<Abs> = Accepts::numeric;
template <> inline constexpr Accepts accepts_v<Relu> = Accepts::numeric;
template <> inline constexpr Accepts accepts_v<Sub> = Accepts::numeric;
template <> inline constexpr Accepts accepts_v<Pow> = Accepts::numeric;
template <> inline constexpr Accepts accepts_v<Div> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Exp> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Log> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Sqrt> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Rsqrt> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Gelu> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<GeluTanh> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Sigmoid> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Tanh> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<Silu> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<ReluBackward> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<GeluBackward> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<GeluTanhBackward> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<SigmoidBackward> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<TanhBackward> = Accepts::floating;
template <> inline constexpr Accepts accepts_v<SiluBackward> = Accepts::floating;

/// body(TypeTag<T>{}) for dtype d, instantiated only for the dtypes A allows.
/// Reaching another dtype is a bug in ember (the front checks first).
template <Accepts A, class Body>
void visit_accepted(DType d, Body&& body) {
    if constexpr (A == Accepts::floating) {
        visit_floating(d, "elementwise kernel (internal error)", body);
    } else {
        visit_dtype(d, [&](auto tag) {
            if constexpr (A == Accepts::numeric &&
                          std::is_same_v<typename decltype(tag)::type, bool>)
                EMBER_INTERNAL_ASSERT(!"bool reached a numeric-only elementwise kernel");
            else
                body(tag);
        });
    }
}

/// f(functor) for the op's functor.
template <class F>
decltype(auto) visit_op(kernels::UnaryOp op, F&& f) {
    using U = kernels::UnaryOp;
    switch (op) {
        case U::neg: return f(Neg{});
        case U::abs: return f(Abs{});
        case U::exp: return f(Exp{});
        case U::log: return f(Log{});
        case U::sqrt: return f(Sqrt{});
        case U::rsqrt: return f(Rsqrt{});
        case U::relu: return f(Relu{});
        case U::gelu: return f(Gelu{});
        case U::gelu_tanh: return f(GeluTanh{});
        case U::sigmoid: return f(Sigmoid{});
        case U::silu: return f(Silu{});
        case U::tanh: return f(Tanh{});
    }
    __builtin_unreachable();
}

template <class F>
decltype(auto) visit_op(kernels::BinaryOp op, F&& f) {
    using B = kernels::BinaryOp;
    switch (op) {
        case B::add: return f(Add{});
        case B::sub: return f(Sub{});
        case B::mul: return f(Mul{});
        case B::div: return f(Div{});
        case B::pow: return f(Pow{});
        case B::maximum: return f(Maximum{});
        case B::minimum: return f(Minimum{});
        case B::relu_backward: return f(ReluBackward{});
        case B::gelu_backward: return f(GeluBackward{});
        case B::gelu_tanh_backward: return f(GeluTanhBackward{});
        case B::sigmoid_backward: return f(SigmoidBackward{});
        case B::silu_backward: return f(SiluBackward{});
        case B::tanh_backward: return f(TanhBackward{});
    }
    __builtin_unreachable();
}

template <class F>
decltype(auto) visit_op(kernels::CompareOp op, F&& f) {
    using C = kernels::CompareOp;
    switch (op) {
        case C::eq: return f(Eq{});
        case C::ne: return f(Ne{});
        case C::lt: return f(Lt{});
        case C::le: return f(Le{});
        case C::gt: return f(Gt{});
        case C::ge: return f(Ge{});
    }
    __builtin_unreachable();
}

}  // namespace ember::math

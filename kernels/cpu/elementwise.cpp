// CPU elementwise kernels: unary math, clamp, binary arithmetic (tensor or
// scalar right operand), comparisons and where. Each op is one lambda over
// cpu::map (kernels/cpu/loop.h) applying its functor from kernels/math.h, so
// the CUDA backend runs the same scalar math.
// Math: out[i] = f(in[i], ...), computed in Acc<T> (f32 for f16/bf16).
// Dtypes: div and exp/log/sqrt/rsqrt/gelu/sigmoid/tanh floating only; sub,
// pow, neg, abs, relu, clamp all but bool; the rest all eight. Inputs share
// the output's dtype (the front casts); comparisons write bool.
// Bytes per element (s = dtype size): unary, clamp and scalar binary 2s;
// binary 3s; compare 2s + 1 (scalar: s + 1); where 3s + 1.
// FLOPs per element: 1 for arithmetic, compare, relu, clamp (2); about 10-30
// for exp, log, tanh, erf, sigmoid and gelu (libm calls, not vectorized by GCC
// without -ffast-math: compute-bound, see docs/elementwise.md).
// Test: tests/kernels/test_elementwise.cpp. Benchmark: bench/elementwise.cpp.
#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "kernels/cpu/loop.h"

namespace ember::kernels::cpu {

namespace {

using math::Acc;

// out = f(in): load to the accumulation type, apply, round back. For f32 the
// loads and casts are identities and the dense loop vectorizes.
template <class T, class F>
void map_unary(const View& out, const View& in, F f) {
    map<T, T>(
        out, [f](T x) { return math::cast<T>(f(math::load(x))); }, in);
}

template <class T, class F>
void map_binary(const View& out, const View& a, const View& b, F f) {
    map<T, T, T>(
        out, [f](T x, T y) { return math::cast<T>(f(math::load(x), math::load(y))); }, a, b);
}

template <class T, class F>
void map_compare(const View& out, const View& a, const View& b, F f) {
    map<bool, T, T>(
        out, [f](T x, T y) { return f(math::load(x), math::load(y)); }, a, b);
}

// Dtype switches by what an op accepts. The front has rejected the other
// dtypes with a user-facing error, so reaching one here is a bug in ember.
template <class Body>
void on_floating(DType d, Body&& body) {
    visit_floating(d, "elementwise kernel (internal error)", body);
}

template <class Body>
void on_numeric(DType d, Body&& body) {
    visit_dtype(d, [&](auto tag) {
        if constexpr (std::is_same_v<typename decltype(tag)::type, bool>)
            EMBER_INTERNAL_ASSERT(!"bool reached a numeric-only elementwise kernel");
        else
            body(tag);
    });
}

template <class F>
void unary_numeric(const View& out, const View& in, F f) {
    on_numeric(in.dtype, [&]<class T>(TypeTag<T>) { map_unary<T>(out, in, f); });
}

template <class F>
void unary_floating(const View& out, const View& in, F f) {
    on_floating(in.dtype, [&]<class T>(TypeTag<T>) { map_unary<T>(out, in, f); });
}

template <class F>
void binary_any(const View& out, const View& a, const View& b, F f) {
    visit_dtype(a.dtype, [&]<class T>(TypeTag<T>) { map_binary<T>(out, a, b, f); });
}

template <class F>
void binary_numeric(const View& out, const View& a, const View& b, F f) {
    on_numeric(a.dtype, [&]<class T>(TypeTag<T>) { map_binary<T>(out, a, b, f); });
}

template <class F>
void binary_floating(const View& out, const View& a, const View& b, F f) {
    on_floating(a.dtype, [&]<class T>(TypeTag<T>) { map_binary<T>(out, a, b, f); });
}

}  // namespace

void unary(UnaryOp op, const View& out, const View& in) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    switch (op) {
        case UnaryOp::neg: return unary_numeric(out, in, math::Neg{});
        case UnaryOp::abs: return unary_numeric(out, in, math::Abs{});
        case UnaryOp::relu: return unary_numeric(out, in, math::Relu{});
        // perf: exp, log, tanh, erf, sigmoid and gelu call scalar libm per element (GCC
        // vectorizes them only with -ffast-math): compute-bound, ~1/4 of the copy limit.
        case UnaryOp::exp: return unary_floating(out, in, math::Exp{});
        case UnaryOp::log: return unary_floating(out, in, math::Log{});
        case UnaryOp::sqrt: return unary_floating(out, in, math::Sqrt{});
        case UnaryOp::rsqrt: return unary_floating(out, in, math::Rsqrt{});
        case UnaryOp::gelu: return unary_floating(out, in, math::Gelu{});
        case UnaryOp::gelu_tanh: return unary_floating(out, in, math::GeluTanh{});
        case UnaryOp::sigmoid: return unary_floating(out, in, math::Sigmoid{});
        case UnaryOp::tanh: return unary_floating(out, in, math::Tanh{});
    }
    EMBER_INTERNAL_ASSERT(!"invalid UnaryOp");
}

void clamp(const View& out, const View& in, double lo, double hi) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    on_numeric(in.dtype, [&]<class T>(TypeTag<T>) {
        // Integers: the nearest integers inside [lo, hi]; cast saturates ±inf.
        const double l = std::is_integral_v<T> ? std::ceil(lo) : lo;
        const double h = std::is_integral_v<T> ? std::floor(hi) : hi;
        map_unary<T>(out, in, math::Clamp<Acc<T>>{math::cast<Acc<T>>(l), math::cast<Acc<T>>(h)});
    });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype && a.dtype == b.dtype);
    switch (op) {
        case BinaryOp::add: return binary_any(out, a, b, math::Add{});
        case BinaryOp::sub: return binary_numeric(out, a, b, math::Sub{});
        case BinaryOp::mul: return binary_any(out, a, b, math::Mul{});
        case BinaryOp::div: return binary_floating(out, a, b, math::Div{});
        case BinaryOp::pow: return binary_numeric(out, a, b, math::Pow{});
        case BinaryOp::maximum: return binary_any(out, a, b, math::Maximum{});
        case BinaryOp::minimum: return binary_any(out, a, b, math::Minimum{});
    }
    EMBER_INTERNAL_ASSERT(!"invalid BinaryOp");
}

void binary_scalar(BinaryOp op, const View& out, const View& a, double s) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype);
    on_floating(a.dtype, [&]<class T>(TypeTag<T>) {
        const Acc<T> v = math::cast<Acc<T>>(s);
        // The functor carries the scalar: no broadcast tensor is made for it.
        auto with = [&]<class F>(F f) { map_unary<T>(out, a, math::RightScalar<F, Acc<T>>{f, v}); };
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

void compare(CompareOp op, const View& out, const View& a, const View& b) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean && a.dtype == b.dtype);
    visit_dtype(a.dtype, [&]<class T>(TypeTag<T>) {
        switch (op) {
            case CompareOp::eq: return map_compare<T>(out, a, b, math::Eq{});
            case CompareOp::ne: return map_compare<T>(out, a, b, math::Ne{});
            case CompareOp::lt: return map_compare<T>(out, a, b, math::Lt{});
            case CompareOp::le: return map_compare<T>(out, a, b, math::Le{});
            case CompareOp::gt: return map_compare<T>(out, a, b, math::Gt{});
            case CompareOp::ge: return map_compare<T>(out, a, b, math::Ge{});
        }
        EMBER_INTERNAL_ASSERT(!"invalid CompareOp");
    });
}

void compare_scalar(CompareOp op, const View& out, const View& a, double s) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean);
    on_floating(a.dtype, [&]<class T>(TypeTag<T>) {
        const Acc<T> v = math::cast<Acc<T>>(s);
        auto with = [&]<class F>(F f) {
            const math::RightScalar<F, Acc<T>> g{f, v};
            map<bool, T>(
                out, [g](T x) { return g(math::load(x)); }, a);
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

void where(const View& out, const View& cond, const View& a, const View& b) {
    EMBER_INTERNAL_ASSERT(cond.dtype == DType::boolean && out.dtype == a.dtype &&
                          a.dtype == b.dtype);
    // The condition is read as its bytes (0 or 1): GCC 12 does not vectorize
    // loads of bool, and where is 3x slower for it.
    visit_dtype(out.dtype, [&]<class T>(TypeTag<T>) {
        map<T, uint8_t, T, T>(
            out, [](uint8_t c, T x, T y) { return math::Where{}(c != 0, x, y); }, cond, a, b);
    });
}

}  // namespace ember::kernels::cpu

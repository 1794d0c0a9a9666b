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

}  // namespace

void unary(UnaryOp op, const View& out, const View& in) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    // perf: exp, log, tanh, erf, sigmoid and gelu call scalar libm per element (GCC
    // vectorizes them only with -ffast-math): compute-bound, ~1/4 of the copy limit.
    math::visit_op(op, [&]<class F>(F f) {
        math::visit_accepted<math::accepts_v<F>>(
            in.dtype, [&]<class T>(TypeTag<T>) { map_unary<T>(out, in, f); });
    });
}

void clamp(const View& out, const View& in, double lo, double hi) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    math::visit_accepted<math::Accepts::numeric>(in.dtype, [&]<class T>(TypeTag<T>) {
        // Integers: the nearest integers inside [lo, hi]; cast saturates ±inf.
        const double l = std::is_integral_v<T> ? std::ceil(lo) : lo;
        const double h = std::is_integral_v<T> ? std::floor(hi) : hi;
        map_unary<T>(out, in, math::Clamp<Acc<T>>{math::cast<Acc<T>>(l), math::cast<Acc<T>>(h)});
    });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype && a.dtype == b.dtype);
    math::visit_op(op, [&]<class F>(F f) {
        math::visit_accepted<math::accepts_v<F>>(
            a.dtype, [&]<class T>(TypeTag<T>) { map_binary<T>(out, a, b, f); });
    });
}

void binary_scalar(BinaryOp op, const View& out, const View& a, double s) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype);
    visit_floating(a.dtype, "binary_scalar (internal error)", [&]<class T>(TypeTag<T>) {
        const Acc<T> v = math::cast<Acc<T>>(s);
        // The functor carries the scalar: no broadcast tensor is made for it.
        math::visit_op(op, [&]<class F>(F f) {
            map_unary<T>(out, a, math::RightScalar<F, Acc<T>>{f, v});
        });
    });
}

void compare(CompareOp op, const View& out, const View& a, const View& b) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean && a.dtype == b.dtype);
    visit_dtype(a.dtype, [&]<class T>(TypeTag<T>) {
        math::visit_op(op, [&](auto f) { map_compare<T>(out, a, b, f); });
    });
}

void compare_scalar(CompareOp op, const View& out, const View& a, double s) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean);
    visit_floating(a.dtype, "compare_scalar (internal error)", [&]<class T>(TypeTag<T>) {
        const Acc<T> v = math::cast<Acc<T>>(s);
        math::visit_op(op, [&]<class F>(F f) {
            const math::RightScalar<F, Acc<T>> g{f, v};
            map<bool, T>(
                out, [g](T x) { return g(math::load(x)); }, a);
        });
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

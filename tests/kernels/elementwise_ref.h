// Shared by the elementwise tests: naive f64 references for every op, the
// shape tables, and check helpers.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "kernels/cpu/elementwise.h"
#include "kernels/elementwise.h"
#include "kernels/front.h"
#include "support.h"

using namespace ember;
using namespace ember::test;
namespace K = ember::kernels;
using K::BinaryOp;
using K::CompareOp;
using K::describe;
using K::UnaryOp;

namespace ember::test::elementwise_ref {

inline const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
inline const DType kInts[] = {DType::i32, DType::i64, DType::u8};
inline const BinaryOp kBinary[] = {BinaryOp::add,    BinaryOp::sub, BinaryOp::mul,
                                   BinaryOp::div,    BinaryOp::pow, BinaryOp::maximum,
                                   BinaryOp::minimum};
inline const UnaryOp kUnary[] = {UnaryOp::neg,       UnaryOp::abs,     UnaryOp::exp,  UnaryOp::log,
                                 UnaryOp::sqrt,      UnaryOp::rsqrt,   UnaryOp::relu, UnaryOp::gelu,
                                 UnaryOp::gelu_tanh, UnaryOp::sigmoid, UnaryOp::tanh};
inline const CompareOp kCompare[] = {CompareOp::eq, CompareOp::ne, CompareOp::lt,
                                     CompareOp::le, CompareOp::gt, CompareOp::ge};

// Pairs of input shapes: equal, broadcast both ways, [] scalars, size-0 and size-1 dims.
// clang-format off
inline const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {{}, {}}, {{1}, {}}, {{7}, {7}}, {{3, 1, 5}, {4, 5}}, {{2, 3, 4}, {}}, {{}, {2, 3}},
    {{0, 3}, {3}}, {{4, 0}, {1, 1}}, {{2, 1, 3}, {1, 1, 1}}, {{5, 1}, {1, 6}},
    {{2, 3, 4, 5}, {3, 1, 5}}, {{1, 1}, {1}}};
inline const std::vector<Shape> kUnaryShapes = {{}, {1}, {0}, {7}, {3, 0, 2}, {2, 3, 4}, {1, 5, 1}, {33, 17}};
// clang-format on

// ---- f64 references ----

inline double ref_unary(UnaryOp op, double x) {
    switch (op) {
        case UnaryOp::neg:
            return -x;
        case UnaryOp::abs:
            return std::fabs(x);
        case UnaryOp::exp:
            return std::exp(x);
        case UnaryOp::log:
            return std::log(x);
        case UnaryOp::sqrt:
            return std::sqrt(x);
        case UnaryOp::rsqrt:
            return 1.0 / std::sqrt(x);
        case UnaryOp::relu:
            return std::isnan(x) ? x : std::max(x, 0.0);
        case UnaryOp::gelu:
            return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
        case UnaryOp::gelu_tanh:
            return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        case UnaryOp::sigmoid:
            return 1.0 / (1.0 + std::exp(-x));
        case UnaryOp::tanh:
            return std::tanh(x);
    }
    return NAN;
}

// Integer power by repeated multiplication (b >= 0), in int64.
inline int64_t ref_int_pow(int64_t a, int64_t b) {
    int64_t r = 1;
    for (int64_t i = 0; i < b; ++i) r = int64_t(uint64_t(r) * uint64_t(a));
    return r;
}

inline double ref_binary(BinaryOp op, double a, double b, bool integer) {
    switch (op) {
        case BinaryOp::add:
            return a + b;
        case BinaryOp::sub:
            return a - b;
        case BinaryOp::mul:
            return a * b;
        case BinaryOp::div:
            return a / b;
        case BinaryOp::pow:
            return integer ? double(ref_int_pow(int64_t(a), int64_t(b))) : std::pow(a, b);
        case BinaryOp::maximum:
            return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
        case BinaryOp::minimum:
            return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
        // Activation backwards (a = upstream gradient, b = saved output or input),
        // written from the derivatives, independently of kernels/math.h.
        case BinaryOp::relu_backward:
            return b > 0 ? a : 0.0;
        case BinaryOp::gelu_backward: {
            const double cdf = 0.5 * std::erfc(-b / std::sqrt(2.0));
            const double pdf = std::exp(-b * b / 2) / std::sqrt(2 * M_PI);
            return a * (cdf + b * pdf);
        }
        case BinaryOp::gelu_tanh_backward: {  // derivative of x/(1 + exp(-2u)) by the quotient rule
            const double k = std::sqrt(2 / M_PI), u = k * (b + 0.044715 * b * b * b);
            const double s = 1 / (1 + std::exp(-2 * u));
            const double du = k * (1 + 3 * 0.044715 * b * b);
            return a * (s + b * 2 * du * s * (1 - s));
        }
        case BinaryOp::sigmoid_backward:
            return a * b * (1 - b);
        case BinaryOp::tanh_backward:
            return a * (1 - b * b);
    }
    return NAN;
}

inline bool ref_compare(CompareOp op, double a, double b) {
    switch (op) {
        case CompareOp::eq:
            return a == b;
        case CompareOp::ne:
            return a != b;
        case CompareOp::lt:
            return a < b;
        case CompareOp::le:
            return a <= b;
        case CompareOp::gt:
            return a > b;
        case CompareOp::ge:
            return a >= b;
    }
    return false;
}

// An exact integer result as the integer dtype holds it (two's complement wrap).
inline double wrap_to(double v, DType d) {
    const int64_t i = int64_t(v);
    if (d == DType::u8) return double(uint8_t(uint64_t(i)));
    if (d == DType::i32) return double(int32_t(uint32_t(uint64_t(i))));
    return double(i);
}

inline Shape ref_broadcast(const Shape& a, const Shape& b) {
    const size_t n = std::max(a.size(), b.size());
    Shape s(n, 1);
    for (size_t i = 0; i < n; ++i) {
        const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
        s[i] = x == 1 ? y : x;
    }
    return s;
}

// Row-major flat index into a tensor of shape `in` read at output index `idx`.
inline int64_t source_index(const Shape& idx, const Shape& in) {
    const size_t off = idx.size() - in.size();
    int64_t flat = 0;
    for (size_t d = 0; d < in.size(); ++d) flat = flat * in[d] + (in[d] == 1 ? 0 : idx[off + d]);
    return flat;
}

// f(a, b) over the broadcast shape, from the values a and b hold as dtype t.
template <class F>
inline std::vector<double> ref_map(const Tensor& a, const Tensor& b, DType t, F f) {
    const std::vector<double> va = values(a.to(t)), vb = values(b.to(t));
    const Shape s = ref_broadcast(a.shape(), b.shape());
    std::vector<double> out(size_t(shape_numel(s)));
    for (size_t i = 0; i < out.size(); ++i) {
        const Shape idx = unravel(int64_t(i), s);
        out[i] =
            f(va[size_t(source_index(idx, a.shape()))], vb[size_t(source_index(idx, b.shape()))]);
    }
    return out;
}

inline double atol_for(DType t) { return rtol_for(t) * 0.1; }

// Input range of each op (a valid domain, away from poles).
inline std::pair<double, double> domain(UnaryOp op) {
    switch (op) {
        case UnaryOp::log:
        case UnaryOp::sqrt:
        case UnaryOp::rsqrt:
            return {0.05, 4};
        case UnaryOp::sigmoid:
        case UnaryOp::tanh:
            return {-4, 4};
        default:
            return {-3, 3};
    }
}

// Checks binary(op, a, b) (dtype `t`) against the reference.
inline void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, DType t) {
    INFO(K::op_name(op) << "(" << describe(a) << ", " << describe(b) << ")");
    const Tensor out = K::binary(op, a, b);
    REQUIRE(out.dtype() == t);
    REQUIRE(out.shape() == ref_broadcast(a.shape(), b.shape()));
    const bool integer = !is_floating(t);
    std::vector<double> want =
        ref_map(a, b, t, [&](double x, double y) { return ref_binary(op, x, y, integer); });
    if (integer && t != DType::boolean)
        for (double& w : want) w = wrap_to(w, t);
    check_close(out, want, rtol_for(t), atol_for(t));
}

}  // namespace ember::test::elementwise_ref

// The f64 references: plain loops over host copies, written from the
// definitions (the activation backwards from their derivatives), sharing no
// code with kernels/math.h.
#include "ops/reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ember::test::ref {

namespace {
constexpr double kPi = 3.14159265358979323846;
}

double unary(kernels::UnaryOp op, double x) {
    using U = kernels::UnaryOp;
    switch (op) {
        case U::neg:
            return -x;
        case U::abs:
            return std::fabs(x);
        case U::exp:
            return std::exp(x);
        case U::log:
            return std::log(x);
        case U::sqrt:
            return std::sqrt(x);
        case U::rsqrt:
            return 1.0 / std::sqrt(x);
        case U::relu:
            return std::isnan(x) ? x : std::max(x, 0.0);
        case U::gelu:
            return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
        case U::gelu_tanh:
            return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x)));
        case U::sigmoid:
            return 1.0 / (1.0 + std::exp(-x));
        case U::tanh:
            return std::tanh(x);
        case U::silu:  // x·σ(x)
            return x / (1 + std::exp(-x));
    }
    return NAN;
}

int64_t int_pow(int64_t a, int64_t b) {
    int64_t r = 1;
    for (int64_t i = 0; i < b; ++i) r = int64_t(uint64_t(r) * uint64_t(a));
    return r;
}

double binary(kernels::BinaryOp op, double a, double b, bool integer) {
    using B = kernels::BinaryOp;
    switch (op) {
        case B::add:
            return a + b;
        case B::sub:
            return a - b;
        case B::mul:
            return a * b;
        case B::div:
            return a / b;
        case B::pow:
            return integer ? double(int_pow(int64_t(a), int64_t(b))) : std::pow(a, b);
        case B::maximum:
            return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
        case B::minimum:
            return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
        // a = upstream gradient, b = saved output (relu, sigmoid, tanh) or input (gelu, silu).
        case B::relu_backward:
            return b > 0 ? a : 0.0;
        case B::gelu_backward: {  // d/dx x Φ(x) = Φ(x) + x φ(x)
            const double cdf = 0.5 * std::erfc(-b / std::sqrt(2.0));
            const double pdf = std::exp(-b * b / 2) / std::sqrt(2 * kPi);
            return a * (cdf + b * pdf);
        }
        case B::gelu_tanh_backward: {  // x / (1 + exp(-2u)) by the quotient rule
            const double k = std::sqrt(2 / kPi), u = k * (b + 0.044715 * b * b * b);
            const double s = 1 / (1 + std::exp(-2 * u));
            const double du = k * (1 + 3 * 0.044715 * b * b);
            return a * (s + b * 2 * du * s * (1 - s));
        }
        case B::sigmoid_backward:
            return a * b * (1 - b);
        case B::tanh_backward:
            return a * (1 - b * b);
        case B::silu_backward: {  // d/dx x·σ(x) by the product rule, σ' = σ(1 − σ)
            const double s = 1 / (1 + std::exp(-b));
            return a * (s + b * s * (1 - s));
        }
    }
    return NAN;
}

bool compare(kernels::CompareOp op, double a, double b) {
    using C = kernels::CompareOp;
    switch (op) {
        case C::eq:
            return a == b;
        case C::ne:
            return a != b;
        case C::lt:
            return a < b;
        case C::le:
            return a <= b;
        case C::gt:
            return a > b;
        case C::ge:
            return a >= b;
    }
    return false;
}

double wrap_to(double v, DType d) {
    const int64_t i = int64_t(v);
    if (d == DType::u8) return double(uint8_t(uint64_t(i)));
    if (d == DType::i32) return double(int32_t(uint32_t(uint64_t(i))));
    return double(i);
}

Shape broadcast(const Shape& a, const Shape& b) {
    const size_t n = std::max(a.size(), b.size());
    Shape s(n, 1);
    for (size_t i = 0; i < n; ++i) {
        const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
        s[i] = x == 1 ? y : x;
    }
    return s;
}

Groups groups(const Shape& shape, const Shape& dims, bool keepdim) {
    const size_t nd = shape.size();
    std::vector<bool> reduced(nd, dims.empty());
    for (int64_t d : dims)
        if (nd > 0) reduced[size_t(d < 0 ? d + int64_t(nd) : d)] = true;
    Groups g;
    g.outputs = 1;
    g.size = 1;
    for (size_t d = 0; d < nd; ++d) {
        (reduced[d] ? g.size : g.outputs) *= shape[d];
        if (!reduced[d])
            g.out_shape.push_back(shape[d]);
        else if (keepdim)
            g.out_shape.push_back(1);
    }
    Shape step(nd, 0);  // how far the output index moves per step along each input dim
    for (size_t d = nd, stride = 1; d-- > 0;)
        if (!reduced[d]) step[d] = int64_t(stride), stride *= size_t(shape[d]);
    g.out_of.resize(size_t(shape_numel(shape)));
    Shape idx(nd, 0);
    int64_t o = 0;
    for (int64_t& out : g.out_of) {
        out = o;
        for (size_t d = nd; d-- > 0;) {  // advance like an odometer
            o += step[d];
            if (++idx[d] < shape[d]) break;
            o -= step[d] * shape[d];
            idx[d] = 0;
        }
    }
    return g;
}

int64_t group_size(const Shape& shape, const Shape& dims) {
    if (dims.empty()) return shape_numel(shape);
    int64_t n = 1;
    for (int64_t d : dims)
        if (!shape.empty()) n *= shape[size_t(d < 0 ? d + int64_t(shape.size()) : d)];
    return n;
}

std::vector<double> sum(const std::vector<double>& x, const Groups& g) {
    std::vector<double> s(size_t(g.outputs), 0.0);
    for (size_t i = 0; i < x.size(); ++i) s[size_t(g.out_of[i])] += x[i];
    return s;
}

std::vector<double> mean(const std::vector<double>& x, const Groups& g) {
    std::vector<double> m = sum(x, g);
    for (double& v : m) v /= double(g.size);  // an empty mean is 0 / 0 = NaN
    return m;
}

std::vector<double> norm(const std::vector<double>& x, const Groups& g, double p) {
    std::vector<double> s(size_t(g.outputs), 0.0);
    for (size_t i = 0; i < x.size(); ++i) {
        double& acc = s[size_t(g.out_of[i])];
        const double a = std::fabs(x[i]);
        if (std::isinf(p))
            acc = std::isnan(a) || std::isnan(acc) ? NAN : std::max(acc, a);
        else
            acc += p == 1 ? a : a * a;
    }
    if (p == 2)
        for (double& v : s) v = std::sqrt(v);
    return s;
}

std::vector<double> var(const std::vector<double>& x, const Groups& g, double correction) {
    const std::vector<double> m = mean(x, g);
    std::vector<double> m2(size_t(g.outputs), 0.0);
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = x[i] - m[size_t(g.out_of[i])];
        m2[size_t(g.out_of[i])] += d * d;
    }
    for (double& v : m2) v /= std::max(0.0, double(g.size) - correction);
    return m2;
}

std::vector<double> extreme(const std::vector<double>& x, const Groups& g, bool is_max) {
    const double start = is_max ? -INFINITY : INFINITY;
    std::vector<double> m(size_t(g.outputs), start);
    for (size_t i = 0; i < x.size(); ++i) {
        double& acc = m[size_t(g.out_of[i])];
        if (std::isnan(acc) || std::isnan(x[i]))
            acc = NAN;
        else
            acc = is_max ? std::max(acc, x[i]) : std::min(acc, x[i]);
    }
    return m;
}

namespace {

// Calls f(first, stride, n) for each line of `shape` along dim: the flat
// row-major index of its first element, the step between elements, its length.
template <class F>
void for_each_line(const Shape& shape, int64_t dim, F f) {
    const Shape s = shape.empty() ? Shape{1} : shape;
    const int64_t nd = int64_t(s.size()), d = dim < 0 ? dim + nd : dim;
    int64_t inner = 1;
    for (int64_t i = d + 1; i < nd; ++i) inner *= s[size_t(i)];
    const int64_t n = s[size_t(d)], total = shape_numel(s);
    for (int64_t start = 0; start < total; ++start)
        if ((start / inner) % n == 0) f(start, inner, n);  // each line once, from its first element
}

}  // namespace

std::vector<double> softmax(const Tensor& x, int64_t dim, bool log) {
    const std::vector<double> v = values(x);
    std::vector<double> out(v.size());
    for_each_line(x.shape(), dim, [&](int64_t start, int64_t step, int64_t n) {
        double m = -INFINITY, s = 0;
        for (int64_t r = 0; r < n; ++r) m = std::max(m, v[size_t(start + r * step)]);
        for (int64_t r = 0; r < n; ++r) s += std::exp(v[size_t(start + r * step)] - m);
        for (int64_t r = 0; r < n; ++r) {
            const double xv = v[size_t(start + r * step)];
            out[size_t(start + r * step)] =
                log ? (xv - m) - std::log(s) : std::exp(xv - m - std::log(s));
        }
    });
    return out;
}

std::vector<double> softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log) {
    const std::vector<double> gv = values(g), yv = values(y);
    std::vector<double> out(gv.size());
    for_each_line(y.shape(), dim, [&](int64_t start, int64_t step, int64_t n) {
        double s = 0;
        for (int64_t r = 0; r < n; ++r) {
            const size_t i = size_t(start + r * step);
            s += log ? gv[i] : gv[i] * yv[i];
        }
        for (int64_t r = 0; r < n; ++r) {
            const size_t i = size_t(start + r * step);
            out[i] = log ? gv[i] - std::exp(yv[i]) * s : yv[i] * (gv[i] - s);
        }
    });
    return out;
}

}  // namespace ember::test::ref

// Naive f64 references written from the math, independent of ember's kernels:
// the scalar elementwise ops, NumPy broadcasting, reductions over a set of
// dims and softmax along one dim. The op table (ops/op_table.h) and the
// special-case tests compare ember against these.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "kernels/math.h"
#include "ops/oracle.h"

namespace ember::test::ref {

// ---- Scalar math ----

double unary(kernels::UnaryOp op, double x);
/// a^b for b >= 0 by repeated multiplication, wrapping in 64 bits.
int64_t int_pow(int64_t a, int64_t b);
/// `integer`: pow is the exact integer power (the other ops are exact anyway).
/// The activation backwards take (upstream gradient, saved output or input).
double binary(kernels::BinaryOp op, double a, double b, bool integer);
bool compare(kernels::CompareOp op, double a, double b);
/// An exact integer result as integer dtype d holds it (two's complement wrap).
double wrap_to(double v, DType d);

// ---- Broadcasting ----

Shape broadcast(const Shape& a, const Shape& b);

/// f(v) for every element of the broadcast shape of `ins`, where v[i] is the
/// element of ins[i] it reads, as dtype t holds it. Row-major.
template <class F>
std::vector<double> map(const std::vector<Tensor>& ins, DType t, F f) {
    Shape out;
    for (const Tensor& x : ins) out = broadcast(out, x.shape());
    const size_t nd = out.size(), n_in = ins.size();
    std::vector<std::vector<double>> v(n_in);
    std::vector<Shape> step(n_in, Shape(nd, 0));  // row-major strides, 0 where broadcast
    for (size_t i = 0; i < n_in; ++i) {
        v[i] = values(ins[i].to(t));
        const Shape& s = ins[i].shape();
        int64_t stride = 1;
        for (size_t d = s.size(); d-- > 0;) {
            step[i][d + nd - s.size()] = s[d] == 1 ? 0 : stride;
            stride *= s[d];
        }
    }
    std::vector<double> res(size_t(shape_numel(out)));
    Shape idx(nd, 0);
    std::vector<int64_t> at(n_in, 0);
    std::vector<double> args(n_in);
    for (size_t k = 0; k < res.size(); ++k) {
        for (size_t i = 0; i < n_in; ++i) args[i] = v[i][size_t(at[i])];
        res[k] = f(args.data());
        for (size_t d = nd; d-- > 0;) {  // advance the output index like an odometer
            for (size_t i = 0; i < n_in; ++i) at[i] += step[i][d];
            if (++idx[d] < out[d]) break;
            for (size_t i = 0; i < n_in; ++i) at[i] -= step[i][d] * out[d];
            idx[d] = 0;
        }
    }
    return res;
}

// ---- Reductions ----

/// Where each element of an input goes when it is reduced over `dims` (empty:
/// all; a 0-d input takes {}, {0} or {-1}), as the kernels/reduce.h contract.
struct Groups {
    Shape out_shape;
    std::vector<int64_t> out_of;  // output element of each input element, row-major
    int64_t outputs = 0;
    int64_t size = 0;  // input elements per output element
};
Groups groups(const Shape& shape, const Shape& dims, bool keepdim);
/// Groups::size without the rest.
int64_t group_size(const Shape& shape, const Shape& dims);

std::vector<double> sum(const std::vector<double>& x, const Groups& g);
std::vector<double> mean(const std::vector<double>& x, const Groups& g);
/// p = 1, 2 or INFINITY (max |x|); NaN propagates.
std::vector<double> norm(const std::vector<double>& x, const Groups& g, double p);
/// Σ (x - mean)² / max(0, n - correction).
std::vector<double> var(const std::vector<double>& x, const Groups& g, double correction);
/// max (or min) of each group; NaN propagates. Groups must not be empty.
std::vector<double> extreme(const std::vector<double>& x, const Groups& g, bool is_max);

// ---- Softmax ----

/// softmax (or log_softmax) of x along dim: exp(x - lse) or x - lse, with
/// lse = m + log Σ exp(x - m) over each line.
std::vector<double> softmax(const Tensor& x, int64_t dim, bool log);
/// The backward from the output y: y (g - Σ g y), or g - exp(y) Σ g.
std::vector<double> softmax_backward(const Tensor& g, const Tensor& y, int64_t dim, bool log);

}  // namespace ember::test::ref

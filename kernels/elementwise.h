// Elementwise ops (front functions): unary math and activations, clamp,
// binary arithmetic with NumPy broadcasting, comparisons and where. Each
// checks its arguments, picks the result dtype (docs/elementwise.md), and
// dispatches to the CPU or CUDA kernel; they record no autograd.
#pragma once

#include <optional>

#include "../core/tensor.h"
#include "math.h"
#include "op_types.h"

namespace ember::kernels {

/// "add", "relu", "ge", ... as used in error messages.
const char* op_name(UnaryOp op);
const char* op_name(BinaryOp op);
const char* op_name(CompareOp op);

// ---- Generic entry points (the named functions below call these) ----

/// op(x). exp/log/sqrt/rsqrt/gelu/sigmoid/tanh compute integer and bool inputs
/// in f32 (result f32); neg/abs/relu keep the dtype and reject bool.
Tensor unary(UnaryOp op, const Tensor& x);
/// op(a, b) with broadcasting; result dtype promote_types(a, b), except div,
/// whose integer or bool result is f32 (true division). sub and pow reject bool.
Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b);
/// op(a, s) with a floating scalar s (like a Python float): the dtype is
/// promote_with_scalar(a, true), so an integer tensor computes in f32.
Tensor binary(BinaryOp op, const Tensor& a, double s);
/// a = op(a, b) in place: b must broadcast to a's shape, and the result dtype
/// must cast to a's (no float into an integer tensor, nothing into bool). Returns a.
Tensor binary_(BinaryOp op, const Tensor& a, const Tensor& b);
Tensor binary_(BinaryOp op, const Tensor& a, double s);
/// op(a, b) as a bool tensor, compared in promote_types(a, b), with broadcasting.
Tensor compare(CompareOp op, const Tensor& a, const Tensor& b);
/// op(a, s) as a bool tensor, compared in promote_with_scalar(a, true).
Tensor compare(CompareOp op, const Tensor& a, double s);

// ---- Binary arithmetic ----
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, double s);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double s);
/// True division: integer inputs give f32.
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double s);
/// a^b. Integers: exact, wrapping; a negative exponent gives 0 except for bases ±1.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double s);
/// Elementwise max / min; NaN propagates.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double s);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, double s);


// ---- In place: write into `a` (see binary_) and return it ----
Tensor add_(const Tensor& a, const Tensor& b);
Tensor add_(const Tensor& a, double s);
Tensor sub_(const Tensor& a, const Tensor& b);
Tensor sub_(const Tensor& a, double s);
Tensor mul_(const Tensor& a, const Tensor& b);
Tensor mul_(const Tensor& a, double s);
Tensor div_(const Tensor& a, const Tensor& b);
Tensor div_(const Tensor& a, double s);

// ---- Unary ----
/// -x; integers wrap; bool is an error.
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
/// exp(x); integer inputs give f32 (likewise log, sqrt, rsqrt, sigmoid, tanh, gelu, silu).
Tensor exp(const Tensor& x);
/// log(0) = -inf; log(x < 0) = NaN.
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
/// 1 / sqrt(x); rsqrt(0) = inf.
Tensor rsqrt(const Tensor& x);
/// max(x, 0); relu(NaN) = NaN.
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
/// SiLU (swish): x * sigmoid(x), as torch.nn.functional.silu.
Tensor silu(const Tensor& x);

// GeluApprox: kernels/op_types.h.
/// x * Phi(x), exact (erf) or by the tanh approximation.
Tensor gelu(const Tensor& x, GeluApprox approximate = GeluApprox::none);

/// Activation backwards in one pass: the gradient of the input from the
/// upstream gradient `g` and what the forward saved — its output y for relu,
/// sigmoid and tanh, its input x for gelu and silu. Floating dtypes; shapes broadcast.
Tensor relu_backward(const Tensor& g, const Tensor& y);
Tensor gelu_backward(const Tensor& g, const Tensor& x, GeluApprox approximate = GeluApprox::none);
Tensor sigmoid_backward(const Tensor& g, const Tensor& y);
Tensor tanh_backward(const Tensor& g, const Tensor& y);
Tensor silu_backward(const Tensor& g, const Tensor& x);

/// min(max(x, lo), hi) with either bound optional (not both absent, not NaN);
/// keeps integer dtypes (bounds rounded inward); lo > hi gives hi; NaN stays NaN.
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);

// ---- Comparisons (bool results) ----
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, double s);

/// cond ? a : b with three-way broadcasting; cond must be bool; the result
/// dtype is promote_types(a, b).
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace ember::kernels

// Differentiable elementwise ops: arithmetic with broadcasting and dtype
// promotion (docs/dtypes.md), activations, comparisons, and the operators.
// Each records its backward when an input requires grad (docs/autograd.md).
#pragma once

#include <optional>

#include "../../core/tensor.h"
#include "../../kernels/op_types.h"

namespace ember {


Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, double s);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, double s);
/// a^b; the gradient for b is taken as 0 where a == 0.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double s);
/// Elementwise max/min; on ties the gradient is split evenly (as PyTorch).
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, double s);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, double s);

Tensor neg(const Tensor& x);
/// |x|; gradient sign(x) (0 at 0).
Tensor abs(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
/// max(x, 0); gradient 0 at 0.
Tensor relu(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor gelu(const Tensor& x, GeluApprox approximate = GeluApprox::none);
/// SiLU (swish): x * sigmoid(x); its backward reads the saved input.
Tensor silu(const Tensor& x);
/// Gradient flows where lo <= x <= hi.
Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi);
/// cond ? a : b, broadcasting all three; gradients flow to the chosen side.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// Comparisons return bool tensors and carry no gradient.
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

/// In place (return a). Not recorded: a must not require grad while grad
/// mode is on (optimizers run under NoGradGuard).
Tensor add_(const Tensor& a, const Tensor& b);
Tensor add_(const Tensor& a, double s);
Tensor sub_(const Tensor& a, const Tensor& b);
Tensor sub_(const Tensor& a, double s);
Tensor mul_(const Tensor& a, const Tensor& b);
Tensor mul_(const Tensor& a, double s);
Tensor div_(const Tensor& a, const Tensor& b);
Tensor div_(const Tensor& a, double s);

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
inline Tensor operator-(double s, const Tensor& a) { return add(neg(a), s); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return mul(pow(a, -1.0), s); }

/// Comparisons, elementwise, as in libtorch: a bool tensor (eq, ne, lt, le,
/// gt, ge above), never a bool. Whether two handles are one tensor is
/// a.is_same(b).
inline Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
inline Tensor operator==(const Tensor& a, double s) { return eq(a, s); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
inline Tensor operator!=(const Tensor& a, double s) { return ne(a, s); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
inline Tensor operator<(const Tensor& a, double s) { return lt(a, s); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
inline Tensor operator<=(const Tensor& a, double s) { return le(a, s); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
inline Tensor operator>(const Tensor& a, double s) { return gt(a, s); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
inline Tensor operator>=(const Tensor& a, double s) { return ge(a, s); }

}  // namespace ember

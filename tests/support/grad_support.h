// Helpers shared by the gradcheck tests of the differentiable ops
// (test_grad_*.cpp): seeded f64 leaves and a gradcheck that shows its message.
#pragma once

#include <functional>
#include <vector>

#include "support.h"

namespace ember::test {

using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;

/// A seeded random f64 leaf that requires grad, uniform in [lo, hi).
inline Tensor leaf(const Shape& shape, uint64_t seed, double lo = -2.0, double hi = 2.0) {
    Tensor t = random_tensor(shape, DType::f64, seed, lo, hi);
    t.set_requires_grad(true);
    return t;
}

/// A seeded random f64 leaf with values in [lo, hi) and a random sign: |x| is
/// at least lo, so kinks at 0 (abs, relu, norm p = 1) stay out of FD's reach.
inline Tensor leaf_away_from_zero(const Shape& shape, uint64_t seed, double lo = 0.2,
                                  double hi = 2.0) {
    std::vector<double> v = values(random_tensor(shape, DType::f64, seed, lo, hi));
    const std::vector<double> s = values(random_tensor(shape, DType::f64, seed + 1000, 0, 1));
    for (size_t i = 0; i < v.size(); ++i)
        if (s[i] < 0.5) v[i] = -v[i];
    Tensor t = from_vector(v, shape);
    t.set_requires_grad(true);
    return t;
}

/// A non-leaf's input without a gradient: the same values, requires_grad off.
inline Tensor constant(const Shape& shape, uint64_t seed, double lo = -2.0, double hi = 2.0) {
    return random_tensor(shape, DType::f64, seed, lo, hi);
}

/// gradcheck that fails the test with its message.
inline void check_grad(const GradFn& fn, const std::vector<Tensor>& inputs,
                       const autograd::GradcheckOptions& options = {}) {
    const autograd::GradcheckResult r = autograd::gradcheck(fn, inputs, options);
    INFO(r.message);
    REQUIRE(r.ok);
}

/// Runs backward of Σ y·seed from fn(inputs) and returns each input's grad.
inline std::vector<Tensor> grads_of(const GradFn& fn, const std::vector<Tensor>& inputs,
                                    const Tensor& seed = {}) {
    for (const Tensor& x : inputs) x.set_grad({});
    Tensor y = fn(inputs);
    y.backward(seed.defined() ? seed : ones(y.shape(), {y.dtype()}));
    std::vector<Tensor> g;
    for (const Tensor& x : inputs) g.push_back(x.grad());
    return g;
}

}  // namespace ember::test

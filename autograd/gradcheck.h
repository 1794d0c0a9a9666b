// gradcheck: autograd's gradients against central finite differences in f64,
// the oracle every differentiable op is tested with (docs/autograd.md).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace ember::autograd {

struct GradcheckOptions {
    double eps = 1e-6;   // finite-difference step
    double atol = 1e-5;  // |analytic − numeric| <= atol + rtol·|numeric|
    double rtol = 1e-3;
    uint64_t seed = 0;   // of the random projection R below
};

/// What gradcheck found: ok, or the first mismatch described in `message`.
struct GradcheckResult {
    bool ok = true;
    std::string message;
    explicit operator bool() const { return ok; }
};

/// Checks fn's gradients with respect to every input that requires grad
/// (f64 CPU tensors). The output y = fn(inputs) is reduced to the scalar
/// L = Σ y·R with a fixed random R, so one backward gives dL/dx, and each
/// element of each input is checked against (L(x + ε) − L(x − ε)) / 2ε.
/// A wrong Jacobian entry shows unless R happens to cancel it (probability 0).
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

}  // namespace ember::autograd

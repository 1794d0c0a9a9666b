// gradcheck: one backward for the analytic gradient of Σ fn(x)·R, then two
// forwards per input element for the numeric one.
#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/graph.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/reduce.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "kernels/factories.h"

namespace ember::autograd {

namespace {

Shape unravel(int64_t i, const Shape& shape) {
    Shape idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = i % shape[d];
        i /= shape[d];
    }
    return idx;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options) {
    for (const Tensor& x : inputs)
        if (x.defined() && x.requires_grad())
            EMBER_CHECK(x.dtype() == DType::f64 && x.device().is_cpu() && x.is_leaf(),
                        "gradcheck: inputs that require grad must be f64 CPU leaves, got ",
                        dtype_name(x.dtype()), " on ", x.device());
    Tensor y;
    {
        EnableGradGuard grad;
        y = fn(inputs);
    }
    EMBER_CHECK(y.defined() && y.dtype() == DType::f64, "gradcheck: fn must return an f64 tensor");
    Generator gen(options.seed);
    const Tensor r = randn(y.shape(), {DType::f64}, &gen);
    const auto loss = [&](const Tensor& out) { return kernels::sum(kernels::mul(out, r)).item(); };

    std::vector<Tensor> analytic(inputs.size());
    if (y.requires_grad()) {
        for (const Tensor& x : inputs)
            if (x.defined() && x.requires_grad()) x.set_grad({});
        backward({y}, {r});
        for (size_t i = 0; i < inputs.size(); ++i)
            if (inputs[i].defined() && inputs[i].requires_grad()) analytic[i] = inputs[i].grad();
    }

    NoGradGuard no_grad;
    for (size_t i = 0; i < inputs.size(); ++i) {
        Tensor x = inputs[i];  // a handle to the same data, to perturb it in place
        if (!x.defined() || !x.requires_grad()) continue;
        for (int64_t j = 0; j < x.numel(); ++j) {
            const Shape idx = unravel(j, x.shape());
            const double v = x.at(idx);
            x.set(idx, v + options.eps);
            const double up = loss(fn(inputs));
            x.set(idx, v - options.eps);
            const double down = loss(fn(inputs));
            x.set(idx, v);
            const double numeric = (up - down) / (2 * options.eps);
            const double got = analytic[i].defined() ? analytic[i].at(idx) : 0.0;
            if (!(std::abs(got - numeric) <= options.atol + options.rtol * std::abs(numeric))) {
                std::ostringstream os;
                os << "gradcheck: input " << i << " (shape " << shape_str(x.shape())
                   << ") element " << shape_str(idx) << ": autograd " << got
                   << ", finite differences " << numeric
                   << (analytic[i].defined() ? "" : " (autograd gave no gradient)");
                return {false, os.str()};
            }
        }
    }
    return {};
}

}  // namespace ember::autograd

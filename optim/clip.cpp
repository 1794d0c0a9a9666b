// Clipping by the global norm: kernels::global_norm (one fused reduction) and
// kernels::clip_by_norm_ (one fused scaling, the factor read from the norm
// tensor by the kernel, so nothing goes to the host).
#include "optim/clip.h"

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "kernels/factories.h"
#include "kernels/optim.h"

namespace ember::optim {

Tensor clip_grads(const std::vector<Tensor>& grads, double max_norm) {
    EMBER_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be positive, got ", max_norm);
    if (grads.empty()) return zeros({});
    NoGradGuard no_grad;
    const Tensor norm = kernels::global_norm(grads);
    kernels::clip_by_norm_(grads, norm, max_norm);
    return norm;
}

Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
    std::vector<Tensor> grads;
    for (const Tensor& p : params)
        if (Tensor g = p.grad(); g.defined()) grads.push_back(g);
    return clip_grads(grads, max_norm);
}

Tensor Accumulation::scale(const Tensor& loss) const {
    EMBER_CHECK(steps >= 1, "Accumulation: steps must be >= 1, got ", steps);
    return steps == 1 ? loss : mul(loss, 1.0 / double(steps));
}

}  // namespace ember::optim

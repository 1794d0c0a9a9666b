// Adam and AdamW: the hyper-parameters into one fused kernels::adam_update call
// per batch (kernels/optim.h; the element math is kernels/optim_math.h).
#include "optim/adam.h"

#include "kernels/optim.h"

namespace ember::optim {

namespace {
Hyper adam_hyper(double lr, double beta1, double beta2, double eps, double wd, bool amsgrad) {
    EMBER_CHECK(lr >= 0 && beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps >= 0 &&
                    wd >= 0,
                "Adam: need lr >= 0, 0 <= beta1, beta2 < 1, eps >= 0, weight_decay >= 0; got lr ",
                lr, ", betas (", beta1, ", ", beta2, "), eps ", eps, ", weight_decay ", wd);
    Hyper h;
    h.lr = lr;
    h.beta1 = beta1;
    h.beta2 = beta2;
    h.eps = eps;
    h.weight_decay = wd;
    h.amsgrad = amsgrad;
    return h;
}
}  // namespace

Adam::Adam(std::vector<GroupSpec> groups, const AdamOptions& o) : Adam(std::move(groups), o, false) {}

Adam::Adam(std::vector<GroupSpec> groups, const AdamOptions& o, bool decoupled)
    : Optimizer(std::move(groups), adam_hyper(o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad)),
      decoupled_(decoupled) {}

AdamW::AdamW(std::vector<GroupSpec> groups, const AdamWOptions& o)
    : Adam(std::move(groups), AdamOptions{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, o.amsgrad}, true) {}

void Adam::update(const Hyper& h, const kernels::UpdateTensors& t) {
    // The step (and, with a schedule's tables, the LR and beta1) comes from each
    // parameter's own count (t.steps).
    kernels::adam_update(t, {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, decoupled_, 1, h.amsgrad});
}

}  // namespace ember::optim

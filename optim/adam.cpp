// Adam and AdamW: the hyper-parameters into one fused kernels::adam_update call
// per group (kernels/optim.h; the element math is kernels/optim_math.h).
#include "optim/adam.h"

#include "kernels/optim.h"

namespace ember::optim {

namespace {
const AdamOptions& checked(const AdamOptions& o) {
    EMBER_CHECK(o.lr >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 &&
                    o.eps >= 0 && o.weight_decay >= 0,
                "Adam: need lr >= 0, 0 <= beta1, beta2 < 1, eps >= 0, weight_decay >= 0; got lr ",
                o.lr, ", betas (", o.beta1, ", ", o.beta2, "), eps ", o.eps, ", weight_decay ",
                o.weight_decay);
    return o;
}
}  // namespace

Adam::Adam(std::vector<GroupSpec> groups, const AdamOptions& o)
    : Adam(std::move(groups), o, kernels::AdamDecay::l2) {}

Adam::Adam(std::vector<GroupSpec> groups, const AdamOptions& o, kernels::AdamDecay decay)
    : Optimizer(std::move(groups), checked(o)), decay_(decay) {}

AdamW::AdamW(std::vector<GroupSpec> groups, const AdamWOptions& o)
    : Adam(std::move(groups), AdamOptions(o), kernels::AdamDecay::decoupled) {}

const AdamOptions& Adam::options(size_t group) const {
    EMBER_CHECK(group < groups().size(), name(), ": no group ", group);
    return std::get<AdamOptions>(groups()[group].hyper);
}

void Adam::update(const Hyper& h, const kernels::UpdateTensors& t) {
    // The step (and, with a schedule's tables, the LR and beta1) comes from each
    // parameter's own count (t.steps).
    kernels::adam_update(t, std::get<AdamOptions>(h), decay_);
}

}  // namespace ember::optim

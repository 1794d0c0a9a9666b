// LAMB and LARS: the hyper-parameters into one fused call per batch
// (kernels::lamb_update, kernels::lars_update: two passes, norms then update).
#include "optim/lamb.h"

#include "kernels/optim.h"

namespace ember::optim {

namespace {
Hyper lamb_hyper(const LAMBOptions& o) {
    EMBER_CHECK(o.lr >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 &&
                    o.eps >= 0 && o.weight_decay >= 0,
                "LAMB: need lr >= 0, 0 <= beta1, beta2 < 1, eps >= 0, weight_decay >= 0");
    Hyper h;
    h.lr = o.lr;
    h.beta1 = o.beta1;
    h.beta2 = o.beta2;
    h.eps = o.eps;
    h.weight_decay = o.weight_decay;
    return h;
}
Hyper lars_hyper(const LARSOptions& o) {
    EMBER_CHECK(o.lr >= 0 && o.momentum >= 0 && o.momentum < 1 && o.weight_decay >= 0 &&
                    o.trust_coefficient > 0 && o.eps >= 0,
                "LARS: need lr >= 0, 0 <= momentum < 1, weight_decay >= 0, "
                "trust_coefficient > 0, eps >= 0");
    Hyper h;
    h.lr = o.lr;
    h.momentum = o.momentum;
    h.weight_decay = o.weight_decay;
    h.trust_coefficient = o.trust_coefficient;
    h.eps = o.eps;
    return h;
}
}  // namespace

LAMB::LAMB(std::vector<GroupSpec> groups, const LAMBOptions& o)
    : Optimizer(std::move(groups), lamb_hyper(o)) {}

void LAMB::update(const Hyper& h, const kernels::UpdateTensors& t) {
    kernels::lamb_update(t, {h.lr, h.beta1, h.beta2, h.eps, h.weight_decay, 1});  // own counts
}

LARS::LARS(std::vector<GroupSpec> groups, const LARSOptions& o)
    : Optimizer(std::move(groups), lars_hyper(o)) {}

void LARS::exclude(size_t group, bool on) {
    EMBER_CHECK(group < groups().size(), name(), ": no group ", group);
    groups()[group].hyper.exclude_from_lars = on;
}

void LARS::update(const Hyper& h, const kernels::UpdateTensors& t) {
    kernels::lars_update(t, {h.lr, h.momentum, h.weight_decay, h.trust_coefficient, h.eps,
                             h.exclude_from_lars, true});  // `first` from the own counts
}

}  // namespace ember::optim

// LAMB and LARS: the hyper-parameters into one fused call per group
// (kernels::lamb_update, kernels::lars_update: two passes, norms then update).
#include "optim/lamb.h"

#include "kernels/optim.h"

namespace ember::optim {

namespace {
const LAMBOptions& checked(const LAMBOptions& o) {
    EMBER_CHECK(o.lr >= 0 && o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 &&
                    o.eps >= 0 && o.weight_decay >= 0,
                "LAMB: need lr >= 0, 0 <= beta1, beta2 < 1, eps >= 0, weight_decay >= 0");
    return o;
}
const LARSOptions& checked(const LARSOptions& o) {
    EMBER_CHECK(o.lr >= 0 && o.momentum >= 0 && o.momentum < 1 && o.weight_decay >= 0 &&
                    o.trust_coefficient > 0 && o.eps >= 0,
                "LARS: need lr >= 0, 0 <= momentum < 1, weight_decay >= 0, "
                "trust_coefficient > 0, eps >= 0");
    return o;
}
}  // namespace

LAMB::LAMB(std::vector<GroupSpec> groups, const LAMBOptions& o)
    : Optimizer(std::move(groups), checked(o)) {}

const LAMBOptions& LAMB::options(size_t group) const {
    EMBER_CHECK(group < groups().size(), name(), ": no group ", group);
    return std::get<LAMBOptions>(groups()[group].hyper);
}

void LAMB::update(const Hyper& h, const kernels::UpdateTensors& t) {
    kernels::lamb_update(t, std::get<LAMBOptions>(h));  // the step from each tensor's count
}

LARS::LARS(std::vector<GroupSpec> groups, const LARSOptions& o)
    : Optimizer(std::move(groups), checked(o)) {}

const LARSOptions& LARS::options(size_t group) const {
    EMBER_CHECK(group < groups().size(), name(), ": no group ", group);
    return std::get<LARSOptions>(groups()[group].hyper);
}

void LARS::exclude(size_t group, bool on) {
    EMBER_CHECK(group < groups().size(), name(), ": no group ", group);
    std::get<LARSOptions>(groups()[group].hyper).exclude = on;
}

void LARS::update(const Hyper& h, const kernels::UpdateTensors& t) {
    kernels::lars_update(t, std::get<LARSOptions>(h));  // `first` from each tensor's count
}

}  // namespace ember::optim

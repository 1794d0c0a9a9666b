// SGD: the hyper-parameters into one fused kernels::sgd_update call per group.
#include "optim/sgd.h"

#include "kernels/optim.h"

namespace ember::optim {

namespace {
const SGDOptions& checked(const SGDOptions& o) {
    EMBER_CHECK(o.lr >= 0 && o.momentum >= 0 && o.momentum < 1 && o.dampening >= 0 &&
                    o.dampening <= 1 && o.weight_decay >= 0,
                "SGD: need lr >= 0, 0 <= momentum < 1, 0 <= dampening <= 1, weight_decay >= 0; "
                "got lr ", o.lr, ", momentum ", o.momentum, ", dampening ", o.dampening,
                ", weight_decay ", o.weight_decay);
    EMBER_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0),
                "SGD: Nesterov momentum needs momentum > 0 and dampening 0, got momentum ",
                o.momentum, ", dampening ", o.dampening);
    return o;
}
}  // namespace

SGD::SGD(std::vector<GroupSpec> groups, const SGDOptions& o)
    : Optimizer(std::move(groups), checked(o)) {}

const SGDOptions& SGD::options(size_t group) const {
    EMBER_CHECK(group < groups().size(), name(), ": no group ", group);
    return std::get<SGDOptions>(groups()[group].hyper);
}

void SGD::update(const Hyper& h, const kernels::UpdateTensors& t) {
    // `first` (and, with a schedule's tables, the LR and momentum) comes from each
    // parameter's own step count (t.steps).
    kernels::sgd_update(t, std::get<SGDOptions>(h));
}

}  // namespace ember::optim

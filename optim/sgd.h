// SGD with momentum, dampening, Nesterov momentum and L2 weight decay, with
// PyTorch's update rule, fused across each group's tensors.
#pragma once

#include "optimizer.h"

namespace ember::optim {

/// SGD's hyper-parameters: lr, momentum, dampening, weight_decay, nesterov —
/// the struct each group keeps and the update kernel takes
/// (kernels/optim_hyper.h).
using SGDOptions = kernels::SgdArgs;

/// d = g + wd·p; with momentum b = μ·b + (1 − τ)·d (b = d on the first step),
/// d = nesterov ? d + μ·b : b; p −= lr·d.
class SGD : public Optimizer {
public:
    SGD(std::vector<GroupSpec> groups, const SGDOptions& o = {});
    SGD(std::vector<Tensor> params, const SGDOptions& o = {})
        : SGD(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "SGD"; }
    /// Group `group`'s hyper-parameters (as Adam::options).
    const SGDOptions& options(size_t group) const;

protected:
    void update(const Hyper& h, const kernels::UpdateTensors& t) override;
    int buffers(const Hyper& h) const override {
        return std::get<SGDOptions>(h).momentum != 0 ? 1 : 0;
    }
    const char* buffer_name(int) const override { return "momentum_buffer"; }
};

}  // namespace ember::optim

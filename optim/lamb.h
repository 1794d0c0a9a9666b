// The layer-wise adaptive optimizers for large batches: LAMB (You et al.
// 2019) and LARS (You et al. 2017), fused across each group's tensors.
#pragma once

#include "optimizer.h"

namespace ember::optim {

/// LAMB's hyper-parameters: lr, beta1, beta2, eps, weight_decay — the struct
/// each group keeps and the update kernel takes (kernels/optim_hyper.h).
using LAMBOptions = kernels::LambArgs;

/// LAMB: Adam's bias-corrected direction r = m̂ / (sqrt(v̂) + eps) + wd·p,
/// scaled per tensor by the trust ratio φ(‖p‖) / ‖r‖ with φ(x) = min(x, 10)
/// (1 when either norm is 0): p −= lr · trust · r.
class LAMB : public Optimizer {
public:
    LAMB(std::vector<GroupSpec> groups, const LAMBOptions& o = {});
    LAMB(std::vector<Tensor> params, const LAMBOptions& o = {})
        : LAMB(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "LAMB"; }
    /// Group `group`'s hyper-parameters (as Adam::options).
    const LAMBOptions& options(size_t group) const;

protected:
    void update(const Hyper& h, const kernels::UpdateTensors& t) override;
    int buffers(const Hyper&) const override { return 2; }
    const char* buffer_name(int k) const override { return k == 0 ? "exp_avg" : "exp_avg_sq"; }
};

/// LARS's hyper-parameters: lr, momentum, weight_decay, trust_coefficient η,
/// eps, exclude — the struct each group keeps and the update kernel takes
/// (kernels/optim_hyper.h).
using LARSOptions = kernels::LarsArgs;

/// LARS: a local learning rate per tensor, λ = η·‖w‖ / (‖g‖ + wd·‖w‖ + eps)
/// (1 when either norm is 0); b = μ·b + lr·λ·(g + wd·w) (b starts at 0),
/// w −= b. Groups with `exclude` set (LARS::exclude; biases and norms) take
/// plain momentum SGD: λ = 1 and no weight decay.
class LARS : public Optimizer {
public:
    LARS(std::vector<GroupSpec> groups, const LARSOptions& o = {});
    LARS(std::vector<Tensor> params, const LARSOptions& o = {})
        : LARS(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "LARS"; }
    /// Group `group`'s hyper-parameters (as Adam::options).
    const LARSOptions& options(size_t group) const;
    /// Marks group `group` as excluded from the trust ratio and weight decay.
    void exclude(size_t group, bool on = true);

protected:
    void update(const Hyper& h, const kernels::UpdateTensors& t) override;
    int buffers(const Hyper&) const override { return 1; }
    const char* buffer_name(int) const override { return "momentum_buffer"; }
};

}  // namespace ember::optim

// The layer-wise adaptive optimizers for large batches: LAMB (You et al.
// 2019) and LARS (You et al. 2017), fused across each group's tensors.
#pragma once

#include "optimizer.h"

namespace ember::optim {

struct LAMBOptions {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-6;
    double weight_decay = 0;
};

/// LAMB: Adam's bias-corrected direction r = m̂ / (sqrt(v̂) + eps) + wd·p,
/// scaled per tensor by the trust ratio φ(‖p‖) / ‖r‖ with φ(x) = min(x, 10)
/// (1 when either norm is 0): p −= lr · trust · r.
class LAMB : public Optimizer {
public:
    LAMB(std::vector<GroupSpec> groups, const LAMBOptions& o = {});
    LAMB(std::vector<Tensor> params, const LAMBOptions& o = {})
        : LAMB(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "LAMB"; }

protected:
    void update(const Hyper& h, const kernels::UpdateTensors& t) override;
    int buffers(const Hyper&) const override { return 2; }
    const char* buffer_name(int k) const override { return k == 0 ? "exp_avg" : "exp_avg_sq"; }
    /// momentum() and a schedule's momentum table are beta1.
    double Hyper::*momentum_field() const override { return &Hyper::beta1; }
};

struct LARSOptions {
    double lr = 0.1;
    double momentum = 0.9;
    double weight_decay = 0;
    double trust_coefficient = 1e-3;  ///< η
    double eps = 1e-8;
};

/// LARS: a local learning rate per tensor, λ = η·‖w‖ / (‖g‖ + wd·‖w‖ + eps)
/// (1 when either norm is 0); b = μ·b + lr·λ·(g + wd·w) (b starts at 0),
/// w −= b. Groups with Hyper::exclude_from_lars (lars_groups() puts biases
/// and norms there) take plain momentum SGD: λ = 1 and no weight decay.
class LARS : public Optimizer {
public:
    LARS(std::vector<GroupSpec> groups, const LARSOptions& o = {});
    LARS(std::vector<Tensor> params, const LARSOptions& o = {})
        : LARS(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "LARS"; }
    /// Marks group `group` as excluded from the trust ratio and weight decay.
    void exclude(size_t group, bool on = true);

protected:
    void update(const Hyper& h, const kernels::UpdateTensors& t) override;
    int buffers(const Hyper&) const override { return 1; }
    const char* buffer_name(int) const override { return "momentum_buffer"; }
};

}  // namespace ember::optim

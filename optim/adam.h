// Adam and AdamW with PyTorch's update rule (bias-corrected moments, eps added
// after the square root; Adam's weight decay is L2 on the gradient, AdamW's is
// decoupled: p ← p·(1 − lr·wd); optionally AMSGrad), fused across each
// group's tensors.
#pragma once

#include "optimizer.h"

namespace ember::optim {

/// Adam's hyper-parameters: lr, beta1, beta2, eps, weight_decay, amsgrad —
/// the struct each group keeps and the update kernel takes
/// (kernels/optim_hyper.h).
using AdamOptions = kernels::AdamArgs;

/// Adam (Kingma & Ba): weight decay, if any, as L2 added to the gradient.
class Adam : public Optimizer {
public:
    Adam(std::vector<GroupSpec> groups, const AdamOptions& o = {});
    Adam(std::vector<Tensor> params, const AdamOptions& o = {})
        : Adam(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "Adam"; }
    /// Group `group`'s hyper-parameters (where a schedule's tables are set,
    /// lr(group) and momentum(group) say the LR and beta1 the next step takes).
    const AdamOptions& options(size_t group) const;

protected:
    Adam(std::vector<GroupSpec> groups, const AdamOptions& o, kernels::AdamDecay decay);
    void update(const Hyper& h, const kernels::UpdateTensors& t) override;
    int buffers(const Hyper& h) const override { return std::get<AdamOptions>(h).amsgrad ? 3 : 2; }
    const char* buffer_name(int k) const override {
        return k == 0 ? "exp_avg" : k == 1 ? "exp_avg_sq" : "max_exp_avg_sq";
    }

private:
    kernels::AdamDecay decay_;
};

/// AdamW's options: Adam's with PyTorch's default weight decay for AdamW,
/// 1e-2 (so `{.lr = 3e-4}` decays as torch.optim.AdamW does). The groups
/// keep them as AdamOptions.
struct AdamWOptions {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 1e-2;
    bool amsgrad = false;  ///< as AdamOptions::amsgrad
    explicit operator AdamOptions() const { return {lr, beta1, beta2, eps, weight_decay, amsgrad}; }
};

/// AdamW (Loshchilov & Hutter): decoupled weight decay. ember's default optimizer.
class AdamW : public Adam {
public:
    AdamW(std::vector<GroupSpec> groups, const AdamWOptions& o = {});
    AdamW(std::vector<Tensor> params, const AdamWOptions& o = {})
        : AdamW(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "AdamW"; }
};

}  // namespace ember::optim

// Adam and AdamW with PyTorch's update rule (bias-corrected moments, eps added
// after the square root; Adam's weight decay is L2 on the gradient, AdamW's is
// decoupled: p ← p·(1 − lr·wd); optionally AMSGrad), fused across each
// group's tensors.
#pragma once

#include "optimizer.h"

namespace ember::optim {

struct AdamOptions {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0;
    /// AMSGrad (Reddi et al. 2018): the denominator takes the running maximum
    /// of exp_avg_sq, kept as a third buffer, max_exp_avg_sq (as PyTorch).
    bool amsgrad = false;
};

/// Adam (Kingma & Ba): weight decay, if any, as L2 added to the gradient.
class Adam : public Optimizer {
public:
    Adam(std::vector<GroupSpec> groups, const AdamOptions& o = {});
    Adam(std::vector<Tensor> params, const AdamOptions& o = {})
        : Adam(std::vector<GroupSpec>{{std::move(params)}}, o) {}
    const char* name() const override { return "Adam"; }

protected:
    Adam(std::vector<GroupSpec> groups, const AdamOptions& o, bool decoupled);
    void update(const Hyper& h, const kernels::UpdateTensors& t) override;
    int buffers(const Hyper& h) const override { return h.amsgrad ? 3 : 2; }
    const char* buffer_name(int k) const override {
        return k == 0 ? "exp_avg" : k == 1 ? "exp_avg_sq" : "max_exp_avg_sq";
    }
    /// momentum() and a schedule's momentum table are beta1.
    double Hyper::*momentum_field() const override { return &Hyper::beta1; }

private:
    bool decoupled_;
};

struct AdamWOptions {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 1e-2;
    bool amsgrad = false;  ///< as AdamOptions::amsgrad
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

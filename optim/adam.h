// Adam and AdamW with PyTorch's update rule (bias-corrected moments, eps added
// after the square root; Adam's weight decay is L2 on the gradient, AdamW's is
// decoupled: p ← p·(1 − lr·wd)), fused across each group's tensors.
#pragma once

#include "optim/optimizer.h"

namespace ember::optim {

struct AdamOptions {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0;
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
    void update(const Hyper& h, const Batch& b) override;
    int buffers(const Hyper&) const override { return 2; }
    const char* buffer_name(int k) const override { return k == 0 ? "exp_avg" : "exp_avg_sq"; }
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

// Each optimizer rule's hyper-parameters, one struct per optimizer: what a
// user gives (optim::AdamOptions is AdamArgs, optim::SGDOptions SgdArgs,
// optim::LAMBOptions LambArgs, optim::LARSOptions LarsArgs), what each
// parameter group keeps and what the fused update kernels take
// (kernels/optim.h), in f64: the kernels form their coefficients from these
// in f64 and round once (Note [Coefficients in f64] in kernels/optim_math.h).
// The step count is no hyper-parameter: the update call takes it where the
// tensors carry none (Note [Device step counts] in kernels/optim_args.h).
// No Tensor: ember/ember.h exports these with the optimizers.
#pragma once

namespace ember::kernels {

/// Adam and AdamW.
struct AdamArgs {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-8;
    double weight_decay = 0;
    /// AMSGrad (Reddi et al. 2018): the denominator takes the running maximum
    /// of exp_avg_sq, kept as a third buffer, max_exp_avg_sq (as PyTorch).
    bool amsgrad = false;
};
/// How Adam's weight decay applies: Adam's L2 term added to the gradient,
/// or AdamW's decoupled decay of the weights, p ← p·(1 − lr·wd).
enum class AdamDecay { l2, decoupled };

/// SGD.
struct SgdArgs {
    double lr = 1e-2;
    double momentum = 0;
    double dampening = 0;
    double weight_decay = 0;
    bool nesterov = false;
};
/// LAMB.
struct LambArgs {
    double lr = 1e-3;
    double beta1 = 0.9, beta2 = 0.999;
    double eps = 1e-6;
    double weight_decay = 0;
};
/// LARS.
struct LarsArgs {
    double lr = 0.1;
    double momentum = 0.9;
    double weight_decay = 0;
    double trust_coefficient = 1e-3;  ///< η
    double eps = 1e-8;
    bool exclude = false;  ///< plain momentum SGD: no trust ratio, no weight decay (biases, norms)
};

}  // namespace ember::kernels

// Convolution + batch norm done right (docs/tips.md #12): ConvBN / ConvBNReLU blocks
// whose conv has no bias (BN's mean subtraction cancels it), a check that
// names any conv-with-bias feeding a BatchNorm2d, and fold_batchnorm for
// inference.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers.h"

namespace ember::nn {

/// Conv2d (always without bias) → BatchNorm2d (→ ReLU for ConvBNReLU).
/// Children: "conv", "bn" (an Identity once folded).
class ConvBN : public Module {
  public:
    ConvBN(int64_t in_channels, int64_t out_channels, Pair kernel_size, Conv2dOptions conv = {},
           BatchNormOptions bn = {}, bool relu = false);
    Tensor forward(const Tensor& x) override;
    /// relu(forward(x) + residual), a residual block's end, for a ConvBN
    /// without its own ReLU: when bn uses batch statistics (training, or no
    /// running statistics), one fused batch norm + add + ReLU op
    /// (ember::batch_norm_add_relu) instead of three. residual has the
    /// output's shape (and, then, its dtype).
    Tensor forward_add_relu(const Tensor& x, const Tensor& residual);
    std::string type_name() const override { return relu_ ? "ConvBNReLU" : "ConvBN"; }

    std::shared_ptr<Conv2d> conv;
    std::shared_ptr<BatchNorm2d> bn;  // null once folded into conv

    /// Folds bn into conv (see fold_batchnorm); returns false if already folded.
    bool fold();

  private:
    // Whether bn runs on batch statistics (training, or no running ones): the fused ops' case.
    bool fused_bn() const;
    // BatchNorm2d::forward's batch counter, for the fused ops.
    void count_batch();

    bool relu_;
};

class ConvBNReLU : public ConvBN {
  public:
    ConvBNReLU(int64_t in_channels, int64_t out_channels, Pair kernel_size, Conv2dOptions conv = {},
               BatchNormOptions bn = {})
        : ConvBN(in_channels, out_channels, kernel_size, conv, bn, true) {}
};

/// The warning for `prev` → `next` if prev is a Conv2d with a bias and next a
/// BatchNorm2d, else "". Names are the modules' dotted names.
std::string conv_bias_before_batchnorm_warning(const Module& prev, const Module& next,
                                               const std::string& prev_name,
                                               const std::string& next_name);
/// Every conv-with-bias → BatchNorm2d pair inside the model's Sequentials,
/// as warning lines naming both modules.
std::vector<std::string> find_conv_bias_before_batchnorm(Module& model);

/// For inference: folds each BatchNorm2d into the Conv2d before it (inside
/// Sequentials and ConvBN blocks): W' = W·s, b' = (b − mean)·s + β with
/// s = γ / √(running_var + eps); the BN becomes an Identity. The model's
/// outputs in eval mode are unchanged (up to rounding). Returns how many were folded.
int fold_batchnorm(Module& model);

}  // namespace ember::nn

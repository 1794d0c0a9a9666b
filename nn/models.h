// The reference models, constructed by name: `mlp` (784-512-256-10, ReLU) and
// `resnet8` (a small residual network for 28×28 images). Parameter counts are
// in docs/nn.md and pinned by tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "conv_bn.h"

namespace ember::nn {

/// Flatten → Linear(784, 512) → ReLU → Linear(512, 256) → ReLU → Linear(256, 10).
/// Takes [N, 784] or [N, 1, 28, 28]. 535,818 parameters.
std::shared_ptr<Sequential> mlp(int64_t in_features = 784, int64_t num_classes = 10);

/// Two 3×3 ConvBN layers (the first with ReLU) plus the input, then ReLU; the
/// shortcut is a 1×1 ConvBN when the stride or the width changes, else identity.
class BasicBlock : public Module {
public:
    BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride);
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "BasicBlock"; }
    std::shared_ptr<ConvBNReLU> conv1;
    std::shared_ptr<ConvBN> conv2;
    std::shared_ptr<ConvBN> shortcut;  // null: identity
};

/// Stem ConvBNReLU(C→16, 3×3) → BasicBlocks 16 (stride 1), 32 (stride 2), 64
/// (stride 2) → global average pool → Linear(64, classes). Convs have no bias.
/// For 1×28×28 input, 10 classes: 77,754 parameters (+ BN running statistics).
class ResNet8 : public Module {
public:
    explicit ResNet8(int64_t in_channels = 1, int64_t num_classes = 10);
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "ResNet8"; }
    std::shared_ptr<ConvBNReLU> stem;
    std::shared_ptr<BasicBlock> layer1, layer2, layer3;
    std::shared_ptr<Linear> fc;
};

/// The reference models by name ("mlp", "resnet8"); an unknown name is an
/// error listing the known ones.
std::shared_ptr<Module> make_model(const std::string& name);
std::vector<std::string> model_names();

}  // namespace ember::nn

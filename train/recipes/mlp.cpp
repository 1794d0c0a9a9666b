// The mlp recipe: nn::mlp (784-512-256-10, ReLU) on Fashion-MNIST, random
// horizontal flips, accuracy; each layer a checkpoint segment.
#include "autograd/checkpoint.h"
#include "nn/models.h"
#include "train/recipes/images.h"
#include "train/recipes/recipes.h"

namespace ember::train {

namespace {

// --checkpoint-activations: every layer of the Sequential its own segment.
Tensor forward(nn::Module& model, const Tensor& x, bool checkpoint) {
    if (!checkpoint) return model(x);
    auto& seq = dynamic_cast<nn::Sequential&>(model);
    Tensor h = x;
    for (size_t i = 0; i < seq.size(); ++i) {
        std::shared_ptr<nn::Module> layer = seq[i];
        h = autograd::checkpoint(
            [layer](const std::vector<Tensor>& in) { return layer->forward(in[0]); }, {h});
    }
    return h;
}

}  // namespace

Recipe mlp_recipe() {
    return image_recipe(
        "mlp", "784-512-256-10 ReLU network on Fashion-MNIST (535,818 parameters)",
        3e-3,  // AdamW's one-cycle peak for 5 epochs at batch 128 (docs/train.md)
        [] { return nn::mlp(); }, [] { return data::Compose{data::RandomHorizontalFlip()}; },
        forward);
}

}  // namespace ember::train

// The reference models.
#include "nn/models.h"

namespace ember::nn {

std::shared_ptr<Sequential> mlp(int64_t in_features, int64_t num_classes) {
    return std::make_shared<Sequential>(Flatten(), Linear(in_features, 512), ReLU(),
                                        Linear(512, 256), ReLU(), Linear(256, num_classes));
}

BasicBlock::BasicBlock(int64_t in_channels, int64_t out_channels, int64_t stride) {
    conv1 = register_module(
        "conv1", ConvBNReLU(in_channels, out_channels, 3, {.stride = stride, .padding = 1}));
    conv2 = register_module("conv2", ConvBN(out_channels, out_channels, 3, {.padding = 1}));
    if (stride != 1 || in_channels != out_channels)
        shortcut =
            register_module("shortcut", ConvBN(in_channels, out_channels, 1, {.stride = stride}));
}

Tensor BasicBlock::forward(const Tensor& x) {
    const Tensor skip = shortcut ? shortcut->forward(x) : x;
    // relu(conv2(conv1(x)) + skip), the last three ops fused when training.
    return conv2->forward_add_relu(conv1->forward(x), skip);
}

ResNet8::ResNet8(int64_t in_channels, int64_t num_classes) {
    stem = register_module("stem", ConvBNReLU(in_channels, 16, 3, {.padding = 1}));
    layer1 = register_module("layer1", BasicBlock(16, 16, 1));
    layer2 = register_module("layer2", BasicBlock(16, 32, 2));
    layer3 = register_module("layer3", BasicBlock(32, 64, 2));
    fc = register_module("fc", Linear(64, num_classes));
}

Tensor ResNet8::forward(const Tensor& x) {
    EMBER_CHECK(x.dim() == 4, "ResNet8: expected images [N, C, H, W], got ", shape_str(x.shape()));
    Tensor h = layer3->forward(layer2->forward(layer1->forward(stem->forward(x))));
    h = adaptive_avg_pool2d(h, {1, 1}).flatten(1);
    return fc->forward(h);
}

std::vector<std::string> model_names() { return {"mlp", "resnet8"}; }

std::shared_ptr<Module> make_model(const std::string& name) {
    if (name == "mlp") return mlp();
    if (name == "resnet8") return std::make_shared<ResNet8>();
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    EMBER_FAIL("unknown model '", name, "' (known: ", known, ")");
}

}  // namespace ember::nn

// ember's C++ API in one page: define a model, train it a few steps on
// synthetic data with SGD, save its weights.
// Usage: train_small [weights.safetensors]
#include <ember/ember.h>

#include <iostream>

using namespace ember;

struct Net : nn::Module {
    std::shared_ptr<nn::ConvBNReLU> features =
        register_module("features", nn::ConvBNReLU(1, 8, 3, {.padding = 1}));
    std::shared_ptr<nn::Linear> classifier = register_module("classifier", nn::Linear(8 * 14 * 14, 10));

    Tensor forward(const Tensor& x) override {
        Tensor h = max_pool2d(features->forward(x), {2, 2});  // [N, 8, 14, 14]
        return classifier->forward(h.flatten(1));
    }
};

int main(int argc, char** argv) {
    const std::string path = argc > 1 ? argv[1] : "small.safetensors";
    manual_seed(0);
    Net model;
    const Tensor images = randn({64, 1, 28, 28});  // a fixed synthetic batch
    const Tensor labels = randint(0, 10, {64});

    optim::SGD opt(model.parameters(), {.lr = 0.05});
    double first = 0, last = 0;
    for (int step = 0; step < 30; ++step) {
        Tensor loss = cross_entropy(model(images), labels);
        opt.zero_grad();
        loss.backward();
        opt.step();  // fused, and not part of the graph
        last = loss.item();
        if (step == 0) first = last;
        if (step % 10 == 0) std::cout << "step " << step << "  loss " << last << "\n";
    }
    nn::save(model, path);
    std::cout << "loss " << first << " -> " << last << ", " << nn::parameter_count(model)
              << " parameters saved to " << path << "\n";
    return last < 0.5 * first ? 0 : 1;  // training must have made progress
}

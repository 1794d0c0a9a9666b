// A model of one's own trained through the training library (ember::train):
// the loop, checkpoints, metrics.jsonl, the progress lines and curves.svg of
// `ember train`, for any nn::Module. It trains twice on 4,000 Fashion-MNIST
// images (synthetic ones with --synthetic): straight through, then stopped
// after 40 steps and resumed from the checkpoint — and checks that both runs
// end with the same weights, byte for byte.
// Usage: train_custom OUT_DIR [--synthetic]
#include <ember/train.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

using namespace ember;

// A small convolutional network.
struct Net : nn::Module {
    std::shared_ptr<nn::ConvBNReLU> features =
        register_module("features", nn::ConvBNReLU(1, 8, 3, {.padding = 1}));
    std::shared_ptr<nn::Linear> classifier = register_module("classifier", nn::Linear(8 * 14 * 14, 10));

    Tensor forward(const Tensor& x) override {
        Tensor h = max_pool2d(features->forward(x), {2, 2});  // [N, 8, 14, 14]
        return classifier->forward(h.flatten(1));
    }
};

// The task: the model, its data and transforms; the loss (cross-entropy)
// and the metric (accuracy) are the defaults. build_run seeds the default
// generator before calling this, so the initialization is the same each time.
train::Task make_task(bool synthetic) {
    train::Task t;
    t.name = "tiny-cnn";
    t.model = std::make_shared<Net>();
    if (synthetic) {  // one task: samples 0..3999 train, 4000..4999 test
        auto all = std::make_shared<data::SyntheticDataset>(5000, Shape{1, 28, 28}, 10, 1);
        t.train_data = std::make_shared<data::Subset>(all, 4000);
        t.eval_data = std::make_shared<data::Subset>(all, 1000, 4000);
    } else {
        t.train_data = std::make_shared<data::Subset>(
            std::make_shared<data::FashionMNIST>(data::Split::train), 4000);
        t.eval_data = std::make_shared<data::Subset>(
            std::make_shared<data::FashionMNIST>(data::Split::test), 1000);
    }
    t.train_transforms = data::Compose{data::RandomHorizontalFlip()};
    return t;
}

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int main(int argc, char** argv) try {
    if (argc < 2) {
        std::fprintf(stderr, "usage: train_custom OUT_DIR [--synthetic]\n");
        return 2;
    }
    const std::string out = argv[1];
    const bool synthetic = argc > 2 && std::string(argv[2]) == "--synthetic";
    auto task = [&] { return make_task(synthetic); };

    train::TrainConfig c;  // the settings of `ember train`, with its defaults
    c.epochs = 2;
    c.batch_size = 64;
    c.lr = 2e-3;
    c.log_every = 20;
    c.seed = 3;

    c.out = out + "/straight";
    train::Run straight = train::build_run(c, task);
    const train::Outcome a = train::fit(straight);

    c.out = out + "/stopped";
    c.stop_after = 40;  // as if interrupted (Ctrl-C) after step 40, mid-epoch 1
    train::Run stopped = train::build_run(c, task);
    const train::Outcome b = train::fit(stopped);
    if (!b.interrupted) throw Error("the run did not stop after step 40");

    c.resume = c.out;  // a new process would rebuild its run the same way
    c.stop_after = 0;
    train::Run resumed = train::build_run(c, task);
    const train::Outcome r = train::fit(resumed);

    std::printf("straight: %lld steps, test accuracy %.2f%%; stopped at step %lld and resumed: "
                "%.2f%%\n",
                (long long)a.position.step, 100 * a.last.accuracy, (long long)b.position.step,
                100 * r.last.accuracy);
    const std::string w1 = bytes_of(a.run_dir + "/last.safetensors");
    const std::string w2 = bytes_of(r.run_dir + "/last.safetensors");
    if (w1.empty() || w1 != w2) throw Error("the resumed run's weights differ from the straight run's");
    std::printf("resumed weights == uninterrupted weights, byte for byte (%zu bytes)\n", w1.size());
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "train_custom: %s\n", e.what());
    return 1;
}

// Trains a reference model on Fashion-MNIST with the threaded loader and
// AdamW, then reports test accuracy and what the loader measured.
// Usage: train_fashion_mnist [mlp|resnet8] [steps] [minimum test accuracy]
#include <ember/ember.h>

#include <cstdio>
#include <cstdlib>
#include <string>

using namespace ember;

int main(int argc, char** argv) try {
    const std::string model_name = argc > 1 ? argv[1] : "mlp";
    const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 500;
    const double min_accuracy = argc > 3 ? std::atof(argv[3]) : 0.0;

    manual_seed(0);
    auto train = std::make_shared<data::FashionMNIST>(data::Split::train);
    auto test = std::make_shared<data::FashionMNIST>(data::Split::test);
    const data::Normalize normalize({0.2860}, {0.3530});  // the training set's mean and std
    data::Loader loader(train, {.batch_size = 128, .seed = 1},
                        data::Compose{data::RandomHorizontalFlip(), normalize});
    auto model = nn::make_model(model_name);
    optim::AdamW opt(optim::decay_groups(*model, 0.01), {.lr = 1e-3});

    int64_t step = 0;
    for (int64_t epoch = 0; step < steps; ++epoch) {
        // An epoch without batches would make this loop spin forever.
        if (loader.size() == 0) throw Error("the training loader yields no batches");
        for (data::Batch& batch : loader.epoch(epoch)) {
            Tensor loss = cross_entropy((*model)(batch.input), batch.target);
            opt.zero_grad();
            loss.backward();
            opt.step();
            if (++step % 100 == 0) std::printf("step %lld  loss %.4f\n", (long long)step, loss.item());
            if (step == steps) break;
        }
    }
    const data::LoaderStats s = loader.stats();
    std::printf("loader: %d workers, %.0f samples/s, waited %.1f%% of the time, workers busy %.1f%%\n",
                s.workers, s.samples_per_second, 100 * s.wait_fraction, 100 * s.worker_busy_fraction);

    model->eval();
    NoGradGuard no_grad;
    data::Loader test_loader(test, {.batch_size = 1000, .shuffle = false}, data::Compose{normalize});
    double correct = 0;
    for (data::Batch& batch : test_loader.epoch(0))
        correct += sum(eq(argmax((*model)(batch.input), 1), batch.target).to(DType::f64)).item();
    const double accuracy = correct / double(test->size());
    std::printf("%s, %lld steps: test accuracy %.2f%%\n", model_name.c_str(), (long long)steps,
                100 * accuracy);
    return accuracy >= min_accuracy ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return 1;
}

// Fashion-MNIST (or its synthetic stand-in) as an image task's data.
#include "train/recipes/images.h"

#include "data/fashion_mnist.h"
#include "data/subset.h"
#include "kernels/factories.h"

namespace ember::train {

namespace {

// Fashion-MNIST's training-set mean and standard deviation.
const data::ChannelStats kFashionStats{{0.2860}, {0.3530}};
// data "synthetic": Fashion-MNIST's split sizes.
constexpr int64_t kSyntheticTrain = 60000, kSyntheticTest = 10000;

// One task of 70,000 samples under `seed` (the classes' prototypes depend on
// it; the first 60,000 train, the rest test), computed once into memory
// (220 MB, in parallel), so that the loader reads a sample as it reads
// Fashion-MNIST's — a copy — rather than drawing 784 values.
std::shared_ptr<const data::Dataset> synthetic_data(uint64_t seed) {
    const int64_t n = kSyntheticTrain + kSyntheticTest;
    const data::SyntheticDataset task(n, {1, 28, 28}, 10, seed);
    Tensor inputs = empty({n, 1, 28, 28});
    Tensor labels = empty({n}, {DType::i64});
    float* in = inputs.data<float>();
    int64_t* label = labels.data<int64_t>();
    const int64_t numel = task.sample_numel();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) label[i] = task.read(i, in + i * numel);
    return std::make_shared<data::TensorDataset>(inputs, labels);
}

}  // namespace

std::vector<std::string> image_datasets() { return {"fashion-mnist", "synthetic"}; }

void set_image_data(Task& task, const TrainConfig& c, data::Compose augment) {
    std::shared_ptr<const data::Dataset> train;
    if (c.data == "synthetic") {
        train = synthetic_data(c.seed);
        task.eval_data = std::make_shared<data::Subset>(train, kSyntheticTest, kSyntheticTrain);
        train = std::make_shared<data::Subset>(train, kSyntheticTrain);
        task.data_name = "synthetic (data::SyntheticDataset, seeded)";
    } else {
        train = std::make_shared<data::FashionMNIST>(data::Split::train, c.data_dir);
        task.eval_data = std::make_shared<data::FashionMNIST>(data::Split::test, c.data_dir);
        task.data_name = "Fashion-MNIST";
    }
    if (c.limit > 0 && c.limit < train->size()) train = std::make_shared<data::Subset>(train, c.limit);
    task.train_data = train;
    augment.add(data::Normalize(kFashionStats));
    task.train_transforms = std::move(augment);
    task.eval_transforms = data::Compose{data::Normalize(kFashionStats)};
    task.memory_format = effective_memory_format(c);
}

Recipe image_recipe(const std::string& name, const std::string& summary, double adamw_lr,
                    std::function<std::shared_ptr<nn::Module>()> model,
                    std::function<data::Compose()> augment, ForwardFn forward) {
    Recipe r;
    r.name = name;
    r.summary = summary;
    r.defaults.model = name;
    r.adamw_lr = adamw_lr;
    r.datasets = image_datasets();
    r.make_task = [=](const TrainConfig& c) {
        Task t;
        t.name = name;
        set_image_data(t, c, augment());
        t.model = model();
        t.forward = forward;
        return t;
    };
    r.example_batch = random_image_batch;
    return r;
}

data::Batch random_image_batch(const Task&, const TrainConfig&, int64_t n, Device device) {
    data::Batch b;
    b.input = randn({n, 1, 28, 28}, {DType::f32, device});
    b.target = randint(0, 10, {n}, {DType::i64, device});
    return b;
}

}  // namespace ember::train

// A training run's parts built from its configuration: the model, the data
// and their loaders, the optimizer with its groups, the LR schedule, the loss
// scaler — shared by `ember train`, `ember eval`, `ember lr-find` and
// `ember max-batch`.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "dist/ddp.h"
#include "ember/ember.h"
#include "optim/schedule.h"
#include "tools/train/config.h"

namespace ember::train {

/// The training data of a configuration: Fashion-MNIST's train split (its
/// first --limit samples) and its test split, from --data-dir; or, with
/// `--data synthetic`, 60,000 and 10,000 samples of data::SyntheticDataset
/// under --seed, of the same shape, computed once into memory.
struct Data {
    std::shared_ptr<const data::Dataset> train, test;
};
Data load_data(const TrainConfig& c);

/// The transforms of the training samples (the model's augmentation, then
/// normalization) and of the test samples (normalization only).
data::Compose train_transforms(const TrainConfig& c);
data::Compose test_transforms();

/// Everything a run trains with, built (and seeded) from its configuration.
struct Run {
    /// --ddp: the job's communicator (first, so it is destroyed last).
    std::shared_ptr<dist::Communicator> comm;
    TrainConfig config;
    Device device;
    Data data;
    std::shared_ptr<nn::Module> model;
    std::unique_ptr<data::Loader> loader;
    std::unique_ptr<optim::Optimizer> optimizer;
    std::unique_ptr<optim::Schedule> schedule;
    std::unique_ptr<amp::GradScaler> scaler;  ///< f16 only
    int64_t batches_per_epoch = 0;            ///< micro-batches
    int64_t steps_per_epoch = 0;              ///< optimizer steps: ceil(batches / accumulate)
    int64_t total_steps = 0;
    std::unique_ptr<dist::DistributedDataParallel> ddp;  ///< --ddp

    /// The rank that prints and writes the run's files: rank 0, or the only one.
    bool lead() const { return !comm || comm->rank() == 0; }
    int world_size() const { return comm ? comm->size() : 1; }
};

/// Seeds the default generator with --seed, builds the model on its device,
/// the loader, the optimizer (decay_groups: no weight decay on biases and
/// norms), the schedule over every step of every epoch, and the scaler.
Run build_run(const TrainConfig& c);

/// The optimizer --optimizer names over `groups`, with --lr, --weight-decay
/// and --momentum.
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainConfig& c,
                                                 std::vector<optim::GroupSpec> groups);
/// The schedule --schedule names over `total_steps`, behind --warmup steps.
std::unique_ptr<optim::Schedule> make_schedule(const TrainConfig& c, optim::Optimizer& opt,
                                               int64_t total_steps);

/// Test loss (mean cross-entropy) and accuracy of `model` on `test`, in eval
/// mode, without recording, under autocast when amp is on.
struct Evaluation {
    double loss = 0, accuracy = 0;
    int64_t samples = 0;
};
Evaluation evaluate(nn::Module& model, const data::Dataset& test, Device device,
                    const std::string& amp, int workers,
                    MemoryFormat format = MemoryFormat::contiguous);
/// The batch's images in `format` (anything not 4-d as it is).
Tensor in_format(const Tensor& images, MemoryFormat format);

}  // namespace ember::train

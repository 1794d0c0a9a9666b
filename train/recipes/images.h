// What the image recipes (mlp, resnet8) share: Fashion-MNIST or its
// synthetic stand-in as a task's data, its normalization, and random batches
// of its shape.
#pragma once

#include "../recipe.h"

namespace ember::train {

/// The datasets an image recipe accepts: Fashion-MNIST (the default) and
/// "synthetic" (seeded samples of its shape, no files).
std::vector<std::string> image_datasets();

/// `task`'s data under c: Fashion-MNIST's train split (its first c.limit
/// samples) and its test split, from c.data_dir; or, with data "synthetic",
/// 60,000 and 10,000 samples of data::SyntheticDataset under c.seed, of the
/// same shape, computed once into memory. The evaluation transforms
/// normalize; the training ones apply `augment` first. Sets the task's
/// memory format from c.
void set_image_data(Task& task, const TrainConfig& c, data::Compose augment);

/// A batch of n standard normal 1×28×28 images and random classes on `device`.
data::Batch random_image_batch(const Task& task, const TrainConfig& c, int64_t n, Device device);

/// An image recipe: `name`'s task from `model` and `augment` on the image
/// data above, with `forward` for checkpointed activations, AdamW's peak LR
/// `adamw_lr`, and TrainConfig's defaults otherwise.
Recipe image_recipe(const std::string& name, const std::string& summary, double adamw_lr,
                    std::function<std::shared_ptr<nn::Module>()> model,
                    std::function<data::Compose()> augment, ForwardFn forward);

}  // namespace ember::train

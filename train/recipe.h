// A reference model's recipe: its task built from a configuration (model,
// data, transforms, metric, checkpoint segments), its defaults (dataset, peak
// LR and whatever else differs from TrainConfig's), and a random batch of its
// shape for `ember max-batch`. Each recipe is one file in train/recipes/, and
// recipes() lists them all (train/recipes.cpp): the trainer, `ember eval`,
// `lr-find` and `max-batch` ask the recipe, never the model's name.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "../data/loader.h"
#include "config.h"
#include "task.h"

namespace ember::train {

struct Recipe {
    std::string name;
    /// One line for --help: what the model is and what it trains on.
    std::string summary;
    /// A configuration with this recipe's defaults: model = name, and the
    /// dataset, epochs, batch size, ... where they differ from TrainConfig's.
    TrainConfig defaults;
    /// AdamW's peak LR when --lr is not given (docs/train.md, "Default learning rates").
    double adamw_lr = 3e-3;
    /// The layout --memory-format auto picks on the CPU: the faster one for
    /// this model, as measured (docs/train.md, "Memory format").
    MemoryFormat cpu_format = MemoryFormat::contiguous;
    /// The names `data` accepts; the first is the default.
    std::vector<std::string> datasets;
    /// Whether `data` may also be a path (a file or a directory) instead.
    bool data_paths = false;
    /// The task of `c` on the CPU: its data (the training split cut to
    /// c.limit) and its model, initialized from the default generator.
    std::function<Task(const TrainConfig& c)> make_task;
    /// The settings a weights file of this recipe records (its metadata:
    /// the model's shape, the data), applied to `c` for `ember eval`. Unset:
    /// nothing recorded beyond the model's name.
    std::function<void(TrainConfig& c, const std::map<std::string, std::string>& metadata)>
        from_metadata;
    /// A batch of `n` random samples shaped as `task`'s (input and target)
    /// on `device`, for `ember max-batch`.
    std::function<data::Batch(const Task& task, const TrainConfig& c, int64_t n, Device device)>
        example_batch;
};

/// Every recipe, in the order --help lists them.
const std::vector<Recipe>& recipes();
/// The recipe named `name`; an Error lists the known ones.
const Recipe& recipe(const std::string& name);
/// The recipes' names.
std::vector<std::string> recipe_names();

}  // namespace ember::train

// What a training run trains: a model, its training and evaluation data, how
// its output is scored (the loss, and the metric that picks the best
// weights), and how its forward is cut into segments for activation
// checkpointing. A reference model's recipe (train/recipe.h) builds one from
// a configuration; a program of one's own builds one by hand
// (tools/examples/train_custom.cpp).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "../autograd/ops.h"
#include "../data/dataset.h"
#include "../data/transforms.h"
#include "../nn/module.h"

namespace ember::train {

/// What decides which weights are the best (best.safetensors): the highest
/// accuracy (classification) or the lowest evaluation loss (language models).
enum class Metric { accuracy, loss };

/// One evaluation of a model on held-out data.
struct Evaluation {
    double loss = 0;       ///< mean loss per target (per sample; per token for text)
    double accuracy = -1;  ///< top-1 accuracy under Metric::accuracy, else -1
    int64_t samples = 0;   ///< samples evaluated
    int64_t targets = 0;   ///< targets scored: samples, or tokens
};

/// The model's output for an input batch. `checkpoint`: recompute the
/// activations of each segment in backward instead of keeping them.
using ForwardFn = std::function<Tensor(nn::Module& model, const Tensor& input, bool checkpoint)>;
/// The loss of an output batch against its targets.
using CriterionFn = std::function<Tensor(const Tensor& output, const Tensor& target, Reduction)>;

/// Everything train() needs beyond the settings of the run.
struct Task {
    /// Recorded in the weights and checkpoints ("ember.model"); a checkpoint
    /// of another task is refused on resume.
    std::string name;
    std::shared_ptr<nn::Module> model;
    std::shared_ptr<const data::Dataset> train_data, eval_data;
    data::Compose train_transforms, eval_transforms;
    /// The layout 4-d input batches are given to the model in.
    MemoryFormat memory_format = MemoryFormat::contiguous;
    /// Default (unset): model(input), or the whole forward as one checkpointed segment.
    ForwardFn forward;
    /// Default (unset): cross_entropy of the output's last dim against the
    /// targets ([N, C] against classes [N]; [N, T, V] against tokens [N, T]).
    CriterionFn criterion;
    Metric metric = Metric::accuracy;
    /// Samples per batch of an evaluation.
    int64_t eval_batch_size = 1000;
    /// Samples an epoch draws from the training data (a fresh draw each
    /// epoch, data::LoaderOptions::samples_per_epoch); 0: all of them.
    int64_t samples_per_epoch = 0;
    /// How the start table names the data ("Fashion-MNIST"), its held-out
    /// split ("test") and a sample ("samples").
    std::string data_name = "data", eval_split = "test", sample_noun = "samples";
    /// Text models: what a token is ("char", "byte"), for the bits per token
    /// reported beside the loss; empty otherwise.
    std::string token_name;
    /// Extra string metadata of the weights files (a tokenizer, the model's
    /// shape), beside "ember.model".
    std::map<std::string, std::string> metadata;
    /// Files written into the run directory when it is made (name → content:
    /// tokenizer.json).
    std::map<std::string, std::string> files;
};

/// task.forward, or its default.
Tensor task_forward(const Task& task, const Tensor& input, bool checkpoint);
/// task.criterion, or its default.
Tensor task_loss(const Task& task, const Tensor& output, const Tensor& target,
                 Reduction reduction = Reduction::mean);

/// The batch's images in `format` (anything not 4-d as it is).
Tensor in_format(const Tensor& images, MemoryFormat format);

/// The mean loss (and, under Metric::accuracy, the accuracy) of the task's
/// model on its evaluation data, in eval mode, without recording, under
/// autocast when amp is on ("bf16", "f16"; "off").
Evaluation evaluate(const Task& task, Device device, const std::string& amp, int workers);

}  // namespace ember::train

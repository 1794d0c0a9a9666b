// A training run's checkpoint: everything that decides the next step — the
// model's parameters and buffers, the optimizer's state, the schedule, the
// loss scaler, the position (step, epoch, next batch) and the default
// generator — in one safetensors file written atomically, so a run resumes
// bit-exactly and a run killed mid-write keeps its previous checkpoint.
#pragma once

#include <cstdint>
#include <string>

#include "tools/train/run.h"

namespace ember::train {

/// Where a run stands: after `step` optimizer steps, the next micro-batch is
/// batch `batch` of epoch `epoch`.
struct Position {
    int64_t step = 0;
    int64_t epoch = 0;
    int64_t batch = 0;
    double best_accuracy = -1;  ///< the best test accuracy so far (-1: none yet)
};

/// RUN_DIR/checkpoint/state.safetensors.
std::string checkpoint_path(const std::string& run_dir);

/// Writes the checkpoint of `run` at `pos` (atomically: temp file, fsync, rename).
void save_checkpoint(const std::string& run_dir, const Run& run, const Position& pos);

/// The checked JSON a checkpoint carries (its "ember.checkpoint" metadata).
struct CheckpointMeta {
    Position position;
    uint64_t rng_seed = 0, rng_offset = 0;
    std::string optimizer, schedule, scaler;  ///< each part's own state JSON ("" : no scaler)
};

/// Parses the checkpoint JSON and checks it against the run: its model name,
/// its batches per epoch, whether it scales the loss, and its world size. Any other text is
/// an Error naming the field. The parts' own JSON is checked by their
/// load_state.
CheckpointMeta parse_checkpoint_meta(const std::string& json, const std::string& model,
                                     int64_t batches_per_epoch, bool scaler, int world_size = 1);

/// Restores `run` (built from the same configuration) and returns the
/// position. A corrupt or mismatched checkpoint is an Error naming the file
/// and the problem (the run is then unusable: build it again).
Position load_checkpoint(const std::string& run_dir, Run& run);

/// The model weights of a weights file (plain state dict: last.safetensors,
/// best.safetensors) or of a checkpoint, loaded into `model` (strict).
void load_weights(nn::Module& model, const std::string& path);

}  // namespace ember::train

// A training run's checkpoint: everything that decides the next step — the
// model's parameters and buffers, the optimizer's state, the schedule, the
// loss scaler, the position (step, epoch, next batch) and the default
// generator — in one safetensors file written atomically, so a run resumes
// bit-exactly and a run killed mid-write keeps its previous checkpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "run.h"

namespace ember::train {

/// Where a run stands: after `step` optimizer steps, the next micro-batch is
/// batch `batch` of epoch `epoch`.
struct Position {
    int64_t step = 0;
    int64_t epoch = 0;
    int64_t batch = 0;
    /// The best evaluation so far by the task's metric: the highest accuracy
    /// or the lowest loss (none before the first evaluation).
    std::optional<double> best;
    /// A resume with --extend: the --epochs the checkpoint was written
    /// under and the LR its next step would have had (the start table
    /// compares them with the new span's); epochs 0 where nothing changed.
    struct Extension {
        int64_t epochs = 0;
        double next_lr = 0;
    } extended;
};

/// Whether `e` beats `best` by `metric`.
bool improves(Metric metric, const Evaluation& e, const std::optional<double>& best);
/// The score of `e` that Position::best keeps.
double score(Metric metric, const Evaluation& e);

/// RUN_DIR/checkpoint/state.safetensors.
std::string checkpoint_path(const std::string& run_dir);

/// Writes the checkpoint of `run` at `pos` (atomically: temp file, fsync,
/// rename), with a CRC-32 of every tensor, then keeps the newest
/// run.config.keep_checkpoints of them (keep_checkpoints).
void save_checkpoint(const std::string& run_dir, const Run& run, const Position& pos);

/// With keep > 1, the checkpoint just written at `step` is also kept as
/// checkpoint/step-<N>.safetensors (a hard link); of those, only the newest
/// `keep` stay (none with keep = 1).
void keep_checkpoints(const std::string& run_dir, int64_t step, int64_t keep);

/// The checked JSON a checkpoint carries (its "ember.checkpoint" metadata).
struct CheckpointMeta {
    Position position;
    uint64_t rng_seed = 0, rng_offset = 0;
    std::string optimizer, schedule, scaler;  ///< each part's own state JSON ("" : no scaler)
};

/// An intact checkpoint that does not fit the run's configuration (another
/// model, world size, data stream or --epochs): no older kept checkpoint may
/// stand in for it (that would silently roll the run back), so a resume
/// refuses at once.
struct ResumeMismatch : Error {
    using Error::Error;
};

/// What a run expects of its checkpoint.
struct CheckpointExpect {
    std::string model;  ///< the task's name
    int64_t batches_per_epoch = 0;
    bool scaler = false;  ///< loss scaling
    int world_size = 1;
    Metric metric = Metric::accuracy;  ///< which best score it keeps
    /// The settings that decide the data stream (which sample each step
    /// sees): a checkpoint that records them must match (0 / "": not checked).
    int64_t batch_size = 0, limit = 0, accumulate = 0;
    uint64_t seed = 0;
    std::string data;
    int64_t epochs = 0;  ///< the run's --epochs: not below the checkpoint's epoch (0: not checked)
    /// --extend: --epochs may differ from the one the checkpoint was written
    /// under (else that is an Error: the schedule spans the run's length).
    bool extend = false;
};

/// Parses the checkpoint JSON and checks it against the run: its model name,
/// its batches per epoch, whether it scales the loss, its world size, its
/// best score, the settings of its data stream (a change mid-run would train
/// samples twice or skip them: an Error names the flag), its step against
/// its epoch and batch, and --epochs against its epoch. Any other text is an
/// Error naming the field. The parts' own JSON is checked by their load_state.
CheckpointMeta parse_checkpoint_meta(const std::string& json, const CheckpointExpect& expect);

/// Restores `run` (built from the same configuration) from the newest
/// checkpoint that can be used — state.safetensors, else the kept step-N
/// files from the newest — saying on stderr which ones could not be used
/// and why (never silently); an Error when none can. Returns the
/// position. A corrupt or mismatched checkpoint is an Error naming the file
/// and the problem (the run is then unusable: build it again).
Position load_checkpoint(const std::string& run_dir, Run& run);

/// The task name a weights file ("ember.model") or a checkpoint records;
/// none if it records none.
std::optional<std::string> recorded_model(const std::string& path);

/// The model weights of a weights file (plain state dict: last.safetensors,
/// best.safetensors) or of a checkpoint, loaded into `model` (strict).
void load_weights(nn::Module& model, const std::string& path);

}  // namespace ember::train

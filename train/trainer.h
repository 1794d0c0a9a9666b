// The training loop: epochs of accumulated micro-batches, mixed precision,
// clipping, the schedule, logging (loss read from the device only at log
// intervals, docs/tips.md #8), evaluation, weights and checkpoints, and a clean stop
// on SIGINT/SIGTERM; and fit(), the whole run around it (the run directory,
// resuming, the start table). docs/train.md.
#pragma once

#include <string>

#include <optional>

#include "checkpoint.h"
#include "divergence.h"
#include "run.h"

namespace ember::train {

/// What train() did.
struct Outcome {
    bool interrupted = false;  ///< stopped by a signal (or --stop-after) after a checkpoint
    int signal = 0;            ///< the signal that stopped it (0: none, or a rank other than this)
    bool complete = false;     ///< --resume of a run that had already trained every epoch
    /// Set when the run stopped because it diverged (--on-nonfinite): no
    /// weights or checkpoint of the diverged state were written.
    std::optional<Divergence> diverged;
    Position position;
    Evaluation last;           ///< the last evaluation
    std::string run_dir;       ///< where fit() wrote the run
};

/// Trains `run` from `start` (a fresh run: all zeros) to the end of its last
/// epoch in `run_dir`: metrics.jsonl, last.safetensors, best.safetensors and
/// checkpoint/. Prints progress to stdout (a bar redrawn in place on a
/// terminal, lines otherwise). `config_toml`, when given, is written to
/// run_dir/config.toml together with the first checkpoint (fit: a resume
/// with --extend records its new length only once a checkpoint of it exists).
Outcome train(Run& run, const std::string& run_dir, Position start,
              const std::string& config_toml = {});

struct FitOptions {
    /// Written to RUN_DIR/config.toml (atomically) when not empty: the
    /// command line's configuration, which --resume reads back.
    std::string config_toml;
    /// Print the start table (the lead rank only).
    bool print = true;
};

/// The whole run: the directory (run.config.resume's, which must hold a
/// checkpoint; else run.config.out, new or without a run in it, by default
/// runs/<task>-<YYYYmmdd-HHMMSS>; with ddp, rank 0 makes it and every rank
/// learns its name), the checkpoint restored when resuming, the start
/// table, then train(). An Error for a directory it cannot use, before any
/// step.
Outcome fit(Run& run, const FitOptions& options = {});

/// The start table: the model and its parameters, the data, the optimizer,
/// the precision, the device, the ranks and the run directory.
void print_start(const Run& run, const std::string& run_dir, const Position& pos);

}  // namespace ember::train

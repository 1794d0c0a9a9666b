// The training loop of `ember train`: epochs of accumulated micro-batches,
// mixed precision, clipping, the schedule, logging (loss read from the device
// only at log intervals, TIPS #8), evaluation, weights and checkpoints, and a
// clean stop on SIGINT/SIGTERM. docs/train.md.
#pragma once

#include <string>

#include "tools/train/checkpoint.h"
#include "tools/train/run.h"

namespace ember::train {

/// What train() did.
struct Outcome {
    bool interrupted = false;  ///< stopped by a signal after a checkpoint
    Position position;
    Evaluation last;           ///< the last evaluation
};

/// Trains `run` from `start` (a fresh run: all zeros) to the end of its last
/// epoch in `run_dir`: metrics.jsonl, last.safetensors, best.safetensors and
/// checkpoint/. Prints progress to stdout (a bar redrawn in place on a
/// terminal, lines otherwise).
Outcome train(Run& run, const std::string& run_dir, Position start);

}  // namespace ember::train

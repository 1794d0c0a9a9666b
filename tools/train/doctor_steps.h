// `ember doctor`'s measurements: a trial's run stepped as `ember train`
// steps it, timed round by round, and the findings of one profiled stretch
// of steps and of the model and its inputs (tools/train/doctor.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "train/run.h"

namespace ember::train {

/// A trial's run, built once (model, loader, optimizer) and stepped round
/// after round, the loader's epochs following one another.
class TrialRunner {
  public:
    /// `threads`: the OpenMP threads its steps run with.
    TrialRunner(const TrainConfig& c, int threads);

    /// One optimizer step (its micro-batches); returns the samples it took.
    int64_t step();
    /// `warmup` steps, then at least `steps` timed ones and, with `seconds`
    /// > 0, more until that long has passed: their samples per second.
    /// `peak` (if given) receives the timed steps' peak tensor memory beyond
    /// what was held before them.
    double time(int64_t warmup, int64_t steps, double seconds, size_t* peak);
    /// The next training batch (a new epoch when one ends).
    std::optional<data::Batch> next();
    const Run& run() const { return run_; }

  private:
    TrainConfig config_;
    int threads_;
    Run run_;
    int64_t epoch_ = 0;
    bool begun_ = false;
};

/// Something the doctor noticed: the tip it concerns (0: none), "ok" or
/// "warn", and what it says.
struct Finding {
    int tip = 0;
    std::string level;
    std::string text;
};

/// From `steps` steps of `base` under the profiler: host synchronizations
/// per step (by op), the loader's share of the step, ops taking a large
/// share of it at a small FLOP rate.
std::vector<Finding> profile_findings(TrialRunner& base, int64_t steps);
/// From the model and one batch: convolutions with a bias before a batch
/// norm, the inputs' mean and deviation, non-deterministic algorithms.
std::vector<Finding> model_findings(TrialRunner& base);

}  // namespace ember::train

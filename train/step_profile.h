// --profile A:B in the training loop (docs/profiling.md): a Profiler over a
// window of steps, each step a "step N" range, then RUN_DIR/trace.json and
// the summary printed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "../kernels/profile.h"
#include "config.h"
#include "metrics.h"
#include "run.h"

namespace ember::train {

/// The steps after the A-th up to the B-th of --profile A:B, each a range
/// from the end of the step before (its loader wait included) to the end
/// of its optimizer step. Only the lead rank profiles; a run without
/// --profile costs nothing here.
class StepProfile {
  public:
    StepProfile(const Run& run, std::string run_dir, Progress* progress);

    /// A step begins now (after `done` steps): starts the profiler at the
    /// window's start, and the step's range.
    void begin(int64_t done);
    /// Step `step` (its number in metrics.jsonl) ended; at the window's end
    /// the trace is written and the summary printed.
    void end(int64_t step);
    /// Writes what was recorded, if anything (a run that ends inside the
    /// window: fewer steps). Once per run.
    void finish();

  private:
    const Run& run_;
    std::string run_dir_;
    Progress* progress_;
    std::optional<ProfileWindow> window_;
    std::optional<kernels::Profiler> prof_;
    double step_start_ = 0;
};

}  // namespace ember::train

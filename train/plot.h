// A training run's metrics.jsonl (schema: docs/train.md, "metrics.jsonl"),
// read and validated, and its curves.svg: training and test loss, test
// accuracy and learning rate, stacked on one step axis.
#pragma once

#include <cmath>
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "svg.h"

namespace ember::train {

/// A number a line did not have (absent or null).
inline constexpr double kMissing = NAN;

/// A `"kind": "step"` line: the optimizer step it was logged after.
struct StepMetrics {
    int64_t step = 0;    ///< required
    int64_t epoch = -1;  ///< -1 when absent
    double loss = kMissing, lr = kMissing, samples_per_s = kMissing, data_wait = kMissing,
           host_syncs = kMissing, time_s = kMissing;
};

/// A `"kind": "epoch"` line, written when an epoch ends.
struct EpochMetrics {
    int64_t epoch = 0;  ///< required
    int64_t step = 0;   ///< required: the epoch's last step, where its points are drawn
    double train_loss = kMissing, test_loss = kMissing, test_acc = kMissing,
           epoch_time_s = kMissing, samples_per_s = kMissing, data_wait = kMissing;
};

/// The lines of a metrics file, in file order.
struct Metrics {
    std::vector<StepMetrics> steps;
    std::vector<EpochMetrics> epochs;
};

/// Reads metrics lines from `in`; `name` (the file) leads error messages.
/// Each non-blank line must be a JSON object with a string "kind"; "step"
/// and "epoch" lines are kept, other kinds skipped, unknown keys ignored.
/// Required integers must be present and >= 0; any other known key must be
/// a number or null. A line that breaks a rule is an ember::Error naming
/// `name`, the line number and what is wrong.
Metrics parse_metrics(std::istream& in, const std::string& name);
/// parse_metrics of the file at `path` (an ember::Error if it cannot be read).
Metrics read_metrics(const std::string& path);

/// The metrics with each step and each epoch once, from its last line, in
/// order: a resumed run may log again the steps after its last checkpoint.
Metrics latest_metrics(const Metrics& m);

/// The three charts of curves.svg (loss, test accuracy, learning rate), with
/// the same step axis; `run_name` goes in the first title.
std::vector<LineChart> curves_charts(const Metrics& m, const std::string& run_name);

/// Reads RUN_DIR/metrics.jsonl and writes RUN_DIR/curves.svg (atomically);
/// returns the SVG's path. Errors name the directory or the file.
std::string plot_run(const std::string& run_dir);

}  // namespace ember::train

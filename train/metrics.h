// What a run reports while it trains: metrics.jsonl (one JSON object per log
// step and per epoch; schema in docs/train.md) and the progress shown on
// stdout — a bar redrawn in place on a terminal, plain lines otherwise.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <optional>

#include "config.h"
#include "task.h"

namespace ember::train {

struct StepRecord {
    int64_t step = 0, epoch = 0;
    double loss = 0, lr = 0, samples_per_s = 0, data_wait = 0;
    int64_t host_syncs = 0;  ///< reads of device values since the last record
    double time_s = 0;
    int64_t first_step = 0;  ///< the first step the record's loss averages (the last is `step`)
};

struct EpochRecord {
    int64_t epoch = 0, step = 0;
    double train_loss = 0;
    double epoch_time_s = 0, samples_per_s = 0, data_wait = 0;
    int world_size = 1;  ///< ranks that trained (--ddp); samples_per_s counts them all
    std::optional<Evaluation> eval;  ///< the epoch's evaluation, if it had one
};

/// RUN_DIR/metrics.jsonl, appended a line at a time (flushed). Opened for a
/// run that has made `keep_until` steps, it first drops the lines of later
/// steps (what a run wrote after its last checkpoint before it stopped).
class MetricsLog {
public:
    MetricsLog(const std::string& run_dir, int64_t keep_until);
    ~MetricsLog();
    MetricsLog(const MetricsLog&) = delete;
    MetricsLog& operator=(const MetricsLog&) = delete;
    void step(const StepRecord& r);
    void epoch(const EpochRecord& r);
    /// An event of a step: {"kind": kind, "step", "loss", "message"} — a loss
    /// spike ("warning") or the end of a diverged run ("diverged").
    void event(const std::string& kind, int64_t step, double loss, const std::string& message);
    /// {"kind": "fingerprint", "step", "params", "params_hex"}: the
    /// parameters' checksum after `step` (--fingerprint-every).
    void fingerprint(int64_t step, double value);
    /// The largest time_s of the step records kept at construction (0 when
    /// none): where the run's clock stood, for a resume to continue from.
    double time_s() const { return time_s_; }

private:
    void write(const std::string& line);
    std::string path_;
    std::FILE* f_ = nullptr;
    double time_s_ = 0;
};

/// A cheap checksum of the model's parameters: the L2 norm of them all,
/// computed in f64 (kernels::global_norm of f64 copies; deterministic on
/// either device). A change of one ULP in one f32 parameter of typical size
/// among n changes the norm by about 2^-23 / n of itself, above f64's
/// rounding (2^-52) for n up to about 2^28; it is a checksum, not a hash: a
/// sign flip or two swapped values keep it.
double parameter_fingerprint(const nn::Module& model);

/// "0x1.8p+1": the exact bits of a double, as C's %a prints them.
std::string hex_double(double x);

/// The progress display: on a terminal a bar per epoch (step/total,
/// samples/s, loss, LR, ETA) redrawn in place at every step; otherwise one
/// line per log record. One line per epoch either way.
class Progress {
public:
    Progress(const TrainConfig& c, const Task& task, int64_t steps_per_epoch);
    void begin_epoch(int64_t epoch, int64_t first_step_in_epoch);
    void tick(int64_t step);
    void log(const StepRecord& r);
    void end_epoch(const EpochRecord& r);
    /// Ends a bar left on the current line.
    void end_line();
    /// Prints "warning: <text>" on a line of its own.
    void warn(const std::string& text);

private:
    void draw(int64_t step);
    const TrainConfig& c_;
    const Task& task_;
    int64_t steps_per_epoch_;
    bool tty_;
    int64_t epoch_ = 0, epoch_first_step_ = 0, base_step_ = 0;
    StepRecord last_;
    bool have_last_ = false, on_line_ = false;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace ember::train

// `ember lr-find` and `ember max-batch`: flags and commands.
#pragma once

#include <string>

#include "train/config.h"

namespace CLI {
class App;
}

namespace ember::train {

struct LrFindConfig {
    TrainConfig train;  ///< the model, data and optimizer flags it shares with train
    double start_lr = 1e-7, end_lr = 10;
    int64_t steps = 100;
    std::string svg = "lr_find.svg";
};

struct MaxBatchConfig {
    TrainConfig train;
    double budget_mib = 4096;   ///< CPU: what one training step may hold
    int64_t max_batch = 65536;  ///< the largest batch tried
};

CLI::App* add_lr_find_command(CLI::App& root, LrFindConfig& c);
CLI::App* add_max_batch_command(CLI::App& root, MaxBatchConfig& c);

/// Sweeps the LR over `steps` training steps of the configuration
/// (optim::lr_find), prints the suggested LR and draws loss against LR.
/// `app`: the parsed subcommand (its flags not given take the recipe's defaults).
int run_lr_find(CLI::App& app, LrFindConfig c);
/// Finds the largest batch whose training step fits (GPU: no out-of-memory
/// error; CPU: its peak tensor memory within --memory-budget), by doubling
/// then bisecting (never past the training set's size), and prints it with
/// a scaled LR: the square-root rule for Adam-type optimizers, the linear
/// one for SGD and LARS (docs/tips.md #4).
int run_max_batch(CLI::App& app, MaxBatchConfig c);

/// Whether one training step of `config` at `batch` fits: on a GPU, no
/// out-of-memory error; on the CPU, the step's peak of tensor memory within
/// `budget_mib`. `peak` receives the step's peak in bytes.
bool step_fits(const TrainConfig& config, int64_t batch, double budget_mib, size_t* peak);

struct BatchSearch {
    int64_t batch = 1;      ///< the largest that fitted
    size_t peak_bytes = 0;  ///< its step's peak
    bool limited = false;   ///< it is `max_batch` (larger ones were not tried)
};
/// The largest batch up to `max_batch` whose step fits (doubling, then
/// bisecting); an Error when not even 1 does.
BatchSearch largest_batch(const TrainConfig& c, double budget_mib, int64_t max_batch);
/// The LR for `batch` from c's LR at c.batch_size: the square-root rule for
/// Adam-type optimizers, the linear rule for SGD and LARS (docs/tips.md #4).
double scaled_lr(const TrainConfig& c, int64_t batch);

}  // namespace ember::train

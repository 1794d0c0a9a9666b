// The configuration of a training run: every `ember train` flag, its default,
// its check, and the TOML form the run directory keeps (config.toml, read
// back by --resume; `--config FILE` reads one, flags override it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace CLI {
class App;
}

namespace ember::train {

struct TrainConfig {
    std::string model = "mlp";              ///< mlp | resnet8
    std::string data = "fashion-mnist";
    std::string data_dir;                   ///< "": FashionMNIST::default_root()
    int64_t epochs = 5;
    int64_t batch_size = 128;
    std::optional<double> lr;               ///< "": the optimizer's default
    std::string optimizer = "adamw";        ///< adamw | adam | sgd | lamb | lars
    std::optional<double> weight_decay;     ///< "": the optimizer's default
    double momentum = 0.9;                  ///< sgd, lars
    std::string schedule = "onecycle";      ///< onecycle | cyclic | cosine | step | constant
    int64_t warmup = 0;                     ///< linear warm-up steps before the schedule
    std::string device = "auto";            ///< cpu | cuda | cuda:N | auto
    std::string amp = "off";                ///< off | bf16 | f16
    int workers = 1;                        ///< loader threads (0: load on the training thread)
    int64_t accumulate = 1;                 ///< micro-batches per optimizer step
    double clip_grad = 0;                   ///< max global gradient norm; 0: off
    bool checkpoint_activations = false;
    std::string memory_format = "contiguous";  ///< contiguous | channels_last
    uint64_t seed = 0;
    bool deterministic = false;
    bool sync_debug = false;
    bool anomaly = false;
    std::string out;                        ///< "": runs/<model>-<timestamp>
    std::string resume;                     ///< a run directory to continue in place
    int64_t save_every = 0;                 ///< steps between checkpoints; 0: each epoch
    int64_t eval_every = 1;                 ///< epochs between evaluations
    int64_t log_every = 50;                 ///< steps between progress lines and metrics
    int64_t limit = 0;                      ///< the first N training samples; 0: all
    int threads = 0;                        ///< OpenMP threads; 0: the default
    bool ddp = false;                       ///< data parallelism over the launcher's ranks
    double dist_timeout = 300;              ///< seconds a collective may take (--ddp)
    int64_t stop_after = 0;                 ///< stop as if interrupted after this step; 0: never
    bool dump_config = false;               ///< print the effective configuration and exit
    std::string config_file;                ///< --config (already read by expand_config)
};

/// Adds every flag of `ember train` to `app` (with its --config file option),
/// bound to `c`.
void add_train_options(CLI::App& app, TrainConfig& c);

/// The command line with `ember train`'s config file read in: for
/// `--config FILE` (or, with `--resume DIR` and no --config, DIR/config.toml)
/// each `key = value` line of FILE becomes `--key=value` right after
/// "train", before the flags given, which therefore override it. Comments
/// (#), blank lines and empty values are skipped; `true`/`false` turn flags
/// on or leave them off. A missing or unreadable file is an Error.
std::vector<std::string> expand_config(int argc, char** argv);

/// The flags a config file's text stands for (`key = value` → "--key=value",
/// `key = true` → "--key"), in order; `name` is the file's, for messages. What
/// expand_config reads files with, and what the train_files fuzz target feeds.
std::vector<std::string> config_args(const std::string& text, const std::string& name);

/// The largest config file expand_config reads.
inline constexpr uint64_t kMaxConfigBytes = 1 << 20;

/// Checks the values together (names, ranges, combinations); an Error names
/// the flag. Resolves nothing.
void validate(const TrainConfig& c);

/// The learning rate and weight decay the run uses: the flags', or the
/// optimizer's defaults (adamw 3e-3 for mlp and 1e-2 for resnet8 / 0.05,
/// adam 1e-3 / 0, sgd 0.1 / 5e-4,
/// lamb 2e-3 / 0.01, lars 1.0 / 5e-4).
double effective_lr(const TrainConfig& c);
double effective_weight_decay(const TrainConfig& c);
/// The layout of the image batches, and so of every activation: --memory-format.
MemoryFormat effective_memory_format(const TrainConfig& c);

/// The device the run uses: `auto` is cuda:0 when a GPU is present, else the CPU.
Device resolve_device(const TrainConfig& c);

}  // namespace ember::train

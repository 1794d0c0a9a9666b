// The configuration of a training run: every setting `ember train` has, with
// its default, the checks of the values together, and the values that depend
// on others (the LR and weight decay an optimizer defaults to, the device
// `auto` stands for). The command line binds its flags to these fields
// (tools/train/options.cpp); a C++ program fills them itself.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>
#include <string>

#include "../core/device.h"
#include "../core/tensor.h"

namespace ember::train {

struct TrainConfig {
    std::string model = "mlp";              ///< a recipe's name (train/recipe.h)
    std::string data = "fashion-mnist";     ///< a dataset the recipe knows
    std::string data_dir;                   ///< "": the dataset's default folder
    int64_t epochs = 5;
    int64_t batch_size = 128;
    std::optional<double> lr;               ///< unset: the optimizer's default (the recipe's for adamw)
    std::string optimizer = "adamw";        ///< adamw | adam | sgd | lamb | lars
    std::optional<double> weight_decay;     ///< unset: the optimizer's default
    double momentum = 0.9;                  ///< sgd, lars
    std::string schedule = "onecycle";      ///< onecycle | cyclic | cosine | step | constant
    int64_t warmup = 0;                     ///< linear warm-up steps before the schedule
    std::string device = "auto";            ///< cpu | cuda | cuda:N | auto
    std::string amp = "off";                ///< off | bf16 | f16
    int workers = 1;                        ///< loader threads (0: load on the training thread)
    int64_t accumulate = 1;                 ///< micro-batches per optimizer step
    double clip_grad = 0;                   ///< max global gradient norm; 0: off
    bool checkpoint_activations = false;
    std::string memory_format = "auto";     ///< auto | contiguous | channels_last
    // ---- Text models (gpt) ----
    int64_t layers = 4;                     ///< transformer blocks
    int64_t heads = 4;                      ///< attention heads per block
    int64_t embd = 128;                     ///< model width (a multiple of heads)
    int64_t block = 256;                    ///< context length in tokens
    double dropout = 0;                     ///< attention and residual dropout
    std::string tokenizer = "char";         ///< char | byte
    uint64_t seed = 0;
    bool deterministic = false;
    bool sync_debug = false;
    bool anomaly = false;
    std::string on_nonfinite = "stop";      ///< stop | skip | continue (train/divergence.h)
    int64_t max_skips = 10;                 ///< skip: stop after this many skipped steps in a row
    std::string out;                        ///< "": runs/<model>-<timestamp>
    std::string resume;                     ///< a run directory to continue in place, or "auto" (with out)
    /// --resume with another --epochs: re-span the schedule over the new
    /// length (without it a changed --epochs is refused).
    bool extend = false;
    std::string stop_signals = "INT,TERM,USR1";  ///< signals that checkpoint and stop the run
    /// --resume auto found no checkpoint in `out`: the new run may replace the
    /// files of one that stopped before its first checkpoint.
    bool restart = false;
    int64_t save_every = 0;                 ///< steps between checkpoints; 0: each epoch
    int64_t keep_checkpoints = 1;           ///< checkpoints kept (the newest and K − 1 before it)
    int64_t eval_every = 1;                 ///< epochs between evaluations
    int64_t log_every = 50;                 ///< steps between progress lines and metrics
    int64_t fingerprint_every = 0;          ///< steps between parameter checksums in metrics.jsonl; 0: none
    int64_t limit = 0;                      ///< the first N training samples; 0: all
    int threads = 0;                        ///< OpenMP threads; 0: the default
    bool ddp = false;                       ///< data parallelism over the launcher's ranks
    double dist_timeout = 300;              ///< seconds a collective may take (--ddp)
    int64_t stop_after = 0;                 ///< stop as if interrupted after this step; 0: never
    /// "A:B": profile the steps after the A-th up to the B-th (metrics'
    /// steps A+1 to B) into RUN_DIR/trace.json and print a summary; "": off.
    std::string profile;
    bool dump_config = false;               ///< print the effective configuration and exit
    std::string config_file;                ///< --config (already read by expand_config)
};

/// The names each choice-valued setting accepts.
const std::vector<std::string>& optimizer_names();
const std::vector<std::string>& schedule_names();
const std::vector<std::string>& amp_names();
const std::vector<std::string>& memory_format_names();
const std::vector<std::string>& tokenizer_names();
const std::vector<std::string>& nonfinite_names();
/// "a, b, c": for messages and help.
std::string joined(const std::vector<std::string>& names);

/// Checks the values together (names, ranges, combinations); an Error names
/// the setting. Resolves nothing; the model and its data are recipe_of's.
void validate(const TrainConfig& c);

struct Recipe;
/// The recipe c.model names, after checking that it knows c.data.
const Recipe& recipe_of(const TrainConfig& c);

/// The learning rate and weight decay the run uses: the config's, or the
/// optimizer's defaults (adamw: the recipe's peak LR — 3e-3 for mlp, 1e-2 for
/// resnet8 — and 0.05; adam 1e-3 / 0, sgd 0.1 / 5e-4, lamb 2e-3 / 0.01,
/// lars 1.0 / 5e-4).
double effective_lr(const TrainConfig& c);
double effective_weight_decay(const TrainConfig& c);
/// The layout of the image batches, and so of every activation: memory_format;
/// auto is the recipe's faster layout on the device (Recipe::cpu_format on
/// the CPU; contiguous on a GPU, where it has not been measured).
MemoryFormat effective_memory_format(const TrainConfig& c);

/// `--resume auto` (with --out DIR): DIR when it holds a checkpoint, else
/// "" (a new run in DIR). Other values are returned as they are.
std::string resolve_resume(const std::string& resume, const std::string& out);

/// The signal numbers of a --stop-signals list ("INT,TERM,USR1"; names with
/// or without "SIG"); an Error names one it does not know.
std::vector<int> stop_signal_numbers(const std::string& list);

/// The steps --profile A:B covers: those after the A-th up to the B-th.
struct ProfileWindow {
    int64_t after = 0;  ///< A
    int64_t until = 0;  ///< B
};
/// Parses "A:B" (0 <= A < B, at most 10000 steps); an Error says what is wrong.
ProfileWindow parse_profile_window(const std::string& text);

/// The device the run uses: `auto` is cuda:0 when a GPU is present, else the CPU.
Device resolve_device(const TrainConfig& c);

}  // namespace ember::train

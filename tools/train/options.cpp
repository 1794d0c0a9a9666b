// `ember train`'s flags (CLI11): names, help, defaults and checks; the
// recipe's defaults for the flags not given; and the config file.
#include "tools/train/options.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "core/file.h"
#include "tools/cli_checks.h"
#include "train/recipe.h"

namespace ember::train {

namespace {

// "mlp (784-512-...), resnet8 (...)": the recipes and what they are.
std::string models_help() {
    std::string s;
    for (const Recipe& r : recipes()) s += (s.empty() ? "" : "; ") + r.name + " (" + r.summary + ")";
    return s;
}

template <class T>
std::string text_of(const T& v) {
    std::ostringstream o;
    o << v;
    return o.str();
}

}  // namespace

void add_train_options(CLI::App& app, TrainConfig& c) {
    // A flag given twice keeps its last value: the config file's come first
    // (expand_config), the command line's after, and win.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("--config", c.config_file,
                   "Read options from a TOML file of key = value lines (flags given here override "
                   "them); with --resume, the run's config.toml")
        ->configurable(false);
    app.add_option("--model", c.model, "Reference model: " + models_help())
        ->check(CLI::IsMember(recipe_names()))
        ->capture_default_str();
    app.add_option("--data", c.data,
                   "Dataset: the model's (default: its first) — mlp and resnet8: fashion-mnist, "
                   "or synthetic (seeded Fashion-MNIST-shaped samples, no files: for smoke "
                   "tests and GPU benchmarks); gpt: fortunes, or a text file or directory")
        ->capture_default_str();
    app.add_option("--data-dir", c.data_dir,
                   "Folder with the dataset's files (default: $EMBER_DATA/fashion-mnist, else the "
                   "Debian package's directory)");
    app.add_option("--epochs", c.epochs, "Total epochs (with --resume: the total, not more)")
        ->check(cli::whole(1, 100000))
        ->capture_default_str();
    app.add_option("--batch-size", c.batch_size, "Samples per micro-batch")
        ->check(cli::whole(1, int64_t(1) << 20))
        ->capture_default_str();
    app.add_option("--lr", c.lr,
                   "Peak learning rate (default: the optimizer's; see docs/train.md)");
    app.add_option("--optimizer", c.optimizer, "Optimizer: " + joined(optimizer_names()))
        ->check(CLI::IsMember(optimizer_names()))
        ->capture_default_str();
    app.add_option("--weight-decay", c.weight_decay,
                   "Weight decay of matrices and kernels; biases and norms get none "
                   "(default: the optimizer's)");
    app.add_option("--momentum", c.momentum, "Momentum of sgd and lars")
        ->check(cli::number(0.0, 0.999))
        ->capture_default_str();
    app.add_option("--schedule", c.schedule, "LR schedule: " + joined(schedule_names()))
        ->check(CLI::IsMember(schedule_names()))
        ->capture_default_str();
    app.add_option("--warmup", c.warmup, "Linear warm-up steps before the schedule")
        ->check(cli::at_least(0))
        ->capture_default_str();
    app.add_option("--device", c.device, "cpu, cuda, cuda:N or auto (CUDA when a GPU is present)")
        ->capture_default_str();
    app.add_option("--amp", c.amp, "Mixed precision: off, bf16 (autocast), f16 (autocast + loss scaling)")
        ->check(CLI::IsMember(amp_names()))
        ->capture_default_str();
    app.add_option("--workers", c.workers, "Loader threads (0: load on the training thread)")
        ->check(cli::whole(0, 256))
        ->capture_default_str();
    app.add_option("--accumulate", c.accumulate, "Micro-batches per optimizer step")
        ->check(cli::whole(1, 4096))
        ->capture_default_str();
    app.add_option("--clip-grad", c.clip_grad, "Clip the global gradient norm to this (0: off)")
        ->check(cli::at_least(0))
        ->capture_default_str();
    app.add_flag("--checkpoint-activations", c.checkpoint_activations,
                 "Recompute each block's activations in backward instead of keeping them");
    app.add_option("--memory-format", c.memory_format,
                   "Layout of the image batches and activations: auto (the model's faster one "
                   "on the device: channels_last for resnet8 on the CPU), contiguous (NCHW) or "
                   "channels_last (NHWC)")
        ->check(CLI::IsMember(memory_format_names()))
        ->capture_default_str();
    app.add_option("--layers", c.layers, "gpt: transformer blocks")
        ->check(cli::whole(1, 1024))
        ->capture_default_str();
    app.add_option("--heads", c.heads, "gpt: attention heads per block")
        ->check(cli::whole(1, 1024))
        ->capture_default_str();
    app.add_option("--embd", c.embd, "gpt: model width (a multiple of --heads)")
        ->check(cli::whole(1, int64_t(1) << 16))
        ->capture_default_str();
    app.add_option("--block", c.block, "gpt: context length in tokens")
        ->check(cli::whole(1, int64_t(1) << 20))
        ->capture_default_str();
    app.add_option("--dropout", c.dropout, "gpt: dropout of attention and residuals")
        ->check(cli::number(0.0, 0.99))
        ->capture_default_str();
    app.add_option("--tokenizer", c.tokenizer,
                   "gpt: char (the corpus's characters) or byte (any bytes, 256 tokens)")
        ->check(CLI::IsMember(tokenizer_names()))
        ->capture_default_str();
    app.add_option("--seed", c.seed, "Seed of the weights, the shuffle and the augmentation")
        ->capture_default_str();
    app.add_flag("--deterministic", c.deterministic,
                 "Forbid non-deterministic algorithms (the CPU is deterministic anyway)");
    app.add_flag("--sync-debug", c.sync_debug,
                 "Synchronize after every CUDA op and name the one that fails");
    app.add_flag("--anomaly", c.anomaly, "Stop at the first op that produces NaN or Inf");
    app.add_option("--on-nonfinite", c.on_nonfinite,
                   "When the loss or the gradient norm is NaN or Inf: stop (exit 3, keeping "
                   "best.safetensors and the last finite checkpoint), skip the step (stop after "
                   "--max-skips in a row), or continue")
        ->check(CLI::IsMember(nonfinite_names()))
        ->capture_default_str();
    app.add_option("--max-skips", c.max_skips,
                   "With --on-nonfinite skip: stop after this many skipped steps in a row")
        ->check(cli::whole(1, int64_t(1) << 40))
        ->capture_default_str();
    app.add_option("--out", c.out, "Run directory (default: runs/<model>-<timestamp>)");
    app.add_option("--resume", c.resume,
                   "Continue the run in this directory in place; auto (with --out DIR): the run "
                   "in DIR if it has a checkpoint, else a new one there (for requeued jobs)")
        ->configurable(false);
    app.add_flag("--extend", c.extend,
                 "With --resume and another --epochs: re-span the LR schedule over the new "
                 "total (the remaining steps' LRs change; the start table shows how)")
        ->configurable(false);
    app.add_option("--stop-signals", c.stop_signals,
                   "Signals that finish the step, write a checkpoint and stop the run (exit 128 "
                   "+ the signal's number)")
        ->capture_default_str();
    app.add_option("--keep-checkpoints", c.keep_checkpoints,
                   "Checkpoints kept: the newest and the ones before it (checkpoint/step-N."
                   "safetensors); a resume falls back to an older one when the newest is unreadable")
        ->check(cli::whole(1, 1000000))
        ->capture_default_str();
    app.add_option("--save-every", c.save_every, "Steps between checkpoints (0: each epoch)")
        ->check(cli::at_least(0))
        ->capture_default_str();
    app.add_option("--eval-every", c.eval_every, "Epochs between evaluations on the test set")
        ->check(cli::whole(1, 100000))
        ->capture_default_str();
    app.add_option("--log-every", c.log_every, "Steps between progress lines and metrics")
        ->check(cli::whole(1, int64_t(1) << 30))
        ->capture_default_str();
    app.add_option("--fingerprint-every", c.fingerprint_every,
                   "Steps between checksums of the parameters in metrics.jsonl, for `ember diff` "
                   "(a host read each; 0: none)")
        ->check(cli::at_least(0))
        ->capture_default_str();
    app.add_option("--limit", c.limit, "Train on the first N samples only (0: all)")
        ->check(cli::at_least(0))
        ->capture_default_str();
    app.add_option("--threads", c.threads, "OpenMP threads (0: the default)")
        ->check(cli::whole(0, 1024))
        ->capture_default_str();
    app.add_flag("--ddp", c.ddp,
                 "Data parallelism over the ranks of an MPI launch: mpirun -np N ember train "
                 "--ddp (docs/dist.md); --batch-size is per rank");
    app.add_option("--dist-timeout", c.dist_timeout,
                   "Seconds a collective may take before the run fails naming the missing rank")
        ->check(cli::number(0.001, 1e6))
        ->capture_default_str();
    app.add_option("--stop-after", c.stop_after,
                   "Stop as if interrupted after this many steps: checkpoint, then exit 130 "
                   "(for scripts and tests; 0: never)")
        ->check(cli::at_least(0))
        ->configurable(false);
    app.add_flag("--dump-config", c.dump_config, "Print the effective configuration and exit")
        ->configurable(false);
    app.add_option("--profile", c.profile,
                   "Profile steps A:B (e.g. 20:30: the 10 steps after the 20th) into "
                   "RUN_DIR/trace.json (Perfetto opens it) and print where their time went "
                   "(docs/profiling.md)")
        ->configurable(false);
}

void apply_recipe_defaults(CLI::App& app, TrainConfig& c) {
    const std::vector<std::string> names = recipe_names();
    if (std::find(names.begin(), names.end(), c.model) == names.end()) return;
    const TrainConfig& d = recipe(c.model).defaults;
    // A field takes the recipe's value when its flag was not given; the
    // option's default text follows, so config.toml records what ran.
    // A command without the flag (lr-find has no --data) takes the value too.
    auto take = [&](const char* flag, auto& field, const auto& value) {
        CLI::Option* opt = app.get_option_no_throw(flag);
        if (opt && opt->count() > 0) return;
        field = value;
        if (opt) opt->default_str(text_of(value));
    };
    take("--data", c.data, d.data);
    take("--epochs", c.epochs, d.epochs);
    take("--batch-size", c.batch_size, d.batch_size);
    take("--schedule", c.schedule, d.schedule);
    take("--warmup", c.warmup, d.warmup);
    take("--clip-grad", c.clip_grad, d.clip_grad);
    take("--log-every", c.log_every, d.log_every);
    // The LR and weight decay left to the optimizer and model: their values
    // in use, for --dump-config and config.toml (not an empty string).
    for (auto [flag, value] : {std::pair{"--lr", effective_lr(c)},
                               std::pair{"--weight-decay", effective_weight_decay(c)}})
        if (CLI::Option* opt = app.get_option_no_throw(flag); opt && opt->count() == 0)
            opt->default_str(text_of(value));
}

std::vector<std::string> config_args(const std::string& text, const std::string& name) {
    auto trim = [](const std::string& s) {
        const size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
        return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
    };
    // Settings that say what to do with a run, not what the run is: never
    // taken from a file (a config.toml read back by --resume must not stop
    // the run, or resume another).
    static const char* const kNotConfigurable[] = {"config", "resume", "extend", "stop-after",
                                                 "dump-config", "profile"};
    std::vector<std::string> args;
    std::istringstream in(text.rfind("\xEF\xBB\xBF", 0) == 0 ? text.substr(3) : text);  // a BOM
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        line = trim(line);
        if (line.empty() || line[0] == '#' || line[0] == '[') continue;
        const size_t eq = line.find('=');
        EMBER_CHECK(eq != std::string::npos, "--config ", name, ":", n,
                    ": expected key = value, got '", line, "'");
        const std::string key = trim(line.substr(0, eq));
        std::string value = trim(line.substr(eq + 1));
        // A quoted string (TOML's "..." or '...'), or a bare value up to a comment.
        if (!value.empty() && (value[0] == '"' || value[0] == '\'')) {
            const size_t close = value.find(value[0], 1);
            EMBER_CHECK(close != std::string::npos, "--config ", name, ":", n,
                        ": the string value of '", key, "' has no closing quote");
            const std::string rest = trim(value.substr(close + 1));
            EMBER_CHECK(rest.empty() || rest[0] == '#', "--config ", name, ":", n,
                        ": unexpected '", rest, "' after the value of '", key, "'");
            value = value.substr(1, close - 1);
        } else if (const size_t hash = value.find('#'); hash != std::string::npos) {
            value = trim(value.substr(0, hash));
        }
        EMBER_CHECK(!key.empty() && key[0] != '-' &&
                        key.find_first_of(" \t\"'") == std::string::npos,
                    "--config ", name, ":", n, ": bad key '", key, "'");
        for (const char* k : kNotConfigurable)
            EMBER_CHECK(key != k, "--config ", name, ":", n, ": '", key,
                        "' cannot be set from a file; give --", key, " on the command line");
        if (value.empty()) continue;  // unset: the default
        // One token, `--key=value`, for flags too (`--ddp=false`): a value is
        // never taken for the next line's flag, and one that looks like a
        // flag ("--", "--resume") stays a value.
        args.push_back("--" + key + "=" + value);
    }
    return args;
}

std::vector<std::string> expand_config(int argc, char** argv) {
    std::vector<std::string> args(argv, argv + argc);
    // The commands that take the flags of ember train: train, and doctor.
    if (args.size() < 2 || (args[1] != "train" && args[1] != "doctor")) return args;
    const auto train = args.begin() + 1;
    std::string file, resume, out;
    for (auto it = train + 1; it != args.end(); ++it) {
        auto value_of = [&](const std::string& flag) -> std::optional<std::string> {
            if (*it == flag && it + 1 != args.end()) return *(it + 1);
            if (it->rfind(flag + "=", 0) == 0) return it->substr(flag.size() + 1);
            return std::nullopt;
        };
        if (auto v = value_of("--config")) file = *v;
        if (auto v = value_of("--resume")) resume = *v;
        if (auto v = value_of("--out")) out = *v;
    }
    // --resume auto: the run in --out, when it has a checkpoint, as --resume
    // would take it; else nothing to read.
    if (resume == "auto") resume = resolve_resume(resume, out);
    if (file.empty() && !resume.empty()) {
        std::error_code ec;
        EMBER_CHECK(std::filesystem::is_directory(resume, ec), "--resume ", resume,
                    ": no such run directory", ec ? " (" + ec.message() + ")" : std::string());
        file = resume + "/config.toml";
    }
    if (file.empty()) return args;
    const std::vector<std::string> from_file = config_args(read_config_file(file), file);
    args.insert(train + 1, from_file.begin(), from_file.end());
    return args;
}

std::string read_config_file(const std::string& file) {
    // A regular file only (a named pipe would block), and no bigger than a
    // configuration can sensibly be.
    RegularFile f = open_regular_file(file, "--config " + file);
    EMBER_CHECK(f.size <= kMaxConfigBytes, "--config ", file, ": ", f.size,
                " bytes is too large for a configuration (at most ", kMaxConfigBytes, ")");
    std::string text(f.size, '\0');
    read_exact(f.fd.get(), text.data(), f.size, 0, "--config " + file);
    return text;
}

TrainConfig read_run_config(const std::string& run_dir) {
    const std::string file = (std::filesystem::path(run_dir) / "config.toml").string();
    std::vector<std::string> args = config_args(read_config_file(file), file);
    args.insert(args.begin(), "ember-train");
    TrainConfig c;
    CLI::App app;
    add_train_options(app, c);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    try {
        app.parse(int(argv.size()), argv.data());
    } catch (const CLI::ParseError& e) {
        EMBER_FAIL(file, ": ", e.what());
    }
    apply_recipe_defaults(app, c);
    return c;
}

}  // namespace ember::train

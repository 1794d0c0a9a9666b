// `ember train`'s flags: every TrainConfig field bound to a CLI11 option
// with its help, default and check; the recipe's defaults for flags not
// given; and the config file (config.toml, read back by --resume; `--config
// FILE` reads one, flags override it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/config.h"

namespace CLI {
class App;
}

namespace ember::train {

/// Adds every flag of `ember train` to `app` (with its --config file option),
/// bound to `c`.
void add_train_options(CLI::App& app, TrainConfig& c);

/// After parsing: the fields whose flags the command line (and config file)
/// did not give — or that `app` does not have — take the defaults of
/// c.model's recipe (its dataset, say), and `app`'s configuration output
/// (config.toml, --dump-config) shows them. An unknown model is left for
/// validation to report.
void apply_recipe_defaults(CLI::App& app, TrainConfig& c);

/// The command line with `ember train`'s (or `ember doctor`'s) config file
/// read in: for `--config FILE` (or, with `--resume DIR` and no --config,
/// DIR/config.toml) each `key = value` line of FILE becomes `--key=value`
/// right after "train", before the flags given, which therefore override it. Comments
/// (#), blank lines and empty values are skipped; `true`/`false` turn flags
/// on or leave them off. A missing or unreadable file is an Error.
std::vector<std::string> expand_config(int argc, char** argv);

/// The flags a config file's text stands for (`key = value` → "--key=value",
/// `key = true` → "--key"), in order; `name` is the file's, for messages. What
/// expand_config reads files with, and what the train_files fuzz target feeds.
std::vector<std::string> config_args(const std::string& text, const std::string& name);

/// The text of a config file: a regular file of at most kMaxConfigBytes,
/// else an Error.
std::string read_config_file(const std::string& file);

/// The configuration a run directory's config.toml records (flags it does
/// not name take their defaults, the recipe's where it has them); an Error
/// naming the file when it is missing or does not parse.
TrainConfig read_run_config(const std::string& run_dir);

/// The largest config file expand_config reads.
inline constexpr uint64_t kMaxConfigBytes = 1 << 20;

}  // namespace ember::train

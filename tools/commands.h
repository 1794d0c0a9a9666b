// The subcommands of the `ember` command line, each in its own file.
#pragma once

#include <string>

#include "train/generate.h"

namespace CLI {
class App;
}

namespace ember::cli {

/// The options of `ember generate`.
struct GenerateConfig {
    std::string run_dir, weights, prompt;
    std::string device = "auto";
    train::SampleOptions options;
};

/// The options of `ember profile`.
struct ProfileConfig {
    std::string source;  ///< a run directory or a trace file
    int top = 20;
    bool by_shape = false;
};

/// `ember info`: version, build options, CPU, CUDA devices and library versions.
int run_info();
/// `ember demo`: a short tour of the tensor API on the CPU (and CUDA if present).
int run_demo();
/// `ember plot RUN_DIR`: writes RUN_DIR/curves.svg from RUN_DIR/metrics.jsonl, prints its path.
int run_plot(const std::string& run_dir);
/// `ember generate`: its flags, and the text of a trained gpt streamed to stdout.
void add_generate_options(CLI::App& app, GenerateConfig& c);
int run_generate(const GenerateConfig& c);
/// `ember profile RUN_DIR|trace.json`: a trace's summary (kernels/profile_trace.h).
void add_profile_options(CLI::App& app, ProfileConfig& c);
int run_profile(const ProfileConfig& c);

}  // namespace ember::cli

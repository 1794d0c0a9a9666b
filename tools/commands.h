// The subcommands of the `ember` command line, each in its own file.
#pragma once

#include <string>

namespace ember::cli {

/// `ember info`: version, build options, CPU, CUDA devices and library versions.
int run_info();
/// `ember demo`: a short tour of the tensor API on the CPU (and CUDA if present).
int run_demo();
/// `ember plot RUN_DIR`: writes RUN_DIR/curves.svg from RUN_DIR/metrics.jsonl, prints its path.
int run_plot(const std::string& run_dir);

}  // namespace ember::cli

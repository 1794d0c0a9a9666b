// The subcommands of the `ember` command line, each in its own file.
#pragma once

namespace ember::cli {

/// `ember info`: version, build options, CPU, CUDA devices and library versions.
int run_info();
/// `ember demo`: a short tour of the tensor API on the CPU (and CUDA if present).
int run_demo();

}  // namespace ember::cli

// `ember profile RUN_DIR|trace.json`: the summary of a trace that `ember
// train --profile` (or a program's own Profiler) wrote, printed again.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>

#include "kernels/profile_trace.h"
#include "tools/commands.h"

namespace ember::cli {

void add_profile_options(CLI::App& app, ProfileConfig& c) {
    app.add_option("SOURCE", c.source, "A run directory (its trace.json) or a trace file")->required();
    app.add_option("--top", c.top, "Rows shown; the rest are summed in one")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    app.add_flag("--by-shape", c.by_shape, "One row per op and signature (dtypes and shapes)");
}

int run_profile(const ProfileConfig& c) {
    std::error_code ec;
    const std::string path = std::filesystem::is_directory(c.source, ec)
                                 ? (std::filesystem::path(c.source) / "trace.json").string()
                                 : c.source;
    const kernels::Trace trace = kernels::read_chrome_trace(path);
    std::printf("%s", kernels::summarize(trace, {.top = c.top, .by_shape = c.by_shape}).c_str());
    return 0;
}

}  // namespace ember::cli

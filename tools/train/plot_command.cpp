// `ember plot RUN_DIR`: redraws a training run's curves.svg from its
// metrics.jsonl and prints the SVG's path.
#include <cstdio>

#include "tools/commands.h"
#include "train/plot.h"

namespace ember::cli {

int run_plot(const std::string& run_dir) {
    const std::string path = train::plot_run(run_dir);
    std::printf("%s\n", path.c_str());
    return 0;
}

}  // namespace ember::cli

// `ember train` and `ember eval`: flags, and what they print.
#pragma once

#include <string>

#include "train/config.h"

namespace CLI {
class App;
}

namespace ember::train {

/// The options `ember eval` takes.
struct EvalConfig {
    std::string source;   ///< a run directory or a weights file (or --weights)
    std::string model;    ///< "": the one the weights record
    std::string weights;
    std::string data;     ///< "": the run's
    bool other_data = false;  ///< allow `data` to differ from the run's
    std::string device = "auto";
    std::string data_dir;
    std::string amp = "off";
    int workers = 1;
};

/// Adds `ember train` (with every flag of TrainConfig) and `ember eval` to `root`.
CLI::App* add_train_command(CLI::App& root, TrainConfig& c);
CLI::App* add_eval_command(CLI::App& root, EvalConfig& c);

/// Runs the command; 0 when done, 130 when stopped by a signal (a
/// checkpoint was written), an ember::Error for anything wrong.
int run_train(CLI::App& app, TrainConfig c);
int run_eval(const EvalConfig& c);

}  // namespace ember::train

// `ember doctor [the flags of ember train]` (docs/doctor.md): the user's own
// configuration in short interleaved trials, one per applicable tip of
// docs/tips.md, each measured on this machine against the current settings;
// findings from one profiled step; the resulting `ember train` command line;
// doctor.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/config.h"

namespace CLI {
class App;
}

namespace ember::train {

struct DoctorConfig {
    TrainConfig train;          ///< the configuration under test (the flags of ember train)
    int rounds = 3;             ///< interleaved rounds of every trial
    int64_t steps = 0;          ///< timed steps per trial and round; 0: about a second's worth
    int64_t warmup = 3;         ///< steps before each timed span
    double budget_mib = 4096;   ///< CPU: what the larger-batch trial's step may hold
    std::string json = "doctor.json";
};

CLI::App* add_doctor_command(CLI::App& root, DoctorConfig& c);
int run_doctor(CLI::App& app, DoctorConfig c);

/// One trial: a change to the configuration, the tip it tries, and whether
/// it applies here (else why not).
struct Trial {
    int tip = 0;                     ///< docs/tips.md #N (0: the current settings)
    std::string name;                ///< "--workers 0", "--amp bf16"
    std::vector<std::string> flags;  ///< what it adds to the command line
    TrainConfig config;
    std::string not_applicable;      ///< "": it runs; else why not ("n/a on cpu: no cuDNN")
};

/// A trial's measurement: samples/s of each round, and the step's peak
/// tensor memory beyond what was held before it.
struct TrialResult {
    std::vector<double> samples_per_s;
    size_t peak_bytes = 0;
    std::string failure;  ///< "does not fit", or the error that ended it
};

/// "faster", "slower" or "within noise" against `base`: faster only when
/// the trial's slowest round beats the base's fastest and its median is at
/// least 3 % above the base's, slower only when its fastest is behind the
/// base's slowest and its median at least 3 % below.
std::string verdict(const TrialResult& trial, const TrialResult& base);

}  // namespace ember::train

// `ember diff A B` (docs/train.md, "Where two runs part: ember diff"): two
// runs side by side — their configurations, the first step whose loss
// differs bitwise and the first beyond a tolerance, their parameter
// checksums (--fingerprint-every), their last weights — or two safetensors
// files, tensor by tensor.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ember::train {

/// One tensor of two weight files.
struct TensorDiff {
    enum class Kind { equal, differs, only_a, only_b, mismatch };
    std::string name;
    Kind kind = Kind::equal;
    std::string a, b;     ///< "f32 [512, 784]" on either side (mismatch, only_*)
    int64_t numel = 0;
    int64_t differing = 0;  ///< elements whose bits differ
    double max_abs = 0;     ///< max |a − b|
    double max_rel = 0;     ///< max |a − b| / max(|a|, |b|)
};

/// Every tensor of two files, the worst first (mismatches and tensors in
/// one file only, then by max_rel, then max_abs); bitwise equal ones last.
std::vector<TensorDiff> diff_weights(const std::string& a, const std::string& b);

/// A step and the value each run has there.
struct StepValues {
    int64_t step = 0;
    double a = 0, b = 0;
};

struct RunsDiff {
    /// config.toml's settings whose values differ: key, A's value, B's ("": unset).
    std::vector<std::vector<std::string>> config;
    /// Step records both runs have over the same steps (the same window).
    int64_t losses_compared = 0;
    int64_t first_step = 0, last_step = 0;  ///< of the compared records
    /// Records at the same step over different windows (another --log-every,
    /// or a resume that split a window): not compared.
    int64_t losses_skipped = 0;
    std::optional<StepValues> first_bitwise;  ///< the first loss whose bits differ
    std::optional<StepValues> first_beyond;   ///< the first beyond the tolerance
    double tolerance = 0;
    int64_t fingerprints_compared = 0;
    std::optional<StepValues> first_fingerprint;  ///< the first checksum that differs
    std::string weights_file;                     ///< "last.safetensors" when both have it
    std::vector<TensorDiff> weights;

    /// Nothing compared differs (the configurations may).
    bool identical() const;
};

/// Two run directories (their config.toml, metrics.jsonl and
/// last.safetensors). `tolerance` is relative: |a − b| > tolerance ·
/// max(|a|, |b|).
RunsDiff diff_runs(const std::string& a, const std::string& b, double tolerance);

/// The options of `ember diff`.
struct DiffConfig {
    std::string a, b;         ///< two run directories, or two safetensors files
    double tolerance = 1e-6;  ///< relative, for "the first beyond"
    int top = 20;             ///< tensors listed
    bool exit_code = false;   ///< exit 1 when they differ
};

/// `ember diff`: prints the comparison; 0, or with exit_code 1 when they differ.
int run_diff(const DiffConfig& c);

/// What `ember diff` prints.
std::string format_runs_diff(const RunsDiff& d, const std::string& a, const std::string& b);
std::string format_weights_diff(const std::vector<TensorDiff>& w, int top);

}  // namespace ember::train

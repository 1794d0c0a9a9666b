// Grad mode (is the graph being recorded?) and anomaly mode (does every
// recorded op check its results for NaN/Inf?), both per thread, with RAII guards.
#pragma once

namespace ember {

/// Whether ops record the graph on this thread (on by default). Evaluation
/// and optimizer updates run with it off (docs/tips.md #20).
struct GradMode {
    static bool is_enabled();
    static void set_enabled(bool enabled);
};

/// Turns recording off for its scope, like torch::NoGradGuard.
class NoGradGuard {
public:
    NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
    ~NoGradGuard() { GradMode::set_enabled(prev_); }
    NoGradGuard(const NoGradGuard&) = delete;
    NoGradGuard& operator=(const NoGradGuard&) = delete;

private:
    bool prev_;
};

/// Turns recording on for its scope (inside a NoGradGuard, e.g. checkpoint's recompute).
class EnableGradGuard {
public:
    EnableGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
    ~EnableGradGuard() { GradMode::set_enabled(prev_); }
    EnableGradGuard(const EnableGradGuard&) = delete;
    EnableGradGuard& operator=(const EnableGradGuard&) = delete;

private:
    bool prev_;
};

namespace autograd {

/// Anomaly mode (docs/tips.md #18): when on, the first recorded forward op or backward
/// step that produces a NaN or Inf throws an ember::Error naming the op (and,
/// for backward, the forward op it belongs to). Off by default: it reads every
/// result, which costs a pass over memory per op.
struct AnomalyMode {
    static bool is_enabled();
    static void set_enabled(bool enabled);
};

/// Turns anomaly mode on for its scope.
class DetectAnomalyGuard {
public:
    DetectAnomalyGuard() : prev_(AnomalyMode::is_enabled()) { AnomalyMode::set_enabled(true); }
    ~DetectAnomalyGuard() { AnomalyMode::set_enabled(prev_); }
    DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
    DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

private:
    bool prev_;
};

}  // namespace autograd
}  // namespace ember

// The LR range test (Smith; docs/tips.md #15): train a few hundred steps while the
// LR grows exponentially, watch the smoothed loss, stop when it diverges, and
// suggest the LR where it fell fastest. Snapshot puts the parameters and the
// optimizer back afterwards. docs/optim.md, "LR finder".
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "optimizer.h"

namespace ember::optim {

struct LrFindOptions {
    double start_lr = 1e-7;
    double end_lr = 10;
    int64_t steps = 100;          ///< LRs tried, start_lr to end_lr geometrically
    double smoothing = 0.98;      ///< β of the loss's moving average (bias-corrected)
    double diverge_factor = 4;    ///< stop once the smoothed loss > factor × its best
    int64_t skip_start = 10;      ///< points left out of the suggestion at the start
    int64_t skip_end = 5;         ///< and at the end (where it diverged)
};

struct LrFindResult {
    std::vector<double> lrs;       ///< the LRs tried, one per train_step call
    std::vector<double> losses;    ///< what train_step returned
    std::vector<double> smoothed;  ///< the bias-corrected moving average
    /// The LR of steepest descent of the smoothed loss against log10(lr)
    /// among the kept points up to the smoothed loss's minimum, at a point
    /// no higher than the first kept one; none when fewer than 3 remain or
    /// the loss never fell. A starting point: many pick a value up to 10×
    /// below it.
    std::optional<double> suggested_lr;
    bool diverged = false;         ///< stopped early: a non-finite loss or past diverge_factor
};

/// Sweeps the LR of every group of `opt` from start_lr to end_lr: before
/// call i it sets lr_i = start_lr·(end_lr/start_lr)^(i/(steps − 1)), then
/// calls train_step, which must run one forward, backward and opt.step() on
/// the next batch and return the loss (positive: the divergence test
/// compares ratios). The smoothed loss is a_i = β·a_{i−1} + (1 − β)·loss_i,
/// a_i/(1 − β^(i+1)). The sweep stops after a non-finite loss or once the
/// smoothed loss exceeds diverge_factor × the best so far.
///
/// The groups' LRs are put back afterwards; nothing else is: the model and
/// the optimizer's state leave trained (possibly diverged). Take a Snapshot
/// before and restore() it after, and restore what the optimizer does not
/// hold (BatchNorm's running statistics: the caller's copy of
/// Module::state_dict) yourself.
LrFindResult lr_find(Optimizer& opt, const std::function<double()>& train_step,
                     const LrFindOptions& o = {});

/// A copy of what the optimizer holds: its parameters' values (and the
/// low-precision model copies of master weights), its state and its groups'
/// hyper-parameters. restore() writes them back in place (the tensors keep
/// their identity, so modules and the optimizer still point at them).
/// Gradients and modules' buffers are not part of it.
class Snapshot {
public:
    explicit Snapshot(Optimizer& opt);
    void restore() const;

private:
    Optimizer& opt_;
    std::vector<std::pair<Tensor, Tensor>> values_;  // (live tensor, copy)
    std::vector<std::pair<std::string, Tensor>> state_;
    std::string json_;
};

}  // namespace ember::optim

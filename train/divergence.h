// Divergence: a training loss or gradient norm that is no longer finite,
// found at the reads the loop already makes (Note [Divergence without a
// sync]), the policy for it (--on-nonfinite stop | skip | continue), and loss
// spikes. docs/train.md ("When a run diverges").
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "../core/tensor.h"
#include "config.h"

namespace ember::nn {
class Module;
}  // namespace ember::nn

namespace ember::train {

// Note [Divergence without a sync]
// A NaN or infinite loss must stop a run, but reading each step's loss on a
// GPU would make the host wait for the device every step (docs/tips.md #8). The
// loop already reads one device value per log interval: the sum of the
// window's losses. A non-finite loss makes that sum non-finite, and so does
// a non-finite gradient norm added to a second sum as norm · 0 (0 when
// finite, NaN when not); the two and the skip counter below are read
// together, as one tensor, where the loss was read alone before. Only when
// the window is bad does the guard read its kept per-step values (small 0-d
// tensors) to name the first bad step. Under `skip` the optimizer steps
// unless flag = (the global gradient norm is not finite), a device tensor
// the update kernels read themselves (Optimizer::step_unless), and a device
// counter of consecutive skips is read with the window. Under f16 loss
// scaling, overflowing steps are the scaler's to skip; the guard stops the
// run only when the scale falls below 1 (gradients overflow f16 even
// unscaled: the model itself has gone).

/// Where and how a run diverged.
struct Divergence {
    int64_t step = 0;      ///< the first step seen bad
    double loss = 0;       ///< the mean loss of that step's micro-batches (or the window's)
    double grad_norm = 0;  ///< its global gradient norm, NaN when not computed
    double lr = NAN;       ///< the LR at that step (NaN: not known)
    std::string reason;    ///< what was not finite, or the skips / the scale
    std::string parameter; ///< the first parameter holding a non-finite value, or ""
    /// One line: the step, what happened, the LR and the parameter.
    std::string message() const;
};

/// A loss spike at a log record: the window's mean loss against the median
/// of the previous ones.
struct Spike {
    int64_t step = 0;
    double loss = 0, median = 0;
    std::string message() const;
};

class DivergenceGuard {
public:
    /// For a run of config `c` on `device`; `scaled`: under f16 loss scaling.
    DivergenceGuard(const TrainConfig& c, Device device, bool scaled);

    /// Whether the loop must compute the global gradient norm each step for
    /// the guard (`skip`; clipping computes it anyway).
    bool needs_norm() const;
    /// A micro-batch's loss (0-d, on the device) of optimizer step `step`:
    /// added to the window (no read).
    void add_loss(int64_t step, const Tensor& loss);
    /// Step `step`'s global gradient norm (0-d, on the device, or undefined)
    /// and LR. Returns the flag the optimizer steps unless (`skip`), else an
    /// undefined tensor.
    Tensor observe_step(int64_t step, const Tensor& grad_norm, double lr);

    /// Reads the window (one read of the device: the sums, the skip counter
    /// and the loss scale stacked): its summed loss, and whether anything in
    /// it was not finite or too many steps in a row were skipped. `scale`:
    /// the loss scaler's scale tensor under f16 (GradScaler::scale_tensor),
    /// else undefined.
    struct Window {
        double loss_sum = 0;
        std::optional<Divergence> divergence;
    };
    /// `mean` (with --ddp) averages the read values over the ranks in place.
    Window read(const nn::Module& model, const Tensor& scale,
                const std::function<Tensor(Tensor)>& mean) const;
    /// Starts the next window (after a log record).
    void next_window();

    /// The spike test of a logged window mean: > 10x the median of the last
    /// (up to) 20 logged means, once 3 exist. Remembers `loss`.
    std::optional<Spike> spike(int64_t step, double loss);

private:
    // One optimizer step of the window, kept for locate().
    struct StepValues {
        int64_t step = 0;
        Tensor loss_sum;  // f64 0-d: its micro-batch losses
        int64_t micro = 0;
        Tensor norm;      // 0-d, or undefined
        double lr = 0;
    };
    Divergence locate(const nn::Module& model, const std::string& reason) const;

    std::string policy_;
    int64_t max_skips_;
    bool scaled_;
    Device device_;
    Tensor loss_sum_;     // f64 0-d: Σ loss over the window's micro-batches
    Tensor bad_;          // f64 0-d: Σ norm·0 — NaN once a norm was not finite
    Tensor consecutive_;  // f64 0-d: steps skipped in a row (skip)
    std::vector<StepValues> steps_;
    std::vector<double> logged_;  // the logged window means (spike)
};

}  // namespace ember::train

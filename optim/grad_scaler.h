// Dynamic loss scaling for f16 training (TIPS #5): the loss is multiplied by
// a scale before backward so small gradients do not flush to zero; one fused
// pass unscales every gradient and looks for inf/NaN; a step with overflow is
// skipped, leaving parameters and optimizer state bit-unchanged, and the
// scale backs off; after growth_interval clean steps it grows. docs/amp.md.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "optim/optimizer.h"

namespace ember::amp {

struct GradScalerOptions {
    double init_scale = 65536.0;     ///< 2^16
    double growth_factor = 2.0;
    double backoff_factor = 0.5;
    int64_t growth_interval = 2000;  ///< clean steps before the scale grows
    bool enabled = true;             ///< false: every call is a pass-through
};

/// The usual loop:
///
///     Tensor loss = ...;
///     scaler.scale(loss).backward();
///     scaler.unscale_(opt);               // optional: before clipping
///     optim::clip_grads(opt.gradients(), 1.0);
///     bool applied = scaler.step(opt);    // skipped on inf/NaN
///     scaler.update();
///     opt.zero_grad();
///
/// The scale and the found-inf flag are one-element tensors on the gradients'
/// device, read by the kernels.
class GradScaler {
public:
    explicit GradScaler(const GradScalerOptions& o = {});

    /// loss · scale (recorded, so backward gives scaled gradients).
    Tensor scale(const Tensor& loss);
    /// Divides the optimizer's gradients by the scale in one fused pass and
    /// records whether any was inf or NaN. At most once per step; step()
    /// calls it when it was not called.
    void unscale_(optim::Optimizer& opt);
    /// Unscales if needed, then steps `opt` unless a gradient overflowed.
    /// Returns whether the step was applied.
    bool step(optim::Optimizer& opt);
    /// After step: backs the scale off on overflow, else grows it after
    /// growth_interval clean steps in a row. Clears the found-inf flag.
    void update();

    double get_scale() const;
    bool enabled() const { return o_.enabled; }
    /// Steps skipped so far.
    int64_t skipped() const { return skipped_; }
    /// Clean steps since the last change of scale.
    int64_t growth_tracker() const { return growth_tracker_; }

    /// The scale, the growth tracker and the skip count as JSON, for a
    /// checkpoint; load_state checks them (a positive finite scale, counts
    /// >= 0) and changes nothing on an error.
    std::string state_json() const;
    void load_state(const std::string& json);

private:
    void ensure_on(Device d);

    GradScalerOptions o_;
    Tensor scale_, found_inf_;  // one element, f32, on the gradients' device
    double host_scale_;         // the scale before the tensors exist
    int64_t growth_tracker_ = 0;
    int64_t skipped_ = 0;
    bool unscaled_ = false;
};

}  // namespace ember::amp

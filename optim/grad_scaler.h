// Dynamic loss scaling for f16 training (docs/tips.md #5): the loss is multiplied by
// a scale before backward so small gradients do not flush to zero; one fused
// pass unscales every gradient and looks for inf/NaN; a step with overflow is
// skipped, leaving parameters and optimizer state bit-unchanged, and the
// scale backs off; after growth_interval clean steps it grows. The scale,
// the flag and the counters live on the gradients' device and only kernels
// read them: on CUDA, scale → backward → step → update never waits for the
// GPU. docs/amp.md.
#pragma once

#include <cstdint>

#include "../core/tensor.h"
#include "optimizer.h"

namespace ember::amp {

/// What GradScaler::step returns: whether the step was applied. It holds a
/// copy of the found-inf flag and reads it only when converted to bool —
/// free on the CPU, one host sync on CUDA (an item(), counted as such),
/// so a loop that does not look at it never waits for the GPU.
class StepResult {
public:
    StepResult(bool applied) : applied_(applied) {}  // NOLINT: implicit, like the bool it was
    /// Applied unless flag[0] != 0 (a one-element f32 tensor).
    explicit StepResult(Tensor flag) : flag_(std::move(flag)) {}
    /// Reads the flag (the first time only).
    operator bool() const;  // NOLINT: implicit, so `bool applied = scaler.step(opt)` stays
    /// Whether converting to bool is free: the answer is on the host.
    bool known() const { return !flag_.defined() || flag_.device().type == DeviceType::cpu; }

private:
    Tensor flag_;
    mutable int state_ = -1;  // -1: unread (flag_ defined)
    bool applied_ = true;
};

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
///     bool applied = scaler.step(opt);    // skipped on inf/NaN (reading it syncs on CUDA)
///     scaler.update();
///     opt.zero_grad();
///
/// The scale and the found-inf flag are one-element f32 tensors on the
/// gradients' device, the growth tracker and the skip count an i64 pair
/// there, all read and written by kernels only. What reads them on the host
/// — get_scale(), growth_tracker(), skipped(), state_json() and converting
/// step()'s result to bool — is a host sync on CUDA; the loop above (but for
/// `applied`) has none.
class GradScaler {
public:
    explicit GradScaler(const GradScalerOptions& o = {});

    /// loss · scale (recorded, so backward gives scaled gradients).
    Tensor scale(const Tensor& loss);
    /// Divides the optimizer's gradients by the scale in one fused pass and
    /// records whether any was inf or NaN. At most once per step; step()
    /// calls it when it was not called.
    void unscale_(optim::Optimizer& opt);
    /// Unscales if needed, then steps `opt` unless a gradient overflowed:
    /// Optimizer::step_unless(flag), the kernels skipping the whole update
    /// (parameters, state and step counts bit-unchanged) when it is set.
    /// Returns whether the step was applied, read lazily (StepResult).
    StepResult step(optim::Optimizer& opt);
    /// After step: backs the scale off on overflow, else grows it after
    /// growth_interval clean steps in a row; clears the found-inf flag. One
    /// kernel on the scaler's device (kernels::update_scale_).
    void update();

    /// The scale (a host sync on CUDA).
    double get_scale() const;
    /// The scale as its one-element f32 tensor on the device, to be read
    /// together with other values (undefined before the first scale()).
    const Tensor& scale_tensor() const { return scale_; }
    bool enabled() const { return o_.enabled; }
    /// Steps skipped so far (a host sync on CUDA).
    int64_t skipped() const;
    /// Clean steps since the last change of scale (a host sync on CUDA).
    int64_t growth_tracker() const;

    /// The scale, the growth tracker and the skip count as JSON, for a
    /// checkpoint; load_state checks them (a positive finite scale, counts
    /// >= 0) and changes nothing on an error.
    std::string state_json() const;
    void load_state(const std::string& json);

private:
    void ensure_on(Device d);

    GradScalerOptions o_;
    Tensor scale_, found_inf_;  // one element, f32, on the gradients' device
    Tensor counters_;           // i64 {growth tracker, skipped}, there too
    double host_scale_;         // the values before the tensors exist
    int64_t host_tracker_ = 0, host_skipped_ = 0;
    bool unscaled_ = false;
};

}  // namespace ember::amp

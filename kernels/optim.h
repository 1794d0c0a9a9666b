// Fused multi-tensor updates: every parameter of an optimizer's group
// updated in one pass (Note [Multi-tensor updates]), and the fused gradient
// passes around them (global norm and clipping, loss-scale unscaling with the
// inf/NaN check). The optimizers of optim/ call these; the per-element math is
// kernels/optim_math.h.
#pragma once

#include <cstdint>
#include <vector>

#include "../core/tensor.h"
#include "optim_args.h"

namespace ember::kernels {

// ---- Fronts (one dispatch per dtype signature; checks name the op) ----

/// The tensors of one update: params (updated in place) and their grads, the
/// optimizer's state buffers (state1, state2, state3: as many as the rule needs,
/// each like its param, zeroed by the caller before the first step), and
/// optional low-precision copies written after the update (same shapes).
/// Everything dense, on one device; grads may be of a lower precision than
/// the params (a bf16 model's gradients updating f32 master weights).
/// `steps` and `next_steps` (both empty, or one per parameter: one-element
/// i64 tensors, views allowed, on the parameters' device, no next count
/// sharing memory with a count read) and `found_inf` (undefined, or a
/// one-element f32 tensor there): Note [Device step counts]. `lr_table` and
/// `momentum_table` (undefined, or f64 vectors of one length >= 1 there; they
/// need the step counts): Note [Schedule tables].
struct UpdateTensors {
    std::vector<Tensor> params, grads, state1, state2, state3, copies;
    bool stochastic_copy = false;  ///< bf16 copies rounded stochastically,
    uint64_t seed = 0, step = 0;   ///< from Philox stream `step` under `seed`
    std::vector<Tensor> steps;       ///< per-parameter step counts read by the update
    std::vector<Tensor> next_steps;  ///< where each count + 1 (+ 0 when skipped) is written
    Tensor found_inf;                ///< set (nonzero): the whole update is skipped
    Tensor lr_table, momentum_table; ///< a schedule's values by step count, or undefined
};

/// The rules (kernels/optim_math.h). `decay`: Adam's L2 on the gradient or
/// AdamW's decay of the weights (AdamDecay). `step` (the
/// 1-based count of Adam and LAMB) and `first` (SGD's and LARS's first step)
/// apply where the tensors carry no step counts (Note [Device step counts]).
void adam_update(const UpdateTensors& t, const AdamArgs& a, AdamDecay decay, int64_t step = 1);
void sgd_update(const UpdateTensors& t, const SgdArgs& a, bool first = true);
void lamb_update(const UpdateTensors& t, const LambArgs& a, int64_t step = 1);
void lars_update(const UpdateTensors& t, const LarsArgs& a, bool first = true);

/// sqrt(Σ over all tensors of Σ x²) summed in f64: the global L2 norm, as a
/// 0-d tensor on the tensors' device (f64 when they all are, else f32).
/// Tensors of any floating dtypes, dense, on one device.
Tensor global_norm(const std::vector<Tensor>& tensors);
/// Multiplies every tensor in place by min(1, max_norm / (norm + 1e-6)), the
/// factor read from `norm` (a one-element tensor on their device, e.g.
/// global_norm's) by the kernel itself, so no value goes to the host.
void clip_by_norm_(const std::vector<Tensor>& tensors, const Tensor& norm, double max_norm);
/// The loss scaler's pass: multiplies every tensor in place by inv_scale[0]
/// and sets found_inf[0] = 1 when any element was inf or NaN (else leaves it).
/// inv_scale and found_inf: one-element f32 tensors on the tensors' device.
void unscale_(const std::vector<Tensor>& tensors, const Tensor& inv_scale, const Tensor& found_inf);

/// The loss scaler's dynamic scale rule, on the scaler's device (a CUDA
/// kernel of one thread: no host sync): when found_inf[0] != 0, scale *=
/// backoff, tracker = 0 and skipped += 1; else tracker += 1 and, when it
/// reaches `interval`, scale *= growth and tracker = 0. Then found_inf = 0.
/// The product is taken in f64 and rounded to f32 once. scale, found_inf:
/// one-element f32; counters: two-element i64 {tracker, skipped}; one device.
void update_scale_(const Tensor& scale, const Tensor& found_inf, const Tensor& counters,
                   double growth, double backoff, int64_t interval);

}  // namespace ember::kernels

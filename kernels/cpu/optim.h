// CPU fused multi-tensor updates on UpdateLists (kernels/optim.h): raw
// buffers and a chunk table in, no Tensor. The loops are in kernels/cpu/optim.cpp.
#pragma once

#include "../optim_args.h"

namespace ember::kernels::cpu {

// State buffers (state1, state2) are of the accumulation type of the
// parameters: f32 for f32, f16 and bf16 parameters, f64 for f64.

/// Adam / AdamW on every slot (param, grad, state1 = exp_avg, state2 = exp_avg_sq,
/// state3 = AMSGrad's max_exp_avg_sq or null).
void adam_update(const UpdateList& l, const AdamArgs& a, bool decoupled, int64_t step);
/// SGD (state1 = momentum buffer, null without momentum).
void sgd_update(const UpdateList& l, const SgdArgs& a, bool first);
/// LAMB (state1, state2 as Adam's); two passes: the trust ratio needs each
/// tensor's norms first.
void lamb_update(const UpdateList& l, const LambArgs& a, int64_t step);
/// LARS (state1 = momentum buffer).
void lars_update(const UpdateList& l, const LarsArgs& a, bool first);

// Each slot with a step count uses it (t = count + 1, and the list's
// schedule tables at the count) and writes its next count: count + 1, or
// count when l.found_inf is set (nonzero), in which case nothing else is
// written (Note [Device step counts], Note [Schedule tables] in
// kernels/optim.h).

/// Σ x² over every slot's `param` buffer, in f64 (chunk partials in order).
double sum_squares(const UpdateList& l);
/// Every slot's `param` buffer *= factor; when found_inf is not null, sets
/// *found_inf = 1 if an element was inf or NaN before scaling.
void scale(const UpdateList& l, double factor, float* found_inf);

/// kernels::update_scale_'s rule on host memory: scale[0], found_inf[0] and
/// counters[0..1] = {growth tracker, skipped steps}.
void update_scale(float* scale, float* found_inf, int64_t* counters, double growth,
                  double backoff, int64_t interval);

}  // namespace ember::kernels::cpu

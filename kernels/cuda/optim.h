// CUDA fused multi-tensor updates and gradient passes (kernels/cuda/optim.cu):
// the entry points of kernels/cpu/optim.h plus the stream they are queued on,
// and the gradient passes with their scalars in device memory (the norm, the
// inverse scale, the found-inf flag), so that nothing is read on the host.
// Plain C++: every build sees these declarations.
#pragma once

#include <vector>

#include "../../core/cuda_context.h"
#include "../optim_args.h"

namespace ember::kernels::cuda {

// UpdateLists as the fronts build them (kernels/optim.cpp); the lists' own
// chunk tables are not read: the CUDA launches cut the slots at their own
// chunk size (kernels/cuda/optim_plan.h). State buffers are of the
// parameters' accumulation type, as on the CPU. Each update reads the list's
// found-inf flag in every block (set: nothing is written but the next step
// counts), the slots' own step counts and the list's schedule tables, and
// writes the next counts in its last pass (Note [Device step counts], Note
// [Schedule tables] in kernels/optim.h). Every launch is counted
// (core/launch_count.h).

/// Adam / AdamW (state1 = exp_avg, state2 = exp_avg_sq, state3 = AMSGrad's
/// max_exp_avg_sq or null), copies written in the same pass.
void adam_update(const UpdateList& l, const AdamArgs& a, bool decoupled, int64_t step,
                 StreamRef stream);
/// SGD (state1 = momentum buffer, null without momentum).
void sgd_update(const UpdateList& l, const SgdArgs& a, bool first, StreamRef stream);
/// LAMB: moments and per-chunk partial norms, per-tensor trust ratios, update.
void lamb_update(const UpdateList& l, const LambArgs& a, int64_t step, StreamRef stream);
/// LARS: per-chunk partial norms, per-tensor local rates, update.
void lars_update(const UpdateList& l, const LarsArgs& a, bool first, StreamRef stream);

/// sqrt(Σ over every list's `param` buffers of Σ x²), the sums in f64, written
/// to the device scalar `out` of dtype `out_dtype` (f32 or f64).
void global_norm(const std::vector<UpdateList>& lists, void* out, DType out_dtype,
                 StreamRef stream);
/// Every `param` buffer *= min(1, max_norm / (norm + 1e-6)), the factor
/// computed by the kernel from the device scalar `norm` (f32 or f64).
void clip_by_norm_(const UpdateList& l, const void* norm, DType norm_dtype, double max_norm,
                   StreamRef stream);
/// Every `param` buffer *= inv_scale[0]; found_inf[0] = 1 when an element was
/// inf or NaN before scaling (else left as it is). Both device f32 scalars.
void unscale_(const UpdateList& l, const float* inv_scale, float* found_inf, StreamRef stream);

/// kernels::update_scale_ on device scalars (one thread of one block):
/// scale, found_inf (f32) and counters {tracker, skipped} (i64).
void update_scale(float* scale, float* found_inf, int64_t* counters, double growth,
                  double backoff, int64_t interval, StreamRef stream);

}  // namespace ember::kernels::cuda

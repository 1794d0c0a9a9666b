// Automatic mixed precision (docs/tips.md #5): inside an amp::autocast scope the
// differentiable ops cast their floating inputs by a per-op policy —
// matrix products and convolutions in the low precision (f16 or bf16),
// softmax, normalization, reductions and losses in f32 — with recorded casts,
// so gradients flow back to the f32 weights in f32. The policy table is
// autograd/autocast.cpp's (docs/amp.md lists it). Per thread, like grad mode.
#pragma once

#include "../core/tensor.h"

namespace ember::amp {

/// Turns autocast on (or, with enabled = false, off) for its scope on this
/// thread, in `dtype` (f16 or bf16), restoring the previous state after.
class autocast {
public:
    explicit autocast(DType dtype = DType::bf16, bool enabled = true);
    ~autocast();
    autocast(const autocast&) = delete;
    autocast& operator=(const autocast&) = delete;

private:
    bool prev_enabled_;
    DType prev_dtype_;
};

/// Whether autocast is on on this thread, and its low-precision dtype.
bool is_autocast_enabled();
DType autocast_dtype();

/// What autocast does to an op's floating inputs.
enum class CastPolicy {
    lower,  ///< to the autocast dtype: matmul, linear, conv2d, ...
    f32,    ///< f16/bf16 up to f32: softmax, norms, reductions, losses
    none,   ///< as given
};

/// The policy of the differentiable op `op` ("matmul", "softmax", ...);
/// `none` for ops not in the table.
CastPolicy cast_policy(const char* op);

/// `t` as op `op` takes it: itself when autocast is off, `t` is undefined or
/// not floating, or the policy leaves it; else t.to(dtype) (recorded). A
/// weight (a leaf that requires grad) lowered is cast once per outermost
/// autocast scope while it is unchanged: later uses get the same cast
/// (Note [The autocast cast cache]).
Tensor cast_input(const char* op, const Tensor& t);

}  // namespace ember::amp

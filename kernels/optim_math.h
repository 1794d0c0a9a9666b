// The per-element math of the optimizers, shared by the CPU kernels
// (kernels/cpu/optim.cpp) and the CUDA ones: one EMBER_HD function per update
// rule, in the accumulation type A (f32 for f32/f16/bf16 parameters, f64 for
// f64). The host precomputes every scalar that depends only on the step
// (bias corrections, step sizes) in f64 and hands them over in A.
#pragma once

#include <cmath>
#include <cstdint>

#include "../core/macros.h"
#include "../core/philox.h"
#include "math.h"

namespace ember::math {

/// Adam / AdamW scalars of one step t (PyTorch's algorithm): step_size =
/// lr / (1 − β1^t), inv_bc2_sqrt = 1 / sqrt(1 − β2^t); `decay` is
/// 1 − lr·weight_decay for AdamW (decoupled) and 1 otherwise; `l2` is
/// weight_decay for Adam (added to the gradient) and 0 for AdamW. Every
/// coefficient is formed in f64 and rounded to A once (Note [Coefficients
/// in f64]).
template <class A>
struct AdamScalars {
    A one_minus_beta1, beta2, one_minus_beta2, eps, step_size, inv_bc2_sqrt, decay, l2;
};

// Note [Coefficients in f64]
// A rule's coefficients are formed from the f64 hyper-parameters and rounded
// to the accumulation type once: 1 − β2 is A(1 − β2), never A(1) − A(β2).
// The second form subtracts the already rounded β2 and makes the error of
// its rounding relative to a small number: with β2 = 0.999 in f32, 1 − β2
// comes out 0.00099998713 (1.3e-5 too small), so every exp_avg_sq would be
// off by that much on every step, and by 1.7e-4 at β2 = 0.9999 and 1.4e-3
// at 0.99999 (tests/optim/test_optimizers.cpp checks the state at all
// three). PyTorch computes these in Python floats (f64) likewise. The same
// holds for 1 − β1, 1 − dampening and the bias corrections.

/// 1 − β^t: Adam's and LAMB's bias correction of step t. The host and the
/// CUDA blocks that read their step count from memory (Note [Device step
/// counts] in kernels/optim.h) evaluate the same expressions from it:
/// step_size = lr / (1 − β1^t), inv_bc2_sqrt = 1 / sqrt(1 − β2^t) and LAMB's
/// inv_bc1 = 1 / (1 − β1^t), in f64, rounded to A once. (CUDA's f64 pow may
/// differ from the host's in the last place: then so may these scalars.)
EMBER_HD EMBER_INLINE double bias_correction(double beta, int64_t t) {
    return 1 - std::pow(beta, double(t));
}

/// The entry of a schedule table of `size` values for a tensor that has
/// taken `count` applied steps: entry `count`, the last one past the end
/// (Note [Schedule tables] in kernels/optim.h).
EMBER_HD EMBER_INLINE double table_value(const double* table, int64_t size, int64_t count) {
    return table[count < size ? count : size - 1];
}

/// What one tensor's update takes that may come from device memory: its
/// step t (1-based), its LR and its momentum (SGD, LARS) or β1 (Adam, LAMB).
struct StepValues {
    int64_t t;
    double lr, momentum;
};

/// A tensor's StepValues: from its own step count `count` (t = *count + 1)
/// and, where given, the schedule tables at that count; without a count, the
/// host's t, lr and momentum. Both backends call this, the CPU per tensor on
/// the host and a CUDA block per chunk on the device.
EMBER_HD EMBER_INLINE StepValues step_values(const int64_t* count, int64_t host_t, double lr,
                                             double momentum, const double* lr_table,
                                             const double* momentum_table, int64_t size) {
    if (count == nullptr) return {host_t, lr, momentum};
    const int64_t c = *count;
    return {c + 1, lr_table ? table_value(lr_table, size, c) : lr,
            momentum_table ? table_value(momentum_table, size, c) : momentum};
}

/// The AdamScalars of step t from the hyper-parameters, in f64 and rounded
/// to A once (the same expressions on the host and on the device).
template <class A>
EMBER_HD EMBER_INLINE AdamScalars<A> adam_scalars(double lr, double beta1, double beta2,
                                                  double eps, double weight_decay,
                                                  bool decoupled, int64_t t) {
    return {A(1 - beta1),
            A(beta2),
            A(1 - beta2),
            A(eps),
            A(lr / bias_correction(beta1, t)),
            A(1 / std::sqrt(bias_correction(beta2, t))),
            A(decoupled ? 1 - lr * weight_decay : 1),
            A(decoupled ? 0 : weight_decay)};
}

/// The larger of the running maximum and v, NaN from either kept (as
/// torch.maximum): AMSGrad's max_exp_avg_sq.
template <class A>
EMBER_HD EMBER_INLINE A amsgrad_max(A running, A v) {
    return (v > running || v != v) ? v : running;
}

/// One Adam/AdamW element: g += l2·p; p *= decay; m = β1·m + (1 − β1)·g;
/// v = β2·v + (1 − β2)·g²; with AMSGrad (vmax not null) vmax = max(vmax, v)
/// takes v's place below; p −= step_size · m / (sqrt(v)·inv_bc2_sqrt + eps).
template <class A>
EMBER_HD EMBER_INLINE void adam_element(A& p, A g, A& m, A& v, A* vmax, const AdamScalars<A>& s) {
    g = g + s.l2 * p;
    p = p * s.decay;
    m = m + s.one_minus_beta1 * (g - m);  // lerp(m, g, 1 − β1), as PyTorch
    v = s.beta2 * v + s.one_minus_beta2 * g * g;
    A second = v;
    if (vmax) second = *vmax = amsgrad_max(*vmax, v);
    const A denom = std::sqrt(second) * s.inv_bc2_sqrt + s.eps;
    p = p - s.step_size * m / denom;
}

/// Adam's normalized direction m̂ / (sqrt(v̂) + eps) for LAMB, from the moments
/// already updated (bias corrections applied here: bc1 = 1 / (1 − β1^t)).
template <class A>
EMBER_HD EMBER_INLINE A adam_direction(A m, A v, A inv_bc1, A inv_bc2_sqrt, A eps) {
    return m * inv_bc1 / (std::sqrt(v) * inv_bc2_sqrt + eps);
}

/// SGD scalars (PyTorch's algorithm): on the first step the momentum buffer
/// starts as the gradient itself (`first`), without dampening. 1 − dampening
/// is formed in f64 (Note [Coefficients in f64]).
template <class A>
struct SgdScalars {
    A lr, momentum, one_minus_dampening, weight_decay;
    bool nesterov, first;
};

/// One SGD element: d = g + wd·p; with momentum, b = first ? d : μ·b + (1 − τ)·d
/// and d = nesterov ? d + μ·b : b; p −= lr·d.
template <class A>
EMBER_HD EMBER_INLINE void sgd_element(A& p, A g, A* buf, const SgdScalars<A>& s) {
    A d = g + s.weight_decay * p;
    if (buf) {
        *buf = s.first ? d : s.momentum * *buf + s.one_minus_dampening * d;
        d = s.nesterov ? d + s.momentum * *buf : *buf;
    }
    p = p - s.lr * d;
}

/// The trust ratio of LAMB (You et al. 2019): φ(‖p‖) / ‖r‖ with φ(x) =
/// min(x, 10), and 1 when either norm is 0.
EMBER_HD EMBER_INLINE double lamb_trust(double param_norm, double update_norm) {
    const double phi = param_norm < 10.0 ? param_norm : 10.0;
    return param_norm > 0 && update_norm > 0 ? phi / update_norm : 1.0;
}

/// The local learning rate of LARS (You et al. 2017): η·‖w‖ / (‖g‖ + β·‖w‖ + eps),
/// and 1 when either norm is 0.
EMBER_HD EMBER_INLINE double lars_trust(double param_norm, double grad_norm, double eta,
                                        double weight_decay, double eps) {
    return param_norm > 0 && grad_norm > 0
               ? eta * param_norm / (grad_norm + weight_decay * param_norm + eps)
               : 1.0;
}

/// The loss scaler's dynamic scale rule (kernels::update_scale_), on the
/// host and in a one-thread CUDA kernel alike: after an overflow (found_inf
/// nonzero) scale *= backoff, the growth tracker restarts and the skip count
/// grows; else the tracker grows and, at `interval`, scale *= growth and the
/// tracker restarts. The product in f64, rounded to f32 once; a growth that
/// would round to infinity keeps the scale (PyTorch's rule: the scale stays
/// finite, so steps are never all skipped). The flag clears.
EMBER_HD EMBER_INLINE void update_scale(float& scale, float& found_inf, int64_t& tracker,
                                        int64_t& skipped, double growth, double backoff,
                                        int64_t interval) {
    double s = double(scale);
    if (found_inf != 0) {
        s *= backoff;
        tracker = 0;
        skipped += 1;
    } else if (++tracker == interval) {
        const bool finite = (float_bits(float(s * growth)) & 0x7f800000u) != 0x7f800000u;
        if (finite) s *= growth;
        tracker = 0;
    }
    scale = float(s);
    found_inf = 0;
}

/// f32 → bf16 by stochastic rounding: 16 random bits added below bf16's last
/// place before truncation, so the expected value is x. Infinities and NaN
/// round as usual; a finite value never rounds up to infinity.
EMBER_HD EMBER_INLINE BFloat16 bf16_stochastic(float x, uint32_t random16) {
    const uint32_t bits = float_bits(x);
    if ((bits & 0x7f800000u) == 0x7f800000u) return BFloat16(x);  // inf, NaN
    const uint32_t up = bits + (random16 & 0xffffu);
    const uint32_t kept = ((up & 0x7f800000u) == 0x7f800000u) ? bits : up;  // no overflow to inf
    return BFloat16::from_bits(uint16_t(kept >> 16));
}

/// The random 16 bits for element i of a tensor's copy at step t: word i % 2
/// (high or low half) of Philox block i / 2 of stream t under `seed`.
EMBER_HD EMBER_INLINE uint32_t rounding_bits(uint64_t seed, uint64_t step, int64_t i) {
    const Philox4 b = philox_block(seed, uint64_t(i) / 2, step);
    return i % 2 == 0 ? b.x[0] >> 16 : b.x[1] >> 16;
}

}  // namespace ember::math

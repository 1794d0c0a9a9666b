// CPU fused multi-tensor updates (Note [Multi-tensor updates] in
// kernels/optim.h): Adam/AdamW, SGD, LAMB, LARS, the global norm, clipping and
// the loss scaler's unscale pass and scale update. Each walks the chunk table with OpenMP; the
// element math is kernels/optim_math.h, shared with the CUDA kernels.
// Bytes per f32 parameter: Adam 28 (p, g, m, v read; p, m, v written; 36
// with AMSGrad's running maximum), SGD
// with momentum 20, LAMB 44 (two passes: the norms need the whole tensor),
// LARS 32; +2 per element for a bf16/f16 copy. FLOPs: ~10 per element.
// With step counts and schedule tables (Note [Device step counts], Note
// [Schedule tables] in kernels/optim.h) each tensor's values come from its
// count, as a CUDA block takes them, and its next count is written after the
// update, skipped or not.
// Deterministic: bit-identical for any thread count.
// Test: tests/optim/test_optimizers.cpp, tests/optim/test_optim_state.cpp,
// tests/optim/test_amp.cpp; benchmark: bench/optim.cpp.
#include "kernels/cpu/optim.h"

#include <omp.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/loop.h"
#include "kernels/math.h"
#include "kernels/optim_math.h"

namespace ember::kernels::cpu {

namespace {

using math::Acc;
using math::cast;

// Runs body(chunk, slot) over the chunk table, in parallel when it is worth
// it: chunks handed out as the threads come free (a static split of the
// table's order gives one thread a large tensor's chunks and another the
// small tensors': the mlp's first weight is 3/4 of its elements).
template <class F>
void for_chunks(const UpdateList& l, F body) {
    const int64_t n = int64_t(l.chunks.size());
    int64_t total = 0;
    for (const Chunk& c : l.chunks) total += c.count;
    const bool parallel = n > 1 && total >= kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(dynamic) if (parallel)
    for (int64_t i = 0; i < n; ++i) body(l.chunks[size_t(i)], l.slots[size_t(l.chunks[size_t(i)].tensor)]);
}

// The (param, grad) dtype pairs the updates take: equal, or f32 master
// weights with a half-precision model's gradients.
template <class F>
void visit_signature(const UpdateList& l, const char* op, F f) {
    visit_floating(l.param, op, [&](auto ptag) {
        using P = typename decltype(ptag)::type;
        if (l.grad == l.param) return f(ptag, ptag);
        EMBER_INTERNAL_CHECK(l.param == DType::f32 && (l.grad == DType::bf16 || l.grad == DType::f16),
                             op, ": parameters ", dtype_name(l.param), " with gradients ",
                             dtype_name(l.grad));
        if constexpr (std::is_same_v<P, float>) {
            if (l.grad == DType::bf16) return f(ptag, TypeTag<BFloat16>{});
            return f(ptag, TypeTag<Half>{});
        }
    });
}

// Writes the chunk's updated parameters into the slot's low-precision copy
// (only f32 parameters have one): a second loop over what is still in cache,
// so the update loops stay free of branches and vectorize.
template <class P>
void write_copy(const UpdateList& l, const UpdateSlot& s, const Chunk& c) {
    if (!s.copy) return;
    if constexpr (std::is_same_v<P, float>) {
        const float* __restrict p = static_cast<const float*>(s.param);
        if (l.copy == DType::f16) {
            Half* __restrict out = static_cast<Half*>(s.copy);
            for (int64_t i = c.begin; i < c.begin + c.count; ++i) out[i] = Half(p[i]);
        } else if (!l.stochastic_copy) {
            BFloat16* __restrict out = static_cast<BFloat16*>(s.copy);
            for (int64_t i = c.begin; i < c.begin + c.count; ++i) out[i] = BFloat16(p[i]);
        } else {
            BFloat16* __restrict out = static_cast<BFloat16*>(s.copy);
            for (int64_t i = c.begin; i < c.begin + c.count; ++i)
                out[i] = math::bf16_stochastic(p[i], math::rounding_bits(l.seed, l.step, i));
        }
    }
}

// Σ x² per slot of the buffer pick(slot) (f64), the chunk partials added in
// chunk order.
template <class T, class Pick>
std::vector<double> sums_of_squares(const UpdateList& l, Pick pick) {
    std::vector<double> part(l.chunks.size(), 0.0);
    for_chunks(l, [&](const Chunk& c, const UpdateSlot& s) {
        const T* x = static_cast<const T*>(pick(s)) + c.begin;
        double acc = 0;
        for (int64_t i = 0; i < c.count; ++i) {
            const double v = double(cast<Acc<T>>(x[i]));
            acc += v * v;
        }
        part[size_t(&c - l.chunks.data())] = acc;
    });
    std::vector<double> sums(l.slots.size(), 0.0);
    for (size_t i = 0; i < l.chunks.size(); ++i) sums[size_t(l.chunks[i].tensor)] += part[i];
    return sums;
}

// The update is skipped: the found-inf flag is set (Note [Device step counts]).
bool skipped(const UpdateList& l) { return l.found_inf != nullptr && *l.found_inf != 0; }

// The step, LR and momentum (or β1) of slot t: from its own count and the
// list's tables where it has a count, else the call's (math::step_values).
math::StepValues values_of(const UpdateList& l, const UpdateSlot& t, int64_t args_step,
                           double lr, double momentum) {
    return math::step_values(t.step, args_step, lr, momentum, l.tables.lr, l.tables.momentum,
                             l.tables.size);
}

// After an update, applied or skipped: every slot's next count is its count
// + 1, or + 0 when skipped (the CUDA kernels write it in their last pass).
void advance_steps(const UpdateList& l, bool applied) {
    for (const UpdateSlot& t : l.slots)
        if (t.step) *t.next_step = *t.step + (applied ? 1 : 0);
}

}  // namespace

void adam_update(const UpdateList& l, const AdamArgs& a, bool decoupled, int64_t step) {
    if (skipped(l)) return advance_steps(l, false);
    visit_signature(l, "adam_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            const math::StepValues h = values_of(l, t, step, a.lr, a.beta1);
            const math::AdamScalars<A> s = math::adam_scalars<A>(
                h.lr, h.momentum, a.beta2, a.eps, a.weight_decay, decoupled, h.t);
            P* __restrict p = static_cast<P*>(t.param);
            const G* __restrict g = static_cast<const G*>(t.grad);
            A* __restrict m = static_cast<A*>(t.state1);
            A* __restrict v = static_cast<A*>(t.state2);
            A* __restrict vmax = static_cast<A*>(t.state3);  // null without AMSGrad
            if (vmax) {
                for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                    A x = cast<A>(p[i]);
                    math::adam_element(x, cast<A>(g[i]), m[i], v[i], vmax + i, s);
                    p[i] = cast<P>(x);
                }
            } else {
                for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                    A x = cast<A>(p[i]);
                    math::adam_element(x, cast<A>(g[i]), m[i], v[i], static_cast<A*>(nullptr), s);
                    p[i] = cast<P>(x);
                }
            }
            write_copy<P>(l, t, c);
        });
    });
    advance_steps(l, true);
}

void sgd_update(const UpdateList& l, const SgdArgs& a, bool first) {
    if (skipped(l)) return advance_steps(l, false);
    visit_signature(l, "sgd_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            // The first step is t = 1: the call's `first` as a step.
            const math::StepValues h = values_of(l, t, first ? 1 : 2, a.lr, a.momentum);
            const math::SgdScalars<A> s{A(h.lr),           A(h.momentum), A(1 - a.dampening),
                                        A(a.weight_decay), a.nesterov,    h.t == 1};
            P* __restrict p = static_cast<P*>(t.param);
            const G* __restrict g = static_cast<const G*>(t.grad);
            A* __restrict buf = static_cast<A*>(t.state1);  // null without momentum
            if (buf) {
                for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                    A x = cast<A>(p[i]);
                    math::sgd_element(x, cast<A>(g[i]), buf + i, s);
                    p[i] = cast<P>(x);
                }
            } else {
                for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                    A x = cast<A>(p[i]);
                    math::sgd_element(x, cast<A>(g[i]), static_cast<A*>(nullptr), s);
                    p[i] = cast<P>(x);
                }
            }
            write_copy<P>(l, t, c);
        });
    });
    advance_steps(l, true);
}

void lamb_update(const UpdateList& l, const LambArgs& a, int64_t step) {
    if (skipped(l)) return advance_steps(l, false);
    visit_signature(l, "lamb_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        // Coefficients formed in f64 (Note [Coefficients in f64] in kernels/optim_math.h).
        const A b2(a.beta2), one_minus_b2(1 - a.beta2), eps(a.eps), wd(a.weight_decay);
        // Each slot's step values: β1, the bias corrections, the LR.
        std::vector<math::StepValues> h(l.slots.size());
        std::vector<A> one_minus_b1_of(l.slots.size()), bc1_of(l.slots.size()), bc2_of(l.slots.size());
        for (size_t k = 0; k < l.slots.size(); ++k) {
            h[k] = values_of(l, l.slots[k], step, a.lr, a.beta1);
            one_minus_b1_of[k] = A(1 - h[k].momentum);
            bc1_of[k] = A(1 / math::bias_correction(h[k].momentum, h[k].t));
            bc2_of[k] = A(1 / std::sqrt(math::bias_correction(a.beta2, h[k].t)));
        }
        // Pass 1: the moments, and Σ p² and Σ r² per tensor (r: the update direction).
        std::vector<double> part_p(l.chunks.size()), part_r(l.chunks.size());
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            const P* p = static_cast<const P*>(t.param);
            const G* g = static_cast<const G*>(t.grad);
            A* m = static_cast<A*>(t.state1);
            A* v = static_cast<A*>(t.state2);
            const A inv_bc1 = bc1_of[size_t(c.tensor)], inv_bc2_sqrt = bc2_of[size_t(c.tensor)];
            const A one_minus_b1 = one_minus_b1_of[size_t(c.tensor)];
            double sp = 0, sr = 0;
            for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                const A x = cast<A>(p[i]), gi = cast<A>(g[i]);
                m[i] = m[i] + one_minus_b1 * (gi - m[i]);
                v[i] = b2 * v[i] + one_minus_b2 * gi * gi;
                const A r = math::adam_direction(m[i], v[i], inv_bc1, inv_bc2_sqrt, eps) + wd * x;
                sp += double(x) * double(x);
                sr += double(r) * double(r);
            }
            part_p[size_t(&c - l.chunks.data())] = sp;
            part_r[size_t(&c - l.chunks.data())] = sr;
        });
        std::vector<double> norm_p(l.slots.size()), norm_r(l.slots.size());
        for (size_t i = 0; i < l.chunks.size(); ++i) {
            norm_p[size_t(l.chunks[i].tensor)] += part_p[i];
            norm_r[size_t(l.chunks[i].tensor)] += part_r[i];
        }
        std::vector<A> step(l.slots.size());
        for (size_t k = 0; k < l.slots.size(); ++k)
            step[k] = A(h[k].lr * math::lamb_trust(std::sqrt(norm_p[k]), std::sqrt(norm_r[k])));
        // Pass 2: p −= lr · trust · r, r recomputed from the stored moments.
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            P* p = static_cast<P*>(t.param);
            const A* m = static_cast<const A*>(t.state1);
            const A* v = static_cast<const A*>(t.state2);
            const A lr_trust = step[size_t(c.tensor)];
            const A inv_bc1 = bc1_of[size_t(c.tensor)], inv_bc2_sqrt = bc2_of[size_t(c.tensor)];
            for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                A x = cast<A>(p[i]);
                const A r = math::adam_direction(m[i], v[i], inv_bc1, inv_bc2_sqrt, eps) + wd * x;
                x = x - lr_trust * r;
                p[i] = cast<P>(x);
            }
            write_copy<P>(l, t, c);
        });
    });
    advance_steps(l, true);
}

void lars_update(const UpdateList& l, const LarsArgs& a, bool first) {
    if (skipped(l)) return advance_steps(l, false);
    visit_signature(l, "lars_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const double wd = a.exclude ? 0 : a.weight_decay;
        // Each slot's step values (the first step is t = 1) and local rate.
        std::vector<math::StepValues> h(l.slots.size());
        std::vector<A> local(l.slots.size());
        for (size_t k = 0; k < l.slots.size(); ++k) {
            h[k] = values_of(l, l.slots[k], first ? 1 : 2, a.lr, a.momentum);
            local[k] = A(h[k].lr);
        }
        if (!a.exclude) {
            const std::vector<double> pp =
                sums_of_squares<P>(l, [](const UpdateSlot& t) { return t.param; });
            const std::vector<double> gg =
                sums_of_squares<G>(l, [](const UpdateSlot& t) { return t.grad; });
            for (size_t k = 0; k < l.slots.size(); ++k)
                local[k] = A(h[k].lr * math::lars_trust(std::sqrt(pp[k]), std::sqrt(gg[k]),
                                                        a.trust_coefficient, wd, a.eps));
        }
        const A decay(wd);
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            P* p = static_cast<P*>(t.param);
            const G* g = static_cast<const G*>(t.grad);
            A* buf = static_cast<A*>(t.state1);
            const math::StepValues& ht = h[size_t(c.tensor)];
            const A rate = local[size_t(c.tensor)];
            const A keep = ht.t == 1 ? A(0) : A(ht.momentum);  // the buffer starts at 0
            for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                A x = cast<A>(p[i]);
                const A d = rate * (cast<A>(g[i]) + decay * x);
                buf[i] = keep * buf[i] + d;
                x = x - buf[i];
                p[i] = cast<P>(x);
            }
            write_copy<P>(l, t, c);
        });
    });
    advance_steps(l, true);
}

double sum_squares(const UpdateList& l) {
    double total = 0;
    visit_floating(l.param, "global_norm", [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (double s : sums_of_squares<T>(l, [](const UpdateSlot& t) { return t.param; }))
            total += s;
    });
    return total;
}

void scale(const UpdateList& l, double factor, float* found_inf) {
    visit_floating(l.param, "scale", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const A f = A(factor);
        std::vector<unsigned char> bad(l.chunks.size(), 0);
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            T* x = static_cast<T*>(t.param) + c.begin;
            bool nonfinite = false;
            for (int64_t i = 0; i < c.count; ++i) {
                const A v = cast<A>(x[i]);
                nonfinite |= !std::isfinite(v);
                x[i] = cast<T>(v * f);
            }
            bad[size_t(&c - l.chunks.data())] = nonfinite;
        });
        if (found_inf)
            for (unsigned char b : bad)
                if (b) *found_inf = 1.0f;
    });
}

void update_scale(float* scale, float* found_inf, int64_t* counters, double growth,
                  double backoff, int64_t interval) {
    math::update_scale(*scale, *found_inf, counters[0], counters[1], growth, backoff, interval);
}

}  // namespace ember::kernels::cpu

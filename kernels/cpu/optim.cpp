// CPU fused multi-tensor updates (Note [Multi-tensor updates] in
// kernels/optim.h): Adam/AdamW, SGD, LAMB, LARS, the global norm, clipping and
// the loss scaler's unscale pass and scale update. Each walks the chunk table with OpenMP; the
// element math is kernels/optim_math.h, shared with the CUDA kernels.
// Bytes per f32 parameter: Adam 28 (p, g, m, v read; p, m, v written), SGD
// with momentum 20, LAMB 44 (two passes: the norms need the whole tensor),
// LARS 32; +2 per element for a bf16/f16 copy. FLOPs: ~10 per element.
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

// Runs body(chunk, slot) over the chunk table, in parallel when it is worth it.
template <class F>
void for_chunks(const UpdateList& l, F body) {
    const int64_t n = int64_t(l.chunks.size());
    int64_t total = 0;
    for (const Chunk& c : l.chunks) total += c.count;
    const bool parallel = n > 1 && total >= kParallelGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
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

// The step of slot t: its own count + 1, or the Args' step.
int64_t step_of(const UpdateSlot& t, int64_t args_step) { return t.step ? *t.step + 1 : args_step; }

// After an applied update: every slot's own step count + 1.
void advance_steps(const UpdateList& l) {
    for (const UpdateSlot& t : l.slots)
        if (t.step) ++*t.step;
}

}  // namespace

void adam_update(const UpdateList& l, const AdamArgs& a) {
    if (skipped(l)) return;
    visit_signature(l, "adam_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const math::AdamScalars<A> s0{A(a.beta1),
                                      A(a.beta2),
                                      A(a.eps),
                                      A(0),  // step_size, inv_bc2_sqrt: per slot's step
                                      A(0),
                                      A(a.decoupled ? 1 - a.lr * a.weight_decay : 1),
                                      A(a.decoupled ? 0 : a.weight_decay)};
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            const int64_t step = step_of(t, a.step);
            math::AdamScalars<A> s = s0;
            s.step_size = A(a.lr / math::bias_correction(a.beta1, step));
            s.inv_bc2_sqrt = A(1 / std::sqrt(math::bias_correction(a.beta2, step)));
            P* __restrict p = static_cast<P*>(t.param);
            const G* __restrict g = static_cast<const G*>(t.grad);
            A* __restrict m = static_cast<A*>(t.state1);
            A* __restrict v = static_cast<A*>(t.state2);
            for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                A x = cast<A>(p[i]);
                math::adam_element(x, cast<A>(g[i]), m[i], v[i], s);
                p[i] = cast<P>(x);
            }
            write_copy<P>(l, t, c);
        });
    });
    advance_steps(l);
}

void sgd_update(const UpdateList& l, const SgdArgs& a) {
    if (skipped(l)) return;
    visit_signature(l, "sgd_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const math::SgdScalars<A> s0{A(a.lr), A(a.momentum), A(a.dampening), A(a.weight_decay),
                                     a.nesterov, a.first};
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            math::SgdScalars<A> s = s0;
            if (t.step) s.first = *t.step == 0;
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
    advance_steps(l);
}

void lamb_update(const UpdateList& l, const LambArgs& a) {
    if (skipped(l)) return;
    visit_signature(l, "lamb_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const A b1(a.beta1), b2(a.beta2), eps(a.eps), wd(a.weight_decay);
        // The bias corrections of each slot's step.
        std::vector<A> bc1_of(l.slots.size()), bc2_of(l.slots.size());
        for (size_t k = 0; k < l.slots.size(); ++k) {
            const int64_t step = step_of(l.slots[k], a.step);
            bc1_of[k] = A(1 / math::bias_correction(a.beta1, step));
            bc2_of[k] = A(1 / std::sqrt(math::bias_correction(a.beta2, step)));
        }
        // Pass 1: the moments, and Σ p² and Σ r² per tensor (r: the update direction).
        std::vector<double> part_p(l.chunks.size()), part_r(l.chunks.size());
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            const P* p = static_cast<const P*>(t.param);
            const G* g = static_cast<const G*>(t.grad);
            A* m = static_cast<A*>(t.state1);
            A* v = static_cast<A*>(t.state2);
            const A inv_bc1 = bc1_of[size_t(c.tensor)], inv_bc2_sqrt = bc2_of[size_t(c.tensor)];
            double sp = 0, sr = 0;
            for (int64_t i = c.begin; i < c.begin + c.count; ++i) {
                const A x = cast<A>(p[i]), gi = cast<A>(g[i]);
                m[i] = m[i] + (A(1) - b1) * (gi - m[i]);
                v[i] = b2 * v[i] + (A(1) - b2) * gi * gi;
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
            step[k] = A(a.lr * math::lamb_trust(std::sqrt(norm_p[k]), std::sqrt(norm_r[k])));
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
    advance_steps(l);
}

void lars_update(const UpdateList& l, const LarsArgs& a) {
    if (skipped(l)) return;
    visit_signature(l, "lars_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const double wd = a.exclude ? 0 : a.weight_decay;
        std::vector<A> local(l.slots.size(), A(a.lr));
        if (!a.exclude) {
            const std::vector<double> pp =
                sums_of_squares<P>(l, [](const UpdateSlot& t) { return t.param; });
            const std::vector<double> gg =
                sums_of_squares<G>(l, [](const UpdateSlot& t) { return t.grad; });
            for (size_t k = 0; k < l.slots.size(); ++k)
                local[k] = A(a.lr * math::lars_trust(std::sqrt(pp[k]), std::sqrt(gg[k]),
                                                     a.trust_coefficient, wd, a.eps));
        }
        const A mu(a.momentum), decay(wd);
        for_chunks(l, [&](const Chunk& c, const UpdateSlot& t) {
            P* p = static_cast<P*>(t.param);
            const G* g = static_cast<const G*>(t.grad);
            A* buf = static_cast<A*>(t.state1);
            const A rate = local[size_t(c.tensor)];
            const bool first = t.step ? *t.step == 0 : a.first;
            const A keep = first ? A(0) : mu;  // the buffer starts at 0
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
    advance_steps(l);
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

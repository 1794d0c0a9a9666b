// CPU fused cross-entropy (log_softmax + NLL with label smoothing), forward
// and backward, one row of logits per loop iteration, rows split across threads.
//
// Math:  m = max_c x_c; lse = m + log Σ_c exp(x_c − m) (in f64);
//        loss = lse − (1 − ε)·x_t − (ε / C)·Σ_c x_c (in f64, rounded once);
//        grad_c = g·(exp(x_c − lse) − (1 − ε)·[c == t] − ε / C), the
//        exponent and the exp in f64 (Note [lse in f64]).
// Dtypes: logits f32, f64, f16, bf16; loss and grad_loss in the
//        accumulation dtype (f32, or f64 for f64 logits); lse f64; targets i64.
// Cost:  forward reads N·C logits twice (max, then exp and sums: the second
//        pass hits the cache for rows that fit), ~20 FLOPs per logit (the exp);
//        backward reads and writes N·C once. Deterministic: one row per
//        thread, sums in row order. Test: tests/kernels/test_loss.cpp.
#include "kernels/cpu/loss.h"

#include <cmath>

#include "kernels/cpu/reduce.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

using math::cast;

// Note [lse in f64]
// The backward's probabilities are exp(x_c − lse). Logits of magnitude 1e4
// give an lse near 1e4, whose f32 rounding (half an ulp: 5e-4) would become
// the relative error of every probability. So the forward stores lse in f64
// whatever the logits' dtype, and the backward forms x_c − lse and its exp in
// f64 before rounding once: the probabilities are then good to an f32 ulp
// (tests/kernels/test_loss.cpp shifts logits by ±1e4 against an f64 reference).

template <class T>
void forward_impl(const View& loss, const View& lse, const View& logits, const View& target,
                  const CrossEntropyArgs& a) {
    using A = math::Acc<T>;
    const int64_t n = logits.shape[0], C = a.classes;
    const T* x = logits.ptr<const T>();
    const int64_t* t = target.ptr<const int64_t>();
    A* lo = loss.ptr<A>();
    double* ls = lse.ptr<double>();
    const double eps = a.label_smoothing;
    parallel_ranges(n, n * C, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const T* row = x + i * C;
            A m = lowest<A>();
            for (int64_t c = 0; c < C; ++c) m = nan_max(m, cast<A>(row[c]));
            double s = 0, sx = 0;
            for (int64_t c = 0; c < C; ++c) {
                const A v = cast<A>(row[c]);
                s += double(std::exp(v - m));  // perf: libm exp, not vectorized
                sx += double(v);
            }
            const double l = double(m) + std::log(s);
            ls[i] = l;
            if (t[i] == a.ignore_index) {
                lo[i] = A(0);
                continue;
            }
            double r = l - (1 - eps) * double(cast<A>(row[t[i]]));
            if (eps > 0) r -= eps / double(C) * sx;  // skipped at ε = 0, where an inf sum is moot
            lo[i] = A(r);
        }
    });
}

template <class T>
void backward_impl(const View& grad_logits, const View& grad_loss, const View& logits,
                   const View& lse, const View& target, const CrossEntropyArgs& a) {
    using A = math::Acc<T>;
    const int64_t n = logits.shape[0], C = a.classes;
    const T* x = logits.ptr<const T>();
    const int64_t* t = target.ptr<const int64_t>();
    const A* g = grad_loss.ptr<const A>();
    const double* ls = lse.ptr<const double>();
    T* gx = grad_logits.ptr<T>();
    const A on = A(1 - a.label_smoothing), off = A(a.label_smoothing / double(C));
    parallel_ranges(n, n * C, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const T* row = x + i * C;
            T* out = gx + i * C;
            if (t[i] == a.ignore_index) {
                for (int64_t c = 0; c < C; ++c) out[c] = cast<T>(A(0));
                continue;
            }
            const A gi = g[i];
            const double l = ls[i];
            // perf: libm exp in f64, not vectorized (Note [lse in f64])
            auto p = [&](int64_t c) { return A(std::exp(double(cast<A>(row[c])) - l)); };
            for (int64_t c = 0; c < C; ++c) out[c] = cast<T>(gi * (p(c) - off));
            out[t[i]] = cast<T>(gi * (p(t[i]) - off - on));
        }
    });
}

}  // namespace

std::optional<int64_t> cross_entropy_bad_target(const View& target, const CrossEntropyArgs& a) {
    const int64_t* t = target.ptr<const int64_t>();
    const int64_t n = target.numel();
    for (int64_t i = 0; i < n; ++i)
        if (t[i] != a.ignore_index && (t[i] < 0 || t[i] >= a.classes)) return i;
    return std::nullopt;
}

void cross_entropy_forward(const View& loss, const View& lse, const View& logits,
                           const View& target, const CrossEntropyArgs& a) {
    EMBER_INTERNAL_ASSERT(logits.is_contiguous() && target.is_contiguous() &&
                          loss.is_contiguous() && lse.is_contiguous() && logits.ndim == 2 &&
                          logits.shape[1] == a.classes && lse.dtype == DType::f64);
    visit_floating(logits.dtype, "cross_entropy_forward", [&](auto tag) {
        forward_impl<typename decltype(tag)::type>(loss, lse, logits, target, a);
    });
}

void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& logits,
                            const View& lse, const View& target, const CrossEntropyArgs& a) {
    EMBER_INTERNAL_ASSERT(logits.is_contiguous() && grad_logits.is_contiguous() &&
                          grad_loss.is_contiguous() && lse.is_contiguous() &&
                          target.is_contiguous() && logits.ndim == 2 &&
                          logits.shape[1] == a.classes && lse.dtype == DType::f64);
    visit_floating(logits.dtype, "cross_entropy_backward", [&](auto tag) {
        backward_impl<typename decltype(tag)::type>(grad_logits, grad_loss, logits, lse, target, a);
    });
}

}  // namespace ember::kernels::cpu

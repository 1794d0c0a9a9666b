// CUDA fused multi-tensor updates (Note [Multi-tensor updates] in
// kernels/optim.h): Adam/AdamW, SGD, LAMB and LARS over every tensor of an
// UpdateList, and the gradient passes around them (global norm, clipping, the
// loss scaler's unscale with its inf/NaN check, its scale update) —
// kernels/cpu/optim.cpp's twin.
//
// Math: the per-element functions of kernels/optim_math.h, the CPU's own, so
//   the updated parameters, moments and copies (f16, bf16, bf16 stochastic
//   rounding from the same Philox bits) are the CPU's bits where no
//   reduction is involved. LAMB's and LARS's per-tensor norms and the global
//   norm sum in f64 in another (fixed) order than the CPU: ~1e-15 relative.
// Dtypes: f32, f64, f16, bf16 parameters with gradients of their dtype, f32
//   parameters with f16/bf16 gradients; state in the accumulation dtype.
// Bytes per f32 parameter: Adam 28, SGD with momentum 20 (12 without), LAMB
//   40 (pass 1 reads p, g, m, v and writes m, v; pass 2 reads p, m, v and
//   writes p), LARS 28 (norms read p, g; update reads p, g, b, writes p, b);
//   +2 per element for a copy; global norm 4 (read), clip and unscale 8; plus
//   8 bytes per chunk of 16,384 for each partial, and per chunk the step
//   count and schedule-table entries read (8-24 bytes), per tensor its next
//   count written (8). FLOPs: ~10 per element (Adam 12, LAMB 20), 2 for the
//   norm; per block a few f64 operations and two pow for the step's scalars.
// Launch (kernels/cuda/optim_plan.h, Note [Chunk tables as kernel
//   parameters]): a block of 256 threads per chunk of 16,384 elements, the
//   chunk table of up to 256 tensors as a __grid_constant__ kernel parameter,
//   so one launch per pass serves up to 256 tensors of any size; 16-byte loads
//   (8 for f16/bf16 gradients and copies) where every buffer is aligned. Norms:
//   pass 1 writes one f64 partial per chunk (block_reduce), a warp per tensor
//   adds its chunks' partials in chunk order, then the update pass. Launches
//   per group of up to 256 tensors: AdamW and SGD 1, LAMB 3, LARS 3 (1 for
//   an excluded group); global norm 1 + 1, clip and unscale 1; each counted
//   (core/launch_count.h). The launch table, the chunk walk and the host
//   side: kernels/cuda/optim_launch.cuh.
// Loss scaling and schedules (Note [Device step counts], Note [Schedule
//   tables] in kernels/optim.h): each update block reads the list's found-inf
//   flag and its tensor's own step count, and from them and the schedule
//   tables the LR, the momentum or β1, the bias corrections (Adam, LAMB) or
//   the first-step rule (SGD, LARS) in f64 — the host's formulas, CUDA's pow
//   possibly a last place off the host's. In the last pass, the block of the
//   tensor's chunk 0 writes its next count (count + 1, or count when the flag
//   is set) to the other word of the pair, in the same launch: no launch of
//   its own. Then, with the flag set, the blocks return writing nothing else.
//   update_scale_kernel: the scaler's rule, one thread.
// Deterministic: every sum's order depends on the sizes only; no atomics.
// Test: tests/cuda/test_cuda_optim.cpp; plan: tests/kernels/test_optim_plan.cpp.
//   Bench: `ember bench optim` (its cuda:0 rows).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/optim.h"
#include "kernels/cuda/optim_launch.cuh"
#include "kernels/cuda/optim_plan.h"
#include "kernels/cuda/workspace.h"
#include "kernels/math.h"
#include "kernels/optim_math.h"

namespace ember::kernels::cuda {

namespace {

using math::Acc;
using math::cast;
using namespace optim_detail;

// ---- Update kernels: one block per chunk ----

// Adam/AdamW, one pass: the step count advances in it (advance_count);
// kAms: AMSGrad's running maximum of v (state3) in the denominator.
template <class P, class G, int K, bool kAms>
__global__ void __launch_bounds__(kUpdateBlock)
    adam_kernel(const __grid_constant__ Launch lp, math::AdamScalars<Acc<P>> s, const AdamArgs h,
                const bool decoupled, const int64_t step, const StepArgs st, const CopyArgs c) {
    using A = Acc<P>;
    const Entry& e = entry_of(lp);
    const bool skipped = skip_update(st);
    advance_count(e, skipped);
    if (skipped) return;
    if (e.step) {  // kernels/cpu/optim.cpp's adam_update, from the entry's own count
        const math::StepValues v = values_of(e, st, step, h.lr, h.beta1);
        s = math::adam_scalars<A>(v.lr, v.momentum, h.beta2, h.eps, h.weight_decay, decoupled,
                                  v.t);
    }
    P* p = static_cast<P*>(e.param);
    const G* g = static_cast<const G*>(e.grad);
    A* m = static_cast<A*>(e.state1);
    A* v = static_cast<A*>(e.state2);
    A* vmax = static_cast<A*>(e.state3);
    walk<K>(range_of(e), e.vec, [&](auto kk, int64_t i) {
        constexpr int k = decltype(kk)::value;
        A x[k], gi[k], mi[k], vi[k], wi[k];
        load<k>(p, i, x), load<k>(g, i, gi), load<k>(m, i, mi), load<k>(v, i, vi);
        if constexpr (kAms) load<k>(vmax, i, wi);
#pragma unroll
        for (int j = 0; j < k; ++j)
            math::adam_element(x[j], gi[j], mi[j], vi[j], kAms ? &wi[j] : static_cast<A*>(nullptr),
                               s);
        store<k>(p, i, x), store<k>(m, i, mi), store<k>(v, i, vi);
        if constexpr (kAms) store<k>(vmax, i, wi);
        write_copy<P, k>(e.copy, c, i, x);
    });
}

// SGD, one pass: the step count advances in it.
template <class P, class G, int K, bool kMomentum>
__global__ void __launch_bounds__(kUpdateBlock)
    sgd_kernel(const __grid_constant__ Launch lp, math::SgdScalars<Acc<P>> s, const SgdArgs h,
               const StepArgs st, const CopyArgs c) {
    using A = Acc<P>;
    const Entry& e = entry_of(lp);
    const bool skipped = skip_update(st);
    advance_count(e, skipped);
    if (skipped) return;
    if (e.step) {  // kernels/cpu/optim.cpp's sgd_update, from the entry's own count
        const math::StepValues v = values_of(e, st, 0, h.lr, h.momentum);
        s.lr = A(v.lr);
        s.momentum = A(v.momentum);
        s.first = v.t == 1;
    }
    P* p = static_cast<P*>(e.param);
    const G* g = static_cast<const G*>(e.grad);
    A* buf = static_cast<A*>(e.state1);
    walk<K>(range_of(e), e.vec, [&](auto kk, int64_t i) {
        constexpr int k = decltype(kk)::value;
        A x[k], gi[k], b[k];
        load<k>(p, i, x), load<k>(g, i, gi);
        if constexpr (kMomentum) load<k>(buf, i, b);
#pragma unroll
        for (int j = 0; j < k; ++j)
            math::sgd_element(x[j], gi[j], kMomentum ? &b[j] : static_cast<A*>(nullptr), s);
        store<k>(p, i, x);
        if constexpr (kMomentum) store<k>(buf, i, b);
        write_copy<P, k>(e.copy, c, i, x);
    });
}

template <class A>
struct LambScalars {
    A one_minus_b1, b2, one_minus_b2, eps, wd, inv_bc1, inv_bc2_sqrt;  // Note [Coefficients in f64]
    double beta1, beta2;  // for the entries with their own step count
    int64_t step;         // the host's step
};

// s with β1 and the bias corrections of entry e's own step count (and the
// β1 table), where it has one.
template <class A>
__device__ __forceinline__ LambScalars<A> lamb_scalars_of(const Entry& e, const StepArgs& st,
                                                          LambScalars<A> s) {
    if (e.step) {
        const math::StepValues v = values_of(e, st, s.step, 0, s.beta1);
        s.one_minus_b1 = A(1 - v.momentum);
        s.inv_bc1 = A(1 / math::bias_correction(v.momentum, v.t));
        s.inv_bc2_sqrt = A(1 / sqrt(math::bias_correction(s.beta2, v.t)));
    }
    return s;
}

// LAMB pass 1: the moments, and per chunk Σ p² and Σ r² (r the update direction).
template <class P, class G, int K>
__global__ void __launch_bounds__(kUpdateBlock)
    lamb_moments_kernel(const __grid_constant__ Launch lp, const LambScalars<Acc<P>> s0,
                        double* part_p, double* part_r, const StepArgs st) {
    using A = Acc<P>;
    if (skip_update(st)) return;  // the partials are then never read
    const Entry& e = entry_of(lp);
    const LambScalars<A> s = lamb_scalars_of(e, st, s0);
    const P* p = static_cast<const P*>(e.param);
    const G* g = static_cast<const G*>(e.grad);
    A* m = static_cast<A*>(e.state1);
    A* v = static_cast<A*>(e.state2);
    Sum2 acc{0, 0};
    walk<K>(range_of(e), e.vec, [&](auto kk, int64_t i) {
        constexpr int k = decltype(kk)::value;
        A x[k], gi[k], mi[k], vi[k];
        load<k>(p, i, x), load<k>(g, i, gi), load<k>(m, i, mi), load<k>(v, i, vi);
#pragma unroll
        for (int j = 0; j < k; ++j) {  // kernels/cpu/optim.cpp's lamb_update, pass 1
            mi[j] = mi[j] + s.one_minus_b1 * (gi[j] - mi[j]);
            vi[j] = s.b2 * vi[j] + s.one_minus_b2 * gi[j] * gi[j];
            const A r =
                math::adam_direction(mi[j], vi[j], s.inv_bc1, s.inv_bc2_sqrt, s.eps) + s.wd * x[j];
            acc.a += double(x[j]) * double(x[j]);
            acc.b += double(r) * double(r);
        }
        store<k>(m, i, mi), store<k>(v, i, vi);
    });
    write_partials(lp, acc, part_p, part_r);
}

// LAMB pass 3: p −= lr·trust·r, r recomputed from the stored moments; the
// step count advances here, in the last pass.
template <class P, int K>
__global__ void __launch_bounds__(kUpdateBlock)
    lamb_apply_kernel(const __grid_constant__ Launch lp, const LambScalars<Acc<P>> s0,
                      const Acc<P>* rate, const StepArgs st, const CopyArgs c) {
    using A = Acc<P>;
    const Entry& e = entry_of(lp);
    const bool skipped = skip_update(st);
    advance_count(e, skipped);
    if (skipped) return;
    const LambScalars<A> s = lamb_scalars_of(e, st, s0);
    P* p = static_cast<P*>(e.param);
    const A* m = static_cast<const A*>(e.state1);
    const A* v = static_cast<const A*>(e.state2);
    const A lr_trust = rate[e.tensor];
    walk<K>(range_of(e), e.vec, [&](auto kk, int64_t i) {
        constexpr int k = decltype(kk)::value;
        A x[k], mi[k], vi[k];
        load<k>(p, i, x), load<k>(m, i, mi), load<k>(v, i, vi);
#pragma unroll
        for (int j = 0; j < k; ++j) {
            const A r =
                math::adam_direction(mi[j], vi[j], s.inv_bc1, s.inv_bc2_sqrt, s.eps) + s.wd * x[j];
            x[j] = x[j] - lr_trust * r;
        }
        store<k>(p, i, x);
        write_copy<P, k>(e.copy, c, i, x);
    });
}

// LARS update, the last pass: b = keep·b + rate·(g + decay·p); p −= b; rate
// per tensor (null: the LR for all, the excluded groups); keep = 0 on a
// first step (the entry's own count 0, or the host's `first`), else μ. The
// step count advances here.
template <class P, class G, int K>
__global__ void __launch_bounds__(kUpdateBlock)
    lars_apply_kernel(const __grid_constant__ Launch lp, const Acc<P>* rate, const LarsArgs h,
                      int first_step, Acc<P> decay, const StepArgs st, const CopyArgs c) {
    using A = Acc<P>;
    const Entry& e = entry_of(lp);
    const bool skipped = skip_update(st);
    advance_count(e, skipped);
    if (skipped) return;
    const math::StepValues v = values_of(e, st, first_step ? 1 : 2, h.lr, h.momentum);
    const A keep = v.t == 1 ? A(0) : A(v.momentum);
    P* p = static_cast<P*>(e.param);
    const G* g = static_cast<const G*>(e.grad);
    A* buf = static_cast<A*>(e.state1);
    const A r = rate ? rate[e.tensor] : A(v.lr);
    walk<K>(range_of(e), e.vec, [&](auto kk, int64_t i) {
        constexpr int k = decltype(kk)::value;
        A x[k], gi[k], b[k];
        load<k>(p, i, x), load<k>(g, i, gi), load<k>(buf, i, b);
#pragma unroll
        for (int j = 0; j < k; ++j) {
            const A d = r * (gi[j] + decay * x[j]);
            b[j] = keep * b[j] + d;
            x[j] = x[j] - b[j];
        }
        store<k>(p, i, x), store<k>(buf, i, b);
        write_copy<P, k>(e.copy, c, i, x);
    });
}

// ---- Norms ----

// Per chunk: Σ param² into part1 and (kTwo) Σ grad² into part2, in f64.
template <class T, class G, int K, bool kTwo>
__global__ void __launch_bounds__(kUpdateBlock)
    squares_kernel(const __grid_constant__ Launch lp, double* part1, double* part2) {
    const Entry& e = entry_of(lp);
    const T* x = static_cast<const T*>(e.param);
    const G* g = static_cast<const G*>(e.grad);
    Sum2 acc{0, 0};
    walk<K>(range_of(e), e.vec, [&](auto kk, int64_t i) {
        constexpr int k = decltype(kk)::value;
        double a[k];
        load<k>(x, i, a);
#pragma unroll
        for (int j = 0; j < k; ++j) acc.a += a[j] * a[j];
        if constexpr (kTwo) {
            load<k>(g, i, a);
#pragma unroll
            for (int j = 0; j < k; ++j) acc.b += a[j] * a[j];
        }
    });
    write_partials(lp, acc, part1, kTwo ? part2 : nullptr);
}

// A warp per tensor (its launch entry that holds chunk 0): the tensor's chunk
// partials added in chunk order per lane, then the warp's tree, and
// rate[tensor] = trust(entry, sqrt(Σ1), sqrt(Σ2)).
template <class A, class Trust>
__global__ void __launch_bounds__(kUpdateBlock)
    rates_kernel(const __grid_constant__ Launch lp, const double* part1, const double* part2,
                 A* rate, const Trust trust) {
    const int w = int(blockIdx.x) * (kUpdateBlock / kWarp) + int(threadIdx.x) / kWarp;
    const int lane = int(threadIdx.x) % kWarp;
    if (w >= lp.n) return;  // the whole warp
    const Entry& e = lp.e[w];
    if (e.chunk0 != 0) return;  // a tensor continued from the previous launch
    const int64_t g0 = lp.chunk_offset + e.first, n = chunk_count(e.numel, kCudaChunk);
    Sum2 acc{0, 0};
    for (int64_t c = lane; c < n; c += kWarp) acc = {acc.a + part1[g0 + c], acc.b + part2[g0 + c]};
    acc = warp_reduce(acc, AddSum2{});
    if (lane == 0) rate[e.tensor] = A(trust(e, sqrt(acc.a), sqrt(acc.b)));
}

// The rates lr·trust, the LR the entry's own (from the table at its count,
// where there are both).
struct LambTrust {
    double lr;
    StepArgs st;
    __device__ double operator()(const Entry& e, double norm_p, double norm_r) const {
        return values_of(e, st, 1, lr, 0).lr * math::lamb_trust(norm_p, norm_r);
    }
};
struct LarsTrust {
    double lr, eta, weight_decay, eps;
    StepArgs st;
    __device__ double operator()(const Entry& e, double norm_p, double norm_g) const {
        return values_of(e, st, 1, lr, 0).lr *
               math::lars_trust(norm_p, norm_g, eta, weight_decay, eps);
    }
};

// rates_kernel for every launch: a warp per entry.
template <class A, class Trust>
void launch_rates(const char* name, const std::vector<HostLaunch>& ls, const double* part1,
                  const double* part2, A* rate, Trust trust, StreamRef stream) {
    constexpr int warps = kUpdateBlock / kWarp;
    for (const HostLaunch& h : ls) {
        rates_kernel<A, Trust>
            <<<unsigned((h.p.n + warps - 1) / warps), kUpdateBlock, 0, stream.handle>>>(
                h.p, part1, part2, rate, trust);
        EMBER_CUDA_CHECK(cudaGetLastError());
        count_launch(name);
    }
}

// One block: out = sqrt(Σ part[0, n)) as f32 or f64.
__global__ void __launch_bounds__(kUpdateBlock)
    norm_finish_kernel(const double* part, int64_t n, void* out, int out_f64) {
    double acc = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += part[i];
    const double total = block_reduce(acc, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0) {
        if (out_f64)
            *static_cast<double*>(out) = sqrt(total);
        else
            *static_cast<float*>(out) = float(sqrt(total));
    }
}

// x *= f: f = inv_scale[0] (unscale) or, clipping, min(1, max_norm / (norm + 1e-6))
// from the device norm (blocks return at once when it is not below 1).
struct ScaleArgs {
    const float* inv_scale;  // unscale; null when clipping
    const void* norm;
    int norm_f64;
    double max_norm;
    float* found_inf;  // unscale: set to 1 on inf/NaN
};

template <class T, int K>
__global__ void __launch_bounds__(kUpdateBlock)
    scale_kernel(const __grid_constant__ Launch lp, const ScaleArgs s) {
    using A = Acc<T>;
    A f;
    if (s.inv_scale) {
        f = A(*s.inv_scale);
    } else {
        const double norm = s.norm_f64 ? *static_cast<const double*>(s.norm)
                                       : double(*static_cast<const float*>(s.norm));
        const double factor = s.max_norm / (norm + 1e-6);
        if (!(factor < 1)) return;  // uniform over the block
        f = A(factor);
    }
    const Entry& e = entry_of(lp);
    T* x = static_cast<T*>(e.param);
    bool bad = false;
    walk<K>(range_of(e), e.vec, [&](auto kk, int64_t i) {
        constexpr int k = decltype(kk)::value;
        A v[k];
        load<k>(x, i, v);
#pragma unroll
        for (int j = 0; j < k; ++j) {
            bad |= !isfinite(v[j]);
            v[j] = v[j] * f;
        }
        store<k>(x, i, v);
    });
    if (s.found_inf && __syncthreads_or(bad) && threadIdx.x == 0) *s.found_inf = 1.0f;
}

}  // namespace

void adam_update(const UpdateList& l, const AdamArgs& a, bool decoupled, int64_t step_in,
                 StreamRef stream) {
    const std::vector<HostLaunch> ls = launches_of(l);
    visit_signature(l, "adam_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const int64_t step = std::max<int64_t>(step_in, 1);  // unused where entries count their own
        const math::AdamScalars<A> s = math::adam_scalars<A>(a.lr, a.beta1, a.beta2, a.eps,
                                                             a.weight_decay, decoupled, step);
        if (a.amsgrad)
            launch_all("adam_update", ls, stream, adam_kernel<P, G, kVec<P>, true>, s, a,
                       decoupled, step, step_args(l), copy_args(l));
        else
            launch_all("adam_update", ls, stream, adam_kernel<P, G, kVec<P>, false>, s, a,
                       decoupled, step, step_args(l), copy_args(l));
    });
}

void sgd_update(const UpdateList& l, const SgdArgs& a, bool first, StreamRef stream) {
    const std::vector<HostLaunch> ls = launches_of(l);
    const bool momentum = !l.slots.empty() && l.slots[0].state1 != nullptr;
    visit_signature(l, "sgd_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const math::SgdScalars<A> s{A(a.lr),           A(a.momentum), A(1 - a.dampening),
                                    A(a.weight_decay), a.nesterov,    first};
        if (momentum)
            launch_all("sgd_update", ls, stream, sgd_kernel<P, G, kVec<P>, true>, s, a,
                       step_args(l), copy_args(l));
        else
            launch_all("sgd_update", ls, stream, sgd_kernel<P, G, kVec<P>, false>, s, a,
                       step_args(l), copy_args(l));
    });
}

void lamb_update(const UpdateList& l, const LambArgs& a, int64_t step_in, StreamRef stream) {
    const std::vector<HostLaunch> ls = launches_of(l);
    const int64_t chunks = total_chunks(ls);
    visit_signature(l, "lamb_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const int64_t step = std::max<int64_t>(step_in, 1);  // unused where entries count their own
        const LambScalars<A> s{A(1 - a.beta1),
                               A(a.beta2),
                               A(1 - a.beta2),
                               A(a.eps),
                               A(a.weight_decay),
                               A(1 / math::bias_correction(a.beta1, step)),
                               A(1 / std::sqrt(math::bias_correction(a.beta2, step))),
                               a.beta1,
                               a.beta2,
                               step};
        const Workspace ws(stream,
                           size_t(2 * chunks) * sizeof(double) + l.slots.size() * sizeof(A));
        double* part_p = ws.as<double>();
        double* part_r = part_p + chunks;
        A* rate = reinterpret_cast<A*>(part_r + chunks);
        launch_all("lamb_moments", ls, stream, lamb_moments_kernel<P, G, kVec<P>>, s, part_p,
                   part_r, step_args(l));
        launch_rates("lamb_rates", ls, part_p, part_r, rate, LambTrust{a.lr, step_args(l)},
                     stream);
        launch_all("lamb_apply", ls, stream, lamb_apply_kernel<P, kVec<P>>, s,
                   static_cast<const A*>(rate), step_args(l), copy_args(l));
    });
}

void lars_update(const UpdateList& l, const LarsArgs& a, bool first, StreamRef stream) {
    const std::vector<HostLaunch> ls = launches_of(l);
    const int64_t chunks = a.exclude ? 0 : total_chunks(ls);
    visit_signature(l, "lars_update", [&](auto ptag, auto gtag) {
        using P = typename decltype(ptag)::type;
        using G = typename decltype(gtag)::type;
        using A = Acc<P>;
        const double wd = a.exclude ? 0 : a.weight_decay;
        const Workspace ws(
            stream,
            a.exclude ? 0 : size_t(2 * chunks) * sizeof(double) + l.slots.size() * sizeof(A));
        A* rate = nullptr;  // excluded: lr for every tensor
        if (!a.exclude) {
            double* part_p = ws.as<double>();
            double* part_g = part_p + chunks;
            rate = reinterpret_cast<A*>(part_g + chunks);
            launch_all("lars_squares", ls, stream, squares_kernel<P, G, kVec<P>, true>, part_p,
                       part_g);
            launch_rates("lars_rates", ls, part_p, part_g, rate,
                         LarsTrust{a.lr, a.trust_coefficient, wd, a.eps, step_args(l)}, stream);
        }
        launch_all("lars_apply", ls, stream, lars_apply_kernel<P, G, kVec<P>>,
                   static_cast<const A*>(rate), a, first ? 1 : 0,
                   A(wd), step_args(l), copy_args(l));
    });
}

void global_norm(const std::vector<UpdateList>& lists, void* out, DType out_dtype,
                 StreamRef stream) {
    EMBER_INTERNAL_CHECK(out_dtype == DType::f32 || out_dtype == DType::f64,
                         "global_norm: output dtype ", dtype_name(out_dtype));
    std::vector<std::vector<HostLaunch>> ls;
    int64_t chunks = 0;
    for (const UpdateList& l : lists) chunks += total_chunks(ls.emplace_back(launches_of(l)));
    const Workspace ws(stream, size_t(chunks) * sizeof(double));
    double* part = ws.as<double>();
    for (size_t i = 0; i < lists.size(); ++i) {
        visit_floating(lists[i].param, "global_norm", [&](auto tag) {
            using T = typename decltype(tag)::type;
            launch_all("global_norm_squares", ls[i], stream, squares_kernel<T, T, kVec<T>, false>,
                       part, static_cast<double*>(nullptr));
        });
        part += total_chunks(ls[i]);
    }
    norm_finish_kernel<<<1, kUpdateBlock, 0, stream.handle>>>(ws.as<double>(), chunks, out,
                                                              out_dtype == DType::f64 ? 1 : 0);
    EMBER_CUDA_CHECK(cudaGetLastError());
    count_launch("global_norm_finish");
}

void clip_by_norm_(const UpdateList& l, const void* norm, DType norm_dtype, double max_norm,
                   StreamRef stream) {
    EMBER_INTERNAL_CHECK(norm_dtype == DType::f32 || norm_dtype == DType::f64,
                         "clip_by_norm_: norm dtype ", dtype_name(norm_dtype));
    const std::vector<HostLaunch> ls = launches_of(l);
    const ScaleArgs s{nullptr, norm, norm_dtype == DType::f64 ? 1 : 0, max_norm, nullptr};
    visit_floating(l.param, "clip_by_norm_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        launch_all("clip_by_norm_", ls, stream, scale_kernel<T, kVec<T>>, s);
    });
}

void unscale_(const UpdateList& l, const float* inv_scale, float* found_inf, StreamRef stream) {
    const std::vector<HostLaunch> ls = launches_of(l);
    const ScaleArgs s{inv_scale, nullptr, 0, 0, found_inf};
    visit_floating(l.param, "unscale_", [&](auto tag) {
        using T = typename decltype(tag)::type;
        launch_all("unscale_", ls, stream, scale_kernel<T, kVec<T>>, s);
    });
}

namespace {

// kernels::update_scale_: one thread applies math::update_scale.
__global__ void update_scale_kernel(float* scale, float* found_inf, int64_t* counters,
                                    double growth, double backoff, int64_t interval) {
    math::update_scale(*scale, *found_inf, counters[0], counters[1], growth, backoff, interval);
}

}  // namespace

void update_scale(float* scale, float* found_inf, int64_t* counters, double growth,
                  double backoff, int64_t interval, StreamRef stream) {
    update_scale_kernel<<<1, 1, 0, stream.handle>>>(scale, found_inf, counters, growth, backoff,
                                                    interval);
    EMBER_CUDA_CHECK(cudaGetLastError());
    count_launch("update_scale_");
}

}  // namespace ember::kernels::cuda

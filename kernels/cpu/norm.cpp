// CPU batch norm (training, eval, backward; training forward and backward
// optionally fused with a ReLU) and layer norm (forward, backward).
//
// Math:  docs/normalization.md. Statistics in f64, two passes (the mean, then
//        the squared deviations); elementwise passes in the accumulation type
//        (f32 for f32/f16/bf16) with per-channel or per-row constants rounded once.
// Cost:  batch norm forward reads x three times and writes y (4·numel·sizeof(T)
//        bytes), backward reads x and g twice and writes the gradient; layer
//        norm reads each row twice from the cache. A few FLOPs per element:
//        memory-bound. The fused ReLU costs nothing in the forward and one
//        more read (the output y) per backward pass, and saves relu's own
//        passes (2·numel forward, 3·numel backward). A residual added in the
//        fused forward (batch_norm_add_relu_forward) is one more read there,
//        and saves add's and relu's passes (5·numel). Deterministic: every
//        sum has an order fixed by the shape (Note [Deterministic channel
//        sums]). Test: tests/kernels/test_norm.cpp.
#include "kernels/cpu/norm.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/loop.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

using math::cast;

// Element i of a 1-d floating View of any stride, as f64: n values, or n
// copies of `absent` when the View is absent.
std::vector<double> read_vector(const View& v, int64_t n, double absent) {
    std::vector<double> out(size_t(n), absent);
    if (v.data == nullptr) return out;
    visit_floating(v.dtype, "norm (internal error)", [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (int64_t i = 0; i < n; ++i)
            out[size_t(i)] = double(cast<math::Acc<T>>(v.ptr<const T>()[i * v.strides[0]]));
    });
    return out;
}

// Writes values into a 1-d floating View of any stride (nothing when absent).
void write_vector(const View& v, const std::vector<double>& values) {
    if (v.data == nullptr) return;
    visit_floating(v.dtype, "norm (internal error)", [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (size_t i = 0; i < values.size(); ++i)
            v.ptr<T>()[int64_t(i) * v.strides[0]] = cast<T>(values[i]);
    });
}

// Whether `work` elements are worth the threads.
bool go_parallel(int64_t work) {
    return work >= kParallelGrain && omp_get_max_threads() > 1 && !omp_in_parallel();
}

struct Sums {
    double a = 0, b = 0;
};

// Note [Deterministic channel sums]
// A channel's sum over [N, ·, S] is, by definition here, Σ_n (Σ_s term): each
// (n, c) plane summed on its own, then the planes in order of n. With many
// channels, threads take whole channels; with few channels (and planes long
// enough that a buffer of one partial per plane is small), threads take planes
// and the partials are added per channel afterwards. Both compute exactly the
// same additions, so the result depends on the shape only, never on the
// number of threads. The lane order of the plane sums is fixed by the build.
inline constexpr int64_t kPlaneSplit = 16;

template <class F>
Sums plane_sum(int64_t base, int64_t c, int64_t S, const F& term_ref) {
    // A local copy: its captured pointers are then loop invariants, and GCC
    // loads contiguous vectors instead of gathering through the reference.
    const F term = term_ref;
    double a = 0, b = 0;
#pragma omp simd reduction(+ : a, b)
    for (int64_t s = 0; s < S; ++s) {
        const Sums t = term(c, base + s);
        a += t.a;
        b += t.b;
    }
    return {a, b};
}

// out[c] = Σ_n Σ_s term(c, flat index) over a contiguous [N, C, S].
template <class F>
std::vector<Sums> channel_sums(int64_t N, int64_t C, int64_t S, const F& term) {
    std::vector<Sums> out(static_cast<size_t>(C));
    const bool par = go_parallel(N * C * S);
    if (par && S >= kPlaneSplit && C < 4 * omp_get_max_threads()) {
        std::vector<Sums> part(static_cast<size_t>(N * C));
#pragma omp parallel for schedule(static)
        for (int64_t p = 0; p < N * C; ++p) part[size_t(p)] = plane_sum(p * S, p % C, S, term);
        for (int64_t n = 0; n < N; ++n)
            for (int64_t c = 0; c < C; ++c) {
                out[size_t(c)].a += part[size_t(n * C + c)].a;
                out[size_t(c)].b += part[size_t(n * C + c)].b;
            }
        return out;
    }
#pragma omp parallel for schedule(static) if (par)
    for (int64_t c = 0; c < C; ++c)
        for (int64_t n = 0; n < N; ++n) {
            const Sums p = plane_sum((n * C + c) * S, c, S, term);
            out[size_t(c)].a += p.a;
            out[size_t(c)].b += p.b;
        }
    return out;
}

// Note [Channels-last batch norm]
// A channels-last [N, C, H, W] tensor reaches the kernels as an [N, C, S]
// View with strides (S·C, 1, C): a pixel's channels adjacent. Its channel
// sums run over images (threads) and pixels (in order), the channels of a
// pixel in vector lanes: out[c] = Σ_n (Σ_s term), the images' partials added
// in order of n — the same additions for any thread count, though not in
// the order of the NCHW sums' lanes. Elementwise passes walk pixels, the
// channels in vector lanes, with the NCHW passes' arithmetic per element.

// Whether an [N, C, S] View lies channels-last (for C = 1 or S = 1 both
// layouts are one, and the NCHW loops serve).
bool is_last(const View& v) {
    const int64_t N = v.shape[0], C = v.shape[1], S = v.shape[2];
    // A batch of one has any stride along N (a channels-last [1, C, H, W]
    // may come with either): the kernels never step along it.
    return C > 1 && S > 1 && (N == 1 || v.strides[0] == S * C) && v.strides[1] == 1 &&
           v.strides[2] == C;
}

// Whether v is laid out as x is: contiguous, or channels-last as x.
bool same_layout(const View& v, const View& x) {
    return is_last(x) ? is_last(v) : v.is_contiguous();
}

// Image n's channel sums of a channels-last [N, kC, S] into a, b with the
// partial sums in registers (kC known): the same additions, in the same
// order, as the loop in channel_sums_last, without a store and reload of
// every partial per pixel.
template <int kC, class F>
void image_sums(const F& term, int64_t n, int64_t S, double* a, double* b) {
    double sa[kC] = {}, sb[kC] = {};
    for (int64_t s = 0; s < S; ++s) {
        const int64_t base = (n * S + s) * kC;
#pragma omp simd
        for (int c = 0; c < kC; ++c) {
            const Sums t = term(c, base + c);
            sa[c] += t.a;
            sb[c] += t.b;
        }
    }
    for (int c = 0; c < kC; ++c) a[c] = sa[c], b[c] = sb[c];
}

// channel_sums for a channels-last [N, C, S] (Note [Channels-last batch norm]);
// term(c, flat index) as there, the flat index (n·S + s)·C + c.
template <class F>
std::vector<Sums> channel_sums_last(int64_t N, int64_t C, int64_t S, const F& term_ref) {
    const F term = term_ref;  // a local copy, as in plane_sum
    std::vector<double> pa(size_t(N * C), 0.0), pb(size_t(N * C), 0.0);
#pragma omp parallel for schedule(static) if (go_parallel(N * C * S))
    for (int64_t n = 0; n < N; ++n) {
        double* a = pa.data() + n * C;
        double* b = pb.data() + n * C;
        switch (C) {  // the widths resnet-like models use, in registers
            case 16:
                image_sums<16>(term, n, S, a, b);
                continue;
            case 32:
                image_sums<32>(term, n, S, a, b);
                continue;
            default:
                break;
        }
        for (int64_t s = 0; s < S; ++s) {
            const int64_t base = (n * S + s) * C;
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) {
                const Sums t = term(c, base + c);
                a[c] += t.a;
                b[c] += t.b;
            }
        }
    }
    std::vector<Sums> out(static_cast<size_t>(C));
    for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c) {
            out[size_t(c)].a += pa[size_t(n * C + c)];
            out[size_t(c)].b += pb[size_t(n * C + c)];
        }
    return out;
}

// Channel sums of either layout.
template <class F>
std::vector<Sums> sums_of(bool last, int64_t N, int64_t C, int64_t S, const F& term) {
    return last ? channel_sums_last(N, C, S, term) : channel_sums(N, C, S, term);
}

// f(c, p·kC + c) for every channel of pixels [0, P) of a channels-last
// tensor of kC channels: a loop whose trip count the compiler knows, so it
// is whole vectors (with C only known at run time the compiler's 32-lane
// loop never ran for 16 channels, and every element went the scalar way).
template <int kC, class F>
void pixel_channels(int64_t P, const F& f) {
#pragma omp parallel for schedule(static) if (go_parallel(P * kC))
    for (int64_t p = 0; p < P; ++p) {
#pragma omp simd
        for (int c = 0; c < kC; ++c) f(c, p * kC + c);
    }
}

// Calls f(c, i) for every element i of channel c of an [N, C, S], in runs the
// compiler vectorizes: along a plane (NCHW) or a pixel's channels (channels-last;
// 16, 32 and 64 channels in loops of known length).
template <bool kLast, class F>
void for_channel_elements(int64_t N, int64_t C, int64_t S, const F& f_ref) {
    const F f = f_ref;
    if constexpr (kLast) {
        switch (C) {
            case 16: return pixel_channels<16>(N * S, f);
            case 32: return pixel_channels<32>(N * S, f);
            case 64: return pixel_channels<64>(N * S, f);
            default: break;
        }
#pragma omp parallel for schedule(static) if (go_parallel(N * C * S))
        for (int64_t p = 0; p < N * S; ++p) {
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) f(c, p * C + c);
        }
    } else {
#pragma omp parallel for schedule(static) if (go_parallel(N * C * S))
        for (int64_t p = 0; p < N * C; ++p) {
            const int64_t c = p % C;
#pragma omp simd
            for (int64_t i = p * S; i < (p + 1) * S; ++i) f(c, i);
        }
    }
}

// Note [Subtracting the mean in f64]
// Where a group's values nearly coincide, x − mean is far smaller than x, and
// a mean rounded to f32 would leave few correct digits in it. The forwards
// subtract the f64 mean in f64, then scale in the accumulation type. (The
// backwards only have the saved f32 mean; their x̂ carries that rounding, as
// PyTorch's f32 kernels do.)

// max(v, 0) on a value already rounded to T, as relu(batch_norm(x)) sees it
// (Note [Fused batch norm + ReLU] in kernels/norm.h): −0 and NaN pass.
template <class T>
inline T relu_rounded(T v) {
    using A = math::Acc<T>;
    return cast<A>(v) < A(0) ? cast<T>(A(0)) : v;
}

// y = (x − shift[c])·scale[c] + bias[c] over [N, C, S] (Note [Subtracting the
// mean in f64]); plus residual[i] when given (kRelu only), rounded again;
// then max(y, 0) when kRelu.
template <bool kRelu, class T>
void affine_planes(T* y, const T* x, int64_t N, int64_t C, int64_t S,
                   const std::vector<double>& shift, const std::vector<double>& scale,
                   const std::vector<double>& bias, const T* residual = nullptr) {
    using A = math::Acc<T>;
#pragma omp parallel for schedule(static) if (go_parallel(N * C * S))
    for (int64_t p = 0; p < N * C; ++p) {
        const size_t c = size_t(p % C);
        const double m = shift[c];
        const A k = A(scale[c]), b = A(bias[c]);
        const T* xp = x + p * S;
        T* yp = y + p * S;
        if (kRelu && residual) {
            const T* rp = residual + p * S;
#pragma omp simd
            for (int64_t s = 0; s < S; ++s) {
                const T v = cast<T>(A(double(cast<A>(xp[s])) - m) * k + b);
                yp[s] = relu_rounded(cast<T>(cast<A>(v) + cast<A>(rp[s])));
            }
            continue;
        }
#pragma omp simd
        for (int64_t s = 0; s < S; ++s) {
            const A v = A(double(cast<A>(xp[s])) - m) * k + b;  // as in affine_last
            if constexpr (kRelu)
                yp[s] = relu_rounded(cast<T>(v));
            else
                yp[s] = cast<T>(v);
        }
    }
}

// affine_planes on a channels-last [N, C, S] (Note [Channels-last batch
// norm]): the same arithmetic per element, the per-channel constants in
// arrays the pixel loop reads as vectors.
template <bool kRelu, class T>
void affine_last(T* y, const T* x, int64_t N, int64_t C, int64_t S,
                 const std::vector<double>& shift, const std::vector<double>& scale,
                 const std::vector<double>& bias, const T* residual = nullptr) {
    using A = math::Acc<T>;
    std::vector<A> k(static_cast<size_t>(C)), b(static_cast<size_t>(C));
    for (size_t c = 0; c < size_t(C); ++c) k[c] = A(scale[c]), b[c] = A(bias[c]);
    const double* m = shift.data();
    const A* kp = k.data();
    const A* bp = b.data();
    if (kRelu && residual) {
        for_channel_elements<true>(N, C, S, [=](int64_t c, int64_t i) {
            const T v = cast<T>(A(double(cast<A>(x[i])) - m[c]) * kp[c] + bp[c]);
            y[i] = relu_rounded(cast<T>(cast<A>(v) + cast<A>(residual[i])));
        });
        return;
    }
    for_channel_elements<true>(N, C, S, [=](int64_t c, int64_t i) {
        // Stored straight from the cast: a named T copied to y[i] was an
        // aggregate copy GCC 12 would not vectorize (the loop ran scalar).
        const A v = A(double(cast<A>(x[i])) - m[c]) * kp[c] + bp[c];
        if constexpr (kRelu)
            y[i] = relu_rounded(cast<T>(v));
        else
            y[i] = cast<T>(v);
    });
}

template <class T>
void bn_forward_impl(const View& out, const View& save_mean, const View& save_invstd,
                     const View& xv, const View& weight, const View& bias, const View& running_mean,
                     const View& running_var, double momentum, double eps, bool relu,
                     const View& residual) {
    using A = math::Acc<T>;
    const int64_t N = xv.shape[0], C = xv.shape[1], S = xv.shape[2];
    const T* x = xv.ptr<const T>();
    const bool last = is_last(xv);
    const double n = double(N * S);
    std::vector<double> mean(static_cast<size_t>(C)), var(static_cast<size_t>(C)),
        invstd(static_cast<size_t>(C));
    const std::vector<Sums> s1 = sums_of(last, N, C, S, [x](int64_t, int64_t i) {
        return Sums{double(cast<A>(x[i])), 0};
    });
    for (int64_t c = 0; c < C; ++c) mean[size_t(c)] = s1[size_t(c)].a / n;
    const double* mp = mean.data();
    const std::vector<Sums> s2 = sums_of(last, N, C, S, [x, mp](int64_t c, int64_t i) {
        const double d = double(cast<A>(x[i])) - mp[c];
        return Sums{d * d, 0};
    });
    for (size_t c = 0; c < size_t(C); ++c) {
        var[c] = s2[c].a / n;
        invstd[c] = 1 / std::sqrt(var[c] + eps);
        save_mean.ptr<A>()[c] = A(mean[c]);
        save_invstd.ptr<A>()[c] = A(invstd[c]);
    }
    if (running_mean.data != nullptr) {
        std::vector<double> rm = read_vector(running_mean, C, 0),
                            rv = read_vector(running_var, C, 0);
        for (size_t c = 0; c < size_t(C); ++c) {
            rm[c] = (1 - momentum) * rm[c] + momentum * mean[c];
            rv[c] = (1 - momentum) * rv[c] + momentum * var[c] * n / (n - 1);
        }
        write_vector(running_mean, rm);
        write_vector(running_var, rv);
    }
    std::vector<double> scale = read_vector(weight, C, 1);
    for (size_t c = 0; c < size_t(C); ++c) scale[c] *= invstd[c];
    const std::vector<double> b = read_vector(bias, C, 0);
    const T* res = residual.data ? residual.ptr<const T>() : nullptr;
    if (last && relu)
        affine_last<true>(out.ptr<T>(), x, N, C, S, mean, scale, b, res);
    else if (last)
        affine_last<false>(out.ptr<T>(), x, N, C, S, mean, scale, b);
    else if (relu)
        affine_planes<true>(out.ptr<T>(), x, N, C, S, mean, scale, b, res);
    else
        affine_planes<false>(out.ptr<T>(), x, N, C, S, mean, scale, b);
}

// Element i of the gradient reaching batch norm: g, or with kRelu (the fused
// op) g where the output y > 0 and +0 elsewhere, exactly the value
// relu_backward would have stored (Note [Fused batch norm + ReLU]). The mask
// is a bitwise AND rather than a select: with a select, GCC 12 compiled the
// sums' loop differently and Σ g·(x − mean) came out one bit off the unfused
// op's; the AND keeps its arithmetic and vectorizes as a zero-masked load.
template <bool kRelu, class T>
inline math::Acc<T> grad_at(const T* g, const T* y, int64_t i) {
    using A = math::Acc<T>;
    const A gi = cast<A>(g[i]);
    if constexpr (kRelu) {
        using Bits = std::conditional_t<sizeof(A) == 8, uint64_t, uint32_t>;
        const Bits keep = Bits(0) - Bits(cast<A>(y[i]) > A(0));  // all ones or 0
        return std::bit_cast<A>(Bits(std::bit_cast<Bits>(gi) & keep));
    } else {
        return gi;
    }
}

template <bool kRelu, class T>
void bn_backward_impl(const View& grad_input, const View& grad_weight, const View& grad_bias,
                      const View& gv, const View& xv, const View& weight, const View& save_mean,
                      const View& save_invstd, const View& yv) {
    using A = math::Acc<T>;
    const int64_t N = xv.shape[0], C = xv.shape[1], S = xv.shape[2];
    const T* x = xv.ptr<const T>();
    const T* g = gv.ptr<const T>();
    const T* y = kRelu ? yv.ptr<const T>() : nullptr;
    const std::vector<double> mean = read_vector(save_mean, C, 0),
                              invstd = read_vector(save_invstd, C, 0);
    const double* mp = mean.data();
    const bool last = is_last(xv);
    // a: Σ g, b: Σ g·(x − mean); Σ g·x̂ = invstd·b.
    const std::vector<Sums> s = sums_of(last, N, C, S, [x, g, y, mp](int64_t c, int64_t i) {
        const double gi = double(grad_at<kRelu>(g, y, i));
        return Sums{gi, gi * (double(cast<A>(x[i])) - mp[c])};
    });
    std::vector<double> gw(static_cast<size_t>(C)), gb(static_cast<size_t>(C));
    for (size_t c = 0; c < size_t(C); ++c) gw[c] = invstd[c] * s[c].b, gb[c] = s[c].a;
    write_vector(grad_weight, gw);
    write_vector(grad_bias, gb);
    if (grad_input.data == nullptr) return;
    // grad = k·g + k0 + k1·(x − mean) with per-channel constants, k = w·invstd.
    const double n = double(N * S);
    const std::vector<double> w = read_vector(weight, C, 1);
    std::vector<A> k(static_cast<size_t>(C)), k0(static_cast<size_t>(C)),
        k1(static_cast<size_t>(C)), m(static_cast<size_t>(C));
    for (size_t c = 0; c < size_t(C); ++c) {
        const double kc = w[c] * invstd[c];
        k[c] = A(kc);
        k0[c] = A(-kc * s[c].a / n);
        k1[c] = A(-kc * invstd[c] * invstd[c] * s[c].b / n);
        m[c] = A(mean[c]);
    }
    T* gx = grad_input.ptr<T>();
    if (last) {
        const A *kp = k.data(), *k0p = k0.data(), *k1p = k1.data(), *mp2 = m.data();
        for_channel_elements<true>(N, C, S, [=](int64_t c, int64_t i) {
            gx[i] = cast<T>(kp[c] * grad_at<kRelu>(g, y, i) + k0p[c] +
                            k1p[c] * (cast<A>(x[i]) - mp2[c]));
        });
        return;
    }
#pragma omp parallel for schedule(static) if (go_parallel(N * C * S))
    for (int64_t p = 0; p < N * C; ++p) {
        const size_t c = size_t(p % C);
#pragma omp simd
        for (int64_t i = p * S; i < (p + 1) * S; ++i)
            gx[i] =
                cast<T>(k[c] * grad_at<kRelu>(g, y, i) + k0[c] + k1[c] * (cast<A>(x[i]) - m[c]));
    }
}

template <class T>
void ln_forward_impl(const View& out, const View& mean, const View& rstd, const View& xv,
                     const View& weight, const View& bias, double eps) {
    using A = math::Acc<T>;
    const int64_t R = xv.shape[0], M = xv.shape[1];
    const std::vector<double> wd = read_vector(weight, M, 1), bd = read_vector(bias, M, 0);
    const std::vector<A> w(wd.begin(), wd.end()), b(bd.begin(), bd.end());
    const T* x = xv.ptr<const T>();
    T* y = out.ptr<T>();
#pragma omp parallel for schedule(static) if (go_parallel(R * M))
    for (int64_t r = 0; r < R; ++r) {
        const T* xr = x + r * M;
        T* yr = y + r * M;
        double s = 0, q = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = 0; i < M; ++i) s += double(cast<A>(xr[i]));
        const double mu = s / double(M);  // NaN for an empty row
#pragma omp simd reduction(+ : q)
        for (int64_t i = 0; i < M; ++i) {
            const double d = double(cast<A>(xr[i])) - mu;
            q += d * d;
        }
        const double rs = 1 / std::sqrt(q / double(M) + eps);
        mean.ptr<A>()[r] = A(mu);
        rstd.ptr<A>()[r] = A(rs);
        const A k = A(rs);
#pragma omp simd
        for (int64_t i = 0; i < M; ++i) {  // Note [Subtracting the mean in f64]
            const A d = A(double(cast<A>(xr[i])) - mu);
            yr[size_t(i)] = cast<T>(d * k * w[size_t(i)] + b[size_t(i)]);
        }
    }
}

// Rows per partial of the weight and bias gradients (a constant, so the
// column sums group the same way for any number of threads).
inline constexpr int64_t kRowBlock = 256;
inline constexpr int64_t kColumns = 256;  // columns per task

template <class T>
void ln_backward_impl(const View& grad_input, const View& grad_weight, const View& grad_bias,
                      const View& gv, const View& xv, const View& weight, const View& meanv,
                      const View& rstdv) {
    using A = math::Acc<T>;
    const int64_t R = xv.shape[0], M = xv.shape[1];
    const T* x = xv.ptr<const T>();
    const T* g = gv.ptr<const T>();
    const A* mu = meanv.ptr<const A>();
    const A* rs = rstdv.ptr<const A>();
    if (grad_input.data != nullptr) {
        const std::vector<double> wd = read_vector(weight, M, 1);
        const std::vector<A> w(wd.begin(), wd.end());
        T* gx = grad_input.ptr<T>();
#pragma omp parallel for schedule(static) if (go_parallel(R * M))
        for (int64_t r = 0; r < R; ++r) {
            const T *xr = x + r * M, *gr = g + r * M;
            const A m = mu[r], k = rs[r];
            double sh = 0, shx = 0;  // Σ h and Σ h·x̂, h = g·w
#pragma omp simd reduction(+ : sh, shx)
            for (int64_t i = 0; i < M; ++i) {
                const double h = double(cast<A>(gr[i])) * double(w[size_t(i)]);
                sh += h;
                shx += h * (double(cast<A>(xr[i])) - double(m)) * double(k);
            }
            const A c1 = A(sh / double(M)), c2 = A(shx / double(M));
#pragma omp simd
            for (int64_t i = 0; i < M; ++i) {
                const A h = cast<A>(gr[i]) * w[size_t(i)], xhat = (cast<A>(xr[i]) - m) * k;
                gx[r * M + i] = cast<T>(k * (h - c1 - xhat * c2));
            }
        }
    }
    if (grad_weight.data == nullptr && grad_bias.data == nullptr) return;
    // Column sums: a partial per block of kRowBlock rows, then the blocks in order.
    const int64_t blocks = (R + kRowBlock - 1) / kRowBlock, strips = (M + kColumns - 1) / kColumns;
    std::vector<Sums> part(static_cast<size_t>(blocks * M));
#pragma omp parallel for schedule(static) if (go_parallel(R * M))
    for (int64_t t = 0; t < blocks * strips; ++t) {
        const int64_t blk = t / strips, j0 = (t % strips) * kColumns;
        const int64_t j1 = std::min(M, j0 + kColumns);
        Sums* acc = part.data() + blk * M;
        for (int64_t r = blk * kRowBlock; r < std::min(R, (blk + 1) * kRowBlock); ++r) {
            const double m = double(mu[r]), k = double(rs[r]);
#pragma omp simd
            for (int64_t j = j0; j < j1; ++j) {
                const double gi = double(cast<A>(g[r * M + j]));
                acc[j].a += gi;
                acc[j].b += gi * (double(cast<A>(x[r * M + j])) - m) * k;
            }
        }
    }
    std::vector<double> gw(static_cast<size_t>(M)), gb(static_cast<size_t>(M));
    for (int64_t blk = 0; blk < blocks; ++blk)
        for (int64_t j = 0; j < M; ++j) {
            gb[size_t(j)] += part[size_t(blk * M + j)].a;
            gw[size_t(j)] += part[size_t(blk * M + j)].b;
        }
    write_vector(grad_weight, gw);
    write_vector(grad_bias, gb);
}

}  // namespace

void batch_norm_forward(const BatchNormArgs& a) {
    const View& x = a.x;
    EMBER_INTERNAL_ASSERT(x.ndim == 3 && same_layout(x, x) && same_layout(a.out, x) &&
                          a.out.dtype == x.dtype && x.shape[0] * x.shape[2] >= 2);
    EMBER_INTERNAL_ASSERT(!a.residual.data ||
                          (a.relu && same_layout(a.residual, x) && a.residual.dtype == x.dtype));
    visit_floating(x.dtype, "batch_norm_forward", [&](auto tag) {
        bn_forward_impl<typename decltype(tag)::type>(
            a.out, a.save_mean, a.save_invstd, x, a.weight, a.bias, a.running_mean, a.running_var,
            a.momentum, a.eps, a.relu, a.residual);
    });
}

void batch_norm_inference(const BatchNormArgs& a) {
    const View &x = a.x, &out = a.out;
    EMBER_INTERNAL_ASSERT(x.ndim == 3 && same_layout(x, x) && same_layout(out, x) && !a.relu);
    const int64_t C = x.shape[1];
    const std::vector<double> mean = read_vector(a.running_mean, C, 0);
    std::vector<double> scale = read_vector(a.weight, C, 1);
    const std::vector<double> var = read_vector(a.running_var, C, 1);
    for (size_t c = 0; c < size_t(C); ++c) scale[c] /= std::sqrt(var[c] + a.eps);
    const std::vector<double> b = read_vector(a.bias, C, 0);
    visit_floating(x.dtype, "batch_norm_inference", [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (is_last(x))
            affine_last<false>(out.ptr<T>(), x.ptr<const T>(), x.shape[0], C, x.shape[2], mean,
                               scale, b);
        else
            affine_planes<false>(out.ptr<T>(), x.ptr<const T>(), x.shape[0], C, x.shape[2], mean,
                                 scale, b);
    });
}

void batch_norm_backward(const BatchNormBackwardArgs& a) {
    const View& x = a.x;
    const bool relu = a.relu_out.data != nullptr;
    EMBER_INTERNAL_ASSERT(x.ndim == 3 && same_layout(x, x) && same_layout(a.grad_y, x) &&
                          a.grad_y.dtype == x.dtype &&
                          (!a.grad_input.data || same_layout(a.grad_input, x)) &&
                          (!relu || (same_layout(a.relu_out, x) && a.relu_out.dtype == x.dtype)));
    visit_floating(x.dtype, "batch_norm_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (relu)
            bn_backward_impl<true, T>(a.grad_input, a.grad_weight, a.grad_bias, a.grad_y, x,
                                      a.weight, a.save_mean, a.save_invstd, a.relu_out);
        else
            bn_backward_impl<false, T>(a.grad_input, a.grad_weight, a.grad_bias, a.grad_y, x,
                                       a.weight, a.save_mean, a.save_invstd, a.relu_out);
    });
}

void layer_norm_forward(const LayerNormArgs& a) {
    const View& x = a.x;
    EMBER_INTERNAL_ASSERT(x.ndim == 2 && x.is_contiguous() && a.out.is_contiguous() &&
                          a.mean.is_contiguous() && a.rstd.is_contiguous());
    visit_floating(x.dtype, "layer_norm_forward", [&](auto tag) {
        ln_forward_impl<typename decltype(tag)::type>(a.out, a.mean, a.rstd, x, a.weight, a.bias,
                                                      a.eps);
    });
}

void layer_norm_backward(const LayerNormBackwardArgs& a) {
    const View& x = a.x;
    EMBER_INTERNAL_ASSERT(x.ndim == 2 && x.is_contiguous() && a.grad_y.is_contiguous() &&
                          a.grad_y.dtype == x.dtype && a.mean.is_contiguous() &&
                          a.rstd.is_contiguous());
    visit_floating(x.dtype, "layer_norm_backward", [&](auto tag) {
        ln_backward_impl<typename decltype(tag)::type>(a.grad_input, a.grad_weight, a.grad_bias,
                                                       a.grad_y, x, a.weight, a.mean, a.rstd);
    });
}

}  // namespace ember::kernels::cpu

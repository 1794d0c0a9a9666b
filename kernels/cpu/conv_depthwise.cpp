// CPU depthwise conv2d (groups = C): forward, grad_input and grad_weight
// on one channel's stride-phase planes at a time (kernels/cpu/conv_depthwise.h).
//
// Math (m = O/C kernels per channel; output channel o reads input channel
//   c = o / m; tap (i, j) of output (oy, ox) reads input
//   (oy·sh − ph + i·dh, ox·sw − pw + j·dw), zero outside):
//   forward      out[n][o][oy][ox] = bias[o] + Σ_(i, j) w[o][i][j] · in[n][c][tap]
//   grad_input   dx[n][c][tap]    += w[o][i][j] · dy[n][o][oy][ox]   over o of c, taps
//   grad_weight  dw[o][i][j]       = Σ_n Σ_(oy, ox) dy[n][o][oy][ox] · in[n][c][tap]
// Layout: one channel at a time in stride-phase planes
//   (kernels/cpu/conv_planes.h), so each tap is one long unit-stride
//   multiply-add over all OH·Wv virtual output positions (the columns past
//   OW are computed and dropped): forward and grad_input are axpys of one
//   weight, grad_weight a dot product per tap, which the compiler vectorizes.
//   grad_input gathers each plane from grad_out in the virtual layout
//   behind zeros (as the direct kernel does); grad_weight sums in a vector
//   register per tap, flushed into f64 sums every kFlush positions.
// Cost: 2·N·O·OH·OW·kH·kW FLOPs per pass (plus the dropped columns)
//   against N·(C + O)·H·W-sized reads: memory-bound; one channel's planes
//   and outputs stay in L1/L2.
// Threads: forward and grad_input split (image, input channel), grad_weight
//   output channels (each summing images in order): every element is
//   computed by one item in a fixed order, so results are bit-identical for
//   any thread count. (The im2col path ran depthwise as one GEMV per tile,
//   at 6–10 % of the GEMM rate.)
// Test: tests/kernels/test_conv_depthwise.cpp; benchmark: `ember bench conv`
// ("conv2d 3x3 depthwise" rows).
#include "kernels/cpu/conv_depthwise.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv_planes.h"
#include "kernels/cpu/conv_threads.h"

namespace ember::kernels::cpu::depthwise {

namespace {

using conv_detail::for_items;
using conv_detail::team_size;
using planes::Planes;

constexpr int64_t kLanes = 16;    // plane lengths: whole 64-byte vectors of f32
constexpr int64_t kFlush = 1024;  // positions per flush of the lanes into f64
constexpr int kTapGroup = 3;      // taps per pass over the data

// Elements per plane of one channel: Hv·Wv, and every tap's run of q positions.
int64_t plane_len(const Planes& g) {
    return (std::max(g.hv * g.wv, g.q + g.max_off) + kLanes - 1) / kLanes * kLanes;
}

int64_t macs(const Conv2dShape& s) { return s.n * s.o * s.oh * s.ow * s.kh * s.kw; }

// One 64-byte vector register of T (AVX-512; two halves on narrower machines).
template <class T>
struct Vec;
template <>
struct Vec<float> {
    typedef float type __attribute__((vector_size(64)));
};
template <>
struct Vec<double> {
    typedef double type __attribute__((vector_size(64)));
};

// sum[k] += Σ_q a[q]·b[k][q] over q < len for K taps at once (one read of
// a): a vector register of lanes per tap, added into f64 every kFlush positions.
template <int K, class T>
void dot_taps(const T* a, const T* const* b, int64_t len, double* sum) {
    using V = typename Vec<T>::type;
    constexpr int64_t lanes = 64 / sizeof(T);
    int64_t q = 0;
    while (q + lanes <= len) {
        V acc[K] = {};
        const int64_t end = std::min(len, q + kFlush) / lanes * lanes;
        for (; q < end; q += lanes) {
            V av;
            std::memcpy(&av, a + q, sizeof av);
#pragma GCC unroll 4
            for (int k = 0; k < K; ++k) {
                V bv;
                std::memcpy(&bv, b[k] + q, sizeof bv);
                acc[k] += av * bv;
            }
        }
        for (int k = 0; k < K; ++k)
            for (int64_t l = 0; l < lanes; ++l) sum[k] += double(acc[k][l]);
    }
    for (; q < len; ++q)
        for (int k = 0; k < K; ++k) sum[k] += double(a[q]) * double(b[k][q]);
}

// y[q] += Σ_k a[k]·x[k][q] over q < len for K taps at once: one pass over y.
template <int K, class T>
void axpy_taps(const T* a, const T* const* x, T* __restrict y, int64_t len) {
    for (int64_t q = 0; q < len; ++q) {
        T sum = y[q];
#pragma GCC unroll 4
        for (int k = 0; k < K; ++k) sum += a[k] * x[k][q];
        y[q] = sum;
    }
}

// y[q] += Σ_k a[k]·x[k][q] for `count` taps, kTapGroup at a time.
template <class T>
void axpy(const T* a, const T* const* x, int64_t count, T* y, int64_t len) {
    int64_t k = 0;
    for (; k + kTapGroup <= count; k += kTapGroup) axpy_taps<kTapGroup>(a + k, x + k, y, len);
    for (; k < count; ++k) axpy_taps<1>(a + k, x + k, y, len);
}

}  // namespace

bool fits(const Conv2dShape& s) { return s.groups > 1 && s.groups == s.c; }

template <class T>
void forward(const Conv2dShape& s, const T* in, const T* weight, const T* bias, T* out) {
    const Planes g = planes::make_planes(s);
    const int64_t m = s.o / s.c, hw = s.h * s.w, ohw = s.oh * s.ow, len = plane_len(g);
    const int team = team_size(s.n * s.c, macs(s));
    const int64_t per_thread = g.planes * len + g.q;
    std::vector<T> scratch(size_t(per_thread * team));
    for_items(s.n * s.c, team, [&](int64_t item, int thread) {
        T* pl = scratch.data() + per_thread * thread;
        T* yv = pl + g.planes * len;  // [OH·Wv]
        planes::to_planes(s, g, 1, in + item * hw, pl, len, 0, len);
        std::vector<const T*> src(size_t(g.taps));  // where each tap reads
        for (int64_t t = 0; t < g.taps; ++t)
            src[size_t(t)] = pl + g.plane[size_t(t)] * len + g.off[size_t(t)];
        const int64_t n = item / s.c, c = item % s.c;
        for (int64_t o = c * m; o < (c + 1) * m; ++o) {
            std::fill(yv, yv + g.q, bias ? bias[o] : T(0));
            axpy(weight + o * g.taps, src.data(), g.taps, yv, g.q);
            T* y = out + (n * s.o + o) * ohw;
            for (int64_t oy = 0; oy < s.oh; ++oy)
                std::copy(yv + oy * g.wv, yv + oy * g.wv + s.ow, y + oy * s.ow);
        }
    });
}

template <class T>
void grad_input(const Conv2dShape& s, const T* grad_out, const T* weight, T* grad_input) {
    const Planes g = planes::make_planes(s);
    const int64_t m = s.o / s.c, hw = s.h * s.w, ohw = s.oh * s.ow, pv = g.hv * g.wv;
    // grad_out of one output channel in the virtual layout behind `front`
    // zeros, long enough for every plane position's reads.
    const int64_t front = g.max_off, ds = front + std::max(pv, g.q);
    const int team = team_size(s.n * s.c, macs(s));
    const int64_t per_thread = g.planes * pv + ds;
    std::vector<T> scratch(size_t(per_thread * team));
    for_items(s.n * s.c, team, [&](int64_t item, int thread) {
        T* pl = scratch.data() + per_thread * thread;
        T* dv = pl + g.planes * pv;
        std::fill(pl, pl + g.planes * pv, T(0));
        std::vector<T> a(size_t(g.taps));
        std::vector<const T*> src(size_t(g.taps));
        const int64_t n = item / s.c, c = item % s.c;
        for (int64_t o = c * m; o < (c + 1) * m; ++o) {
            planes::to_virtual(s, g.wv, 1, grad_out + (n * s.o + o) * ohw, front, ds, ds, dv);
            // Plane position u of tap t's plane gets w[t] · grad_out at u − off[t]:
            // each plane's taps in one pass.
            for (int64_t p = 0; p < g.planes; ++p) {
                int64_t count = 0;
                for (int64_t t = 0; t < g.taps; ++t)
                    if (g.plane[size_t(t)] == p) {
                        a[size_t(count)] = weight[o * g.taps + t];
                        src[size_t(count++)] = dv + front - g.off[size_t(t)];
                    }
                axpy(a.data(), src.data(), count, pl + p * pv, pv);
            }
        }
        planes::from_planes(s, g, 1, pl, pv, 0, g.used, grad_input + item * hw);
    });
}

template <class T>
void grad_weight(const Conv2dShape& s, const T* grad_out, const T* in, T* grad_weight) {
    const Planes g = planes::make_planes(s);
    const int64_t m = s.o / s.c, hw = s.h * s.w, ohw = s.oh * s.ow, len = plane_len(g);
    const int team = team_size(s.o, macs(s));
    const int64_t per_thread = g.planes * len + g.q;
    std::vector<T> scratch(size_t(per_thread * team));
    for_items(s.o, team, [&](int64_t o, int thread) {
        T* pl = scratch.data() + per_thread * thread;
        T* dv = pl + g.planes * len;  // grad_out in the virtual layout, zero past OW
        std::vector<double> sum(size_t(g.taps), 0.0);
        std::vector<const T*> src(size_t(g.taps));  // where each tap reads
        for (int64_t t = 0; t < g.taps; ++t)
            src[size_t(t)] = pl + g.plane[size_t(t)] * len + g.off[size_t(t)];
        for (int64_t n = 0; n < s.n; ++n) {
            planes::to_planes(s, g, 1, in + (n * s.c + o / m) * hw, pl, len, 0, len);
            planes::to_virtual(s, g.wv, 1, grad_out + (n * s.o + o) * ohw, 0, g.q, g.q, dv);
            int64_t t = 0;
            for (; t + kTapGroup <= g.taps; t += kTapGroup)
                dot_taps<kTapGroup>(dv, src.data() + t, g.q, sum.data() + t);
            for (; t < g.taps; ++t) dot_taps<1>(dv, src.data() + t, g.q, sum.data() + t);
        }
        for (int64_t t = 0; t < g.taps; ++t) grad_weight[o * g.taps + t] = T(sum[size_t(t)]);
    });
}

template void forward(const Conv2dShape&, const float*, const float*, const float*, float*);
template void forward(const Conv2dShape&, const double*, const double*, const double*, double*);
template void grad_input(const Conv2dShape&, const float*, const float*, float*);
template void grad_input(const Conv2dShape&, const double*, const double*, double*);
template void grad_weight(const Conv2dShape&, const float*, const float*, float*);
template void grad_weight(const Conv2dShape&, const double*, const double*, double*);

}  // namespace ember::kernels::cpu::depthwise

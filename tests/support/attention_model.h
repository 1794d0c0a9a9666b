// A CPU model of the CUDA tensor-core attention's arithmetic
// (kernels/cuda/attention_tc.cu, attention_tc_backward.cu): the same tiles
// in the same order, the same f32 online-softmax updates, P and dS rounded
// to the operand type where the kernels round them, the quad of lanes that
// holds a row's partial sums. What it cannot know is the order inside one
// mma (16 products into f32) and the device's exp (__expf, ~2 ulp): the
// model sums those sequentially with the host's exp. So the CPU tests can
// state how far the fused CUDA result lies from the CPU kernel's (P's
// rounding: up to 2^-8 of max|v| in bf16), and the CUDA tests can hold the
// GPU to the model much more tightly than to the CPU kernel.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/half.h"
#include "ember/ember.h"
#include "kernels/attention.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/math.h"
#include "kernels/random_math.h"

namespace ember::test {

/// Operands as float values already in the operand type (contiguous
/// [bh, T, D]); the results in f32 before the kernels' final rounding.
struct AttnModelIn {
    kernels::cuda::AttentionShape s;
    bool bf16 = true;
    float scale = 1;
    double dropout = 0;
    uint64_t seed = 0, first_block = 0;
    std::vector<float> q, k, v, g;  ///< g: grad_out, for the backward
};

struct AttnModelOut {
    std::vector<float> out, lse;  ///< out unrounded: the kernel rounds o / l once
    std::vector<float> dq, dk, dv;
};

/// A tensor's values as floats, row-major (from any device and layout).
inline std::vector<float> model_floats(const Tensor& t) {
    return t.to(Device::cpu()).contiguous().to(DType::f32).to_vector<float>();
}

/// The model's input for q, k, v [B, H, T, D] (f16 or bf16) and grad_out g
/// (undefined: none) under `a`.
inline AttnModelIn model_input(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& g,
                               const kernels::AttentionArgs& a) {
    AttnModelIn in;
    in.s.bh = q.size(0) * q.size(1);
    in.s.heads = q.size(1);
    in.s.tq = q.size(2);
    in.s.tk = k.size(2);
    in.s.d = q.size(3);
    in.s.dv = v.size(3);
    in.s.causal = a.causal;
    in.bf16 = q.dtype() == DType::bf16;
    in.scale = float(a.scale);
    in.dropout = a.dropout_p;
    in.seed = a.seed;
    in.first_block = a.first_block;
    in.q = model_floats(q);
    in.k = model_floats(k);
    in.v = model_floats(v);
    if (g.defined()) in.g = model_floats(g);
    return in;
}

inline float round_operand(float x, bool bf16) {
    return bf16 ? float(BFloat16(x)) : float(Half(x));
}

inline float model_keep(const AttnModelIn& in, int64_t bh, int64_t row, int64_t key) {
    if (in.dropout <= 0) return 1;
    const int64_t i = (bh * in.s.tq + row) * in.s.tk + key;
    return math::dropout_keep(math::uniform_at<float>(in.seed, in.first_block, i), in.dropout)
               ? 1.0f / (1.0f - float(in.dropout))
               : 0.0f;
}

inline float model_dot(const float* a, const float* b, int64_t n) {
    float s = 0;
    for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
}

/// The forward: out (f32, before rounding) and lse, as attention_tc.cu sums them.
inline AttnModelOut attention_tc_model_forward(const AttnModelIn& in) {
    namespace cu = kernels::cuda;
    const cu::AttentionShape& s = in.s;
    AttnModelOut r;
    r.out.assign(size_t(s.bh * s.tq * s.dv), 0);
    r.lse.assign(size_t(s.bh * s.tq), 0);
    for (int64_t bh = 0; bh < s.bh; ++bh)
        for (int64_t row = 0; row < s.tq; ++row) {
            const float* q = in.q.data() + (bh * s.tq + row) * s.d;
            const int64_t rt = row / cu::kTileRows;
            float m = -INFINITY, lane_l[4] = {0, 0, 0, 0};
            std::vector<float> o(size_t(s.dv), 0.0f);
            for (int64_t kt = 0; kt < cu::key_tiles_of(s, rt, cu::kTileRows); ++kt) {
                const int64_t k0 = kt * cu::kTileKeys;
                float x[cu::kTileKeys], mx = -INFINITY;
                for (int c = 0; c < cu::kTileKeys; ++c) {
                    const int64_t key = k0 + c;
                    const bool seen = key < s.tk && !(s.causal && key > row);
                    x[c] = seen ? model_dot(q, in.k.data() + (bh * s.tk + key) * s.d, s.d) * in.scale
                                : -INFINITY;
                    mx = std::max(mx, x[c]);
                }
                const float mnew = std::max(m, mx), base = mnew == -INFINITY ? 0.0f : mnew;
                const float alpha = math::exp_nonpositive(m - base);
                m = mnew;
                for (float& l : lane_l) l *= alpha;
                float p[cu::kTileKeys];
                for (int j = 0; j < cu::kTileKeys / 8; ++j)  // a lane's columns, in its order
                    for (int t = 0; t < 4; ++t)
                        for (int e = 0; e < 2; ++e) {
                            const int c = 8 * j + 2 * t + e;
                            p[c] = math::exp_nonpositive(x[c] - base);
                            lane_l[t] += p[c];
                        }
                for (float& od : o) od *= alpha;
                for (int64_t d = 0; d < s.dv; ++d) {
                    float acc = 0;
                    for (int c = 0; c < cu::kTileKeys && k0 + c < s.tk; ++c) {
                        const float kept = round_operand(p[c] * model_keep(in, bh, row, k0 + c), in.bf16);
                        acc += kept * in.v[size_t((bh * s.tk + k0 + c) * s.dv + d)];
                    }
                    o[size_t(d)] += acc;
                }
            }
            const float l = (lane_l[0] + lane_l[1]) + (lane_l[2] + lane_l[3]);
            const float inv = 1.0f / l;
            for (int64_t d = 0; d < s.dv; ++d)
                r.out[size_t((bh * s.tq + row) * s.dv + d)] = o[size_t(d)] * inv;
            r.lse[size_t(bh * s.tq + row)] = m + std::log(l);
        }
    return r;
}

/// The backward given the forward's rounded out and its lse: dq, dk, dv
/// (f32, before rounding) as attention_tc_backward.cu sums them: dQ over key
/// tiles in order, dK and dV over the query rows in order.
inline void attention_tc_model_backward(const AttnModelIn& in, const std::vector<float>& out,
                                        const std::vector<float>& lse, AttnModelOut& r) {
    const kernels::cuda::AttentionShape& s = in.s;
    r.dq.assign(size_t(s.bh * s.tq * s.d), 0);
    r.dk.assign(size_t(s.bh * s.tk * s.d), 0);
    r.dv.assign(size_t(s.bh * s.tk * s.dv), 0);
    for (int64_t bh = 0; bh < s.bh; ++bh) {
        std::vector<float> rowd(size_t(s.tq));
        for (int64_t row = 0; row < s.tq; ++row)
            rowd[size_t(row)] = model_dot(in.g.data() + (bh * s.tq + row) * s.dv,
                                          out.data() + (bh * s.tq + row) * s.dv, s.dv);
        for (int64_t row = 0; row < s.tq; ++row)
            for (int64_t key = 0; key < kernels::cuda::visible_keys(s, row); ++key) {
                const float* q = in.q.data() + (bh * s.tq + row) * s.d;
                const float* k = in.k.data() + (bh * s.tk + key) * s.d;
                const float* g = in.g.data() + (bh * s.tq + row) * s.dv;
                const float* v = in.v.data() + (bh * s.tk + key) * s.dv;
                const float p = math::exp_nonpositive(model_dot(q, k, s.d) * in.scale -
                                                      lse[size_t(bh * s.tq + row)]);
                const float keep = model_keep(in, bh, row, key);
                const float ds = round_operand(p * (model_dot(g, v, s.dv) * keep - rowd[size_t(row)]),
                                               in.bf16);
                const float pk = round_operand(p * keep, in.bf16);
                for (int64_t d = 0; d < s.d; ++d) {
                    r.dq[size_t((bh * s.tq + row) * s.d + d)] += ds * k[d];
                    r.dk[size_t((bh * s.tk + key) * s.d + d)] += ds * q[d];
                }
                for (int64_t d = 0; d < s.dv; ++d) r.dv[size_t((bh * s.tk + key) * s.dv + d)] += pk * g[d];
            }
    }
    for (float& x : r.dq) x *= in.scale;
    for (float& x : r.dk) x *= in.scale;
}

}  // namespace ember::test

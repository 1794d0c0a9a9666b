// What the fused CUDA attention kernels share: the operands as rows of
// heads, the call's scalars, the dropout rule, the loads of tiles into
// shared memory and the launchers' declarations (kernels/cuda/attention.cu
// calls the tensor-core and warp-row kernels of the other files).
#pragma once

#include <cstdint>

#include "../../core/cuda_context.h"
#include "../math.h"
#include "../random_math.h"
#include "../view.h"
#include "attention_plan.h"

namespace ember::kernels::cuda {

/// A [B, H, T, D] operand seen as rows: row t of head bh (= b·H + h) starts
/// at element (bh / H)·sb + (bh % H)·sh + t·st; the last dim is unit-stride.
struct Heads {
    char* data = nullptr;
    int64_t sb = 0, sh = 0, st = 0, heads = 1;

    template <class T>
    EMBER_HD T* row(int64_t bh, int64_t t) const {
        return reinterpret_cast<T*>(data) + (bh / heads) * sb + (bh % heads) * sh + t * st;
    }
};

inline Heads heads_of(const View& v) {
    return {v.data, v.strides[0], v.strides[1], v.strides[2], v.shape[1]};
}

/// The scalars of a call (AttentionArgs on the device).
struct AttnScalars {
    float scale = 1;
    double scale64 = 1;
    double dropout_p = 0;
    float keep_scale = 1;  ///< 1 / (1 − p)
    double keep_scale64 = 1;
    uint64_t seed = 0, first_block = 0;
};

/// Whether entry (bh, row, key) of the probabilities is kept by dropout
/// (AttentionArgs: the f32 uniform stream over [B, H, Tq, Tk]).
__device__ __forceinline__ bool attn_keep(const AttnScalars& a, const AttentionShape& s,
                                          int64_t bh, int64_t row, int64_t key) {
    const int64_t i = (bh * s.tq + row) * s.tk + key;
    return math::dropout_keep(math::uniform_at<float>(a.seed, a.first_block, i), a.dropout_p);
}

/// Rows [t0, t0 + n) of head bh of `src` (d wide, 2-byte elements) into
/// the shared tile `dst` (row stride ld); rows at or past `limit` are zeros.
/// All threads of the block take part.
__device__ __forceinline__ void load_tile(uint16_t* dst, int ld, const Heads& src, int64_t bh,
                                          int64_t t0, int n, int d, int64_t limit) {
    for (int e = threadIdx.x; e < n * d; e += blockDim.x) {
        const int r = e / d, c = e % d;
        dst[r * ld + c] = t0 + r < limit ? src.row<uint16_t>(bh, t0 + r)[c] : uint16_t(0);
    }
}

// ---- launchers (kernels/cuda/attention_tc.cu, attention_tc_backward.cu,
// attention_rows.cu); the plan says which -----------------------------------------

/// Forward on tensor cores: out, lse (f32) from q, k, v (f16/bf16).
void attention_forward_tc(const AttentionPlan& p, bool bf16, const Heads& out, float* lse,
                          const Heads& q, const Heads& k, const Heads& v, const AttnScalars& a,
                          StreamRef stream);
/// Backward on tensor cores given D = rowsum(dO ∘ O) (f32 [bh, Tq]).
void attention_backward_tc(const AttentionPlan& p, bool bf16, const Heads& dq, const Heads& dk,
                           const Heads& dv, const Heads& g, const Heads& q, const Heads& k,
                           const Heads& v, const float* lse, const float* rowd,
                           const AttnScalars& a, StreamRef stream);

/// A warp per row (any floating dtype; lse in the accumulation type), or
/// the decode split when the plan says so.
void attention_forward_rows(const AttentionPlan& p, DType dt, const Heads& out, void* lse,
                            const Heads& q, const Heads& k, const Heads& v, const AttnScalars& a,
                            StreamRef stream);
/// D = rowsum(dO ∘ out) per row, [bh, Tq] in the accumulation type.
void attention_row_dots(const AttentionShape& s, DType dt, void* rowd, const Heads& g,
                        const Heads& out, StreamRef stream);
/// Backward a warp per row (dq) and a warp per key (dk, dv).
void attention_backward_rows(const AttentionPlan& p, DType dt, const Heads& dq, const Heads& dk,
                             const Heads& dv, const Heads& g, const Heads& q, const Heads& k,
                             const Heads& v, const void* lse, const void* rowd,
                             const AttnScalars& a, StreamRef stream);

}  // namespace ember::kernels::cuda

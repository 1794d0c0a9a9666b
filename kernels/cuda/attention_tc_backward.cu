// Fused attention backward on tensor cores: f16 or bf16, D = Dv in
// {32, 64, 128}, f32 accumulation; two kernels, no atomics, so every
// gradient is summed in a fixed order and the result is deterministic.
//
// Math:    P = exp(scale · q kᵀ − lse) recomputed tile by tile (masked
//          entries 0); dV = dropout(P)ᵀ · dO; dP = mask ∘ (dO · vᵀ);
//          dS = P ∘ (dP − D) with D = rowsum(dO ∘ out) computed first
//          (attention_rows.cu); dQ = scale · dS · k; dK = scale · dSᵀ · q.
//          P and dS are rounded to the operand type for their products.
// Launch:  kernels/cuda/attention_plan.h. dQ: a block of 4 warps per 64-row
//          query tile walking its key tiles (S and dP recomputed there:
//          two products more than a kernel that sums dQ with atomics, and
//          no f32 dQ buffer). dK/dV: a block per 64-key tile, a warp per 16
//          keys, walking steps of 32 query rows from the first that sees the
//          tile: Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ per warp, so Pᵀ and dSᵀ are A
//          fragments in registers for dV += Pᵀ·dO and dK += dSᵀ·Q.
//          Shared memory: dQ 4·64·(D + 8)·2 bytes; dK/dV (2·64 + 2·32)·(D + 8)·2
//          + 2·32·4.
// FLOPs:   3.5× the forward's products (S and dP twice, dV, dK, dQ).
// perf:    2-byte tile loads, no double buffering, no ldmatrix.
// Test:    tests/cuda/test_cuda_attention.cpp.
#include <cmath>

#include "core/cuda_check.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/mma.cuh"

namespace ember::kernels::cuda {

namespace {

using mma::Bits;

// dQ for one 64-row query tile.
template <bool kBf16, int D>
__global__ void __launch_bounds__(32 * kWarps)
    dq_tc(AttentionShape s, int64_t row_tiles, Heads dq, Heads g, Heads q, Heads k, Heads v,
          const float* lse, const float* rowd, AttnScalars a) {
    extern __shared__ __align__(16) Bits smem[];
    constexpr int LD = D + kSmemPad;
    constexpr int kChunks = D / 16, kKeyTiles = kTileKeys / 8, kOutTiles = D / 8;
    Bits* qs = smem;
    Bits* gs = qs + kTileRows * LD;
    Bits* ks = gs + kTileRows * LD;
    Bits* vs = ks + kTileKeys * LD;
    const BlockTile bt = block_tile(blockIdx.x, s.bh, row_tiles, s.causal);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = mma::thread(lane);
    const int64_t r0 = bt.tile * kTileRows, wr0 = r0 + 16 * warp;
    const int64_t rows[2] = {wr0 + mma::group(lane), wr0 + mma::group(lane) + 8};
    load_tile(qs, LD, q, bt.bh, r0, kTileRows, D, s.tq);
    load_tile(gs, LD, g, bt.bh, r0, kTileRows, D, s.tq);
    float row_lse[2], row_d[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const bool in = rows[h] < s.tq;
        row_lse[h] = in ? lse[bt.bh * s.tq + rows[h]] : 0.0f;
        row_d[h] = in ? rowd[bt.bh * s.tq + rows[h]] : 0.0f;
    }
    const Bits* qw = qs + 16 * warp * LD;  // this warp's rows
    const Bits* gw = gs + 16 * warp * LD;
    float acc[kOutTiles][4] = {};
    const int64_t tiles = key_tiles_of(s, bt.tile, kTileRows);
    for (int64_t kt = 0; kt < tiles; ++kt) {
        const int64_t k0 = kt * kTileKeys;
        __syncthreads();
        load_tile(ks, LD, k, bt.bh, k0, kTileKeys, D, s.tk);
        load_tile(vs, LD, v, bt.bh, k0, kTileKeys, D, s.tk);
        __syncthreads();
        float sc[kKeyTiles][4] = {}, dp[kKeyTiles][4] = {};
        mma::rows_by_rows<kBf16, kChunks>(sc, qw, ks, LD, lane);  // S = Q·Kᵀ
        mma::rows_by_rows<kBf16, kChunks>(dp, gw, vs, LD, lane);  // dP = dO·Vᵀ
        // dS = P ∘ (dP − D), in sc.
#pragma unroll
        for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int h = i >> 1;
                const int64_t row = rows[h], key = k0 + 8 * j + 2 * t + (i & 1);
                const bool seen = row < s.tq && key < s.tk && !(s.causal && key > row);
                const float p = seen ? math::exp_nonpositive(sc[j][i] * a.scale - row_lse[h]) : 0.0f;
                float dpk = dp[j][i];
                if (a.dropout_p > 0)
                    dpk = seen && attn_keep(a, s, bt.bh, row, key) ? dpk * a.keep_scale : 0.0f;
                sc[j][i] = p * (dpk - row_d[h]);
            }
        // dQ += dS · K: K's tile read as it is (element (key, d)).
        mma::acc_by_rows<kBf16, kTileKeys / 16>(acc, sc, ks, LD, lane);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h)
        if (rows[h] < s.tq) mma::store_row<kBf16>(dq.row<Bits>(bt.bh, rows[h]), acc, h, a.scale, lane);
}

// dK and dV for one 64-key tile.
template <bool kBf16, int D>
__global__ void __launch_bounds__(32 * kWarps)
    dkv_tc(AttentionShape s, int64_t key_tiles, Heads dk, Heads dv, Heads g, Heads q, Heads k,
           Heads v, const float* lse, const float* rowd, AttnScalars a) {
    extern __shared__ __align__(16) Bits smem[];
    constexpr int LD = D + kSmemPad;
    constexpr int kChunks = D / 16, kRowTiles = kStepRows / 8, kOutTiles = D / 8;
    Bits* ks = smem;
    Bits* vs = ks + kTileKeys * LD;
    Bits* qs = vs + kTileKeys * LD;
    Bits* gs = qs + kStepRows * LD;
    float* lse_s = reinterpret_cast<float*>(gs + kStepRows * LD);
    float* d_s = lse_s + kStepRows;
    // Heaviest first: under the causal mask the first key tiles see the most rows.
    const BlockTile bt = block_tile(blockIdx.x, s.bh, key_tiles, false);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int t = mma::thread(lane);
    const int64_t k0 = bt.tile * kTileKeys, wk0 = k0 + 16 * warp;
    const int64_t keys[2] = {wk0 + mma::group(lane), wk0 + mma::group(lane) + 8};
    load_tile(ks, LD, k, bt.bh, k0, kTileKeys, D, s.tk);
    load_tile(vs, LD, v, bt.bh, k0, kTileKeys, D, s.tk);
    const Bits* kw = ks + 16 * warp * LD;
    const Bits* vw = vs + 16 * warp * LD;
    float dka[kOutTiles][4] = {}, dva[kOutTiles][4] = {};
    const int64_t steps = ceil_div(s.tq, kStepRows);
    for (int64_t st = first_step_of(s, bt.tile); st < steps; ++st) {
        const int64_t q0 = st * kStepRows;
        __syncthreads();
        load_tile(qs, LD, q, bt.bh, q0, kStepRows, D, s.tq);
        load_tile(gs, LD, g, bt.bh, q0, kStepRows, D, s.tq);
        for (int r = threadIdx.x; r < kStepRows; r += blockDim.x) {
            const bool in = q0 + r < s.tq;
            lse_s[r] = in ? lse[bt.bh * s.tq + q0 + r] : 0.0f;
            d_s[r] = in ? rowd[bt.bh * s.tq + q0 + r] : 0.0f;
        }
        __syncthreads();
        // Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ: rows are this warp's keys, columns query rows.
        float sc[kRowTiles][4] = {}, dp[kRowTiles][4] = {};
        mma::rows_by_rows<kBf16, kChunks>(sc, kw, qs, LD, lane);  // Sᵀ = K·Qᵀ
        mma::rows_by_rows<kBf16, kChunks>(dp, vw, gs, LD, lane);  // dPᵀ = V·dOᵀ
        // Pᵀ (dropped, for dV) into dp's place after dSᵀ is formed in sc.
#pragma unroll
        for (int j = 0; j < kRowTiles; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const int rl = 8 * j + 2 * t + (i & 1);
                const int64_t row = q0 + rl, key = keys[i >> 1];
                const bool seen = row < s.tq && key < s.tk && !(s.causal && key > row);
                const float p = seen ? math::exp_nonpositive(sc[j][i] * a.scale - lse_s[rl]) : 0.0f;
                float kept = p, dpk = dp[j][i];
                if (a.dropout_p > 0) {
                    const bool keep = seen && attn_keep(a, s, bt.bh, row, key);
                    kept = keep ? p * a.keep_scale : 0.0f;
                    dpk = keep ? dpk * a.keep_scale : 0.0f;
                }
                sc[j][i] = p * (dpk - d_s[rl]);
                dp[j][i] = kept;
            }
        // dV += Pᵀ·dO and dK += dSᵀ·Q, the step's rows as k.
        mma::acc_by_rows<kBf16, kStepRows / 16>(dva, dp, gs, LD, lane);
        mma::acc_by_rows<kBf16, kStepRows / 16>(dka, sc, qs, LD, lane);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        if (keys[h] >= s.tk) continue;
        mma::store_row<kBf16>(dk.row<Bits>(bt.bh, keys[h]), dka, h, a.scale, lane);
        mma::store_row<kBf16>(dv.row<Bits>(bt.bh, keys[h]), dva, h, 1.0f, lane);
    }
}

template <bool kBf16, int D>
void launch_backward(const AttentionPlan& p, const Heads& dq, const Heads& dk, const Heads& dv,
                     const Heads& g, const Heads& q, const Heads& k, const Heads& v,
                     const float* lse, const float* rowd, const AttnScalars& a, StreamRef stream) {
    auto dq_kernel = dq_tc<kBf16, D>;
    auto dkv_kernel = dkv_tc<kBf16, D>;
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(p.smem)));
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(dkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(p.smem_kv)));
    dq_kernel<<<unsigned(p.grid), p.threads, p.smem, stream.handle>>>(p.shape, p.row_tiles, dq, g,
                                                                      q, k, v, lse, rowd, a);
    EMBER_CUDA_CHECK(cudaGetLastError());
    dkv_kernel<<<unsigned(p.grid_kv), p.threads, p.smem_kv, stream.handle>>>(
        p.shape, p.key_tiles, dk, dv, g, q, k, v, lse, rowd, a);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

template <bool kBf16>
void backward_for_d(const AttentionPlan& p, const Heads& dq, const Heads& dk, const Heads& dv,
                    const Heads& g, const Heads& q, const Heads& k, const Heads& v,
                    const float* lse, const float* rowd, const AttnScalars& a, StreamRef stream) {
    switch (p.shape.d) {
        case 32:
            return launch_backward<kBf16, 32>(p, dq, dk, dv, g, q, k, v, lse, rowd, a, stream);
        case 64:
            return launch_backward<kBf16, 64>(p, dq, dk, dv, g, q, k, v, lse, rowd, a, stream);
        case 128:
            return launch_backward<kBf16, 128>(p, dq, dk, dv, g, q, k, v, lse, rowd, a, stream);
        default:
            EMBER_FAIL("internal error: attention_backward_tc got D = ", p.shape.d);
    }
}

}  // namespace

void attention_backward_tc(const AttentionPlan& p, bool bf16, const Heads& dq, const Heads& dk,
                           const Heads& dv, const Heads& g, const Heads& q, const Heads& k,
                           const Heads& v, const float* lse, const float* rowd,
                           const AttnScalars& a, StreamRef stream) {
    if (p.grid == 0) return;
    if (bf16)
        backward_for_d<true>(p, dq, dk, dv, g, q, k, v, lse, rowd, a, stream);
    else
        backward_for_d<false>(p, dq, dk, dv, g, q, k, v, lse, rowd, a, stream);
}

}  // namespace ember::kernels::cuda

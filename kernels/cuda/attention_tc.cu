// Fused attention forward on tensor cores (FlashAttention-2's loop): f16 or
// bf16 q, k, v with D = Dv in {32, 64, 128}, f32 accumulation.
//
// Math:    per query row, over key tiles in order: S = scale · q kᵀ (f32);
//          m' = max(m, max S); P = exp(S − m'); l = l·e^(m − m') + Σ P;
//          O = O·e^(m − m') + dropout(P) · V, with P rounded to the operand
//          type for the product; at the end out = O / l (rounded), lse =
//          m + log l. The CPU model of this order: tests/support/attention_model.h.
// Launch:  kernels/cuda/attention_plan.h (Note [Attention tiles]): a block of
//          4 warps per 64-row query tile, a warp per 16 rows; q stays in
//          registers as A fragments, each 64-key tile of K and V goes through
//          shared memory (2·64·(D + 8)·2 bytes), S and P never leave registers.
//          Causal: the key tiles above the tile's last row are not visited.
// Bytes:   q, out once; K and V once per query tile (from L2 mostly).
// FLOPs:   2·B·H·pairs·2D (pairs: visible (row, key) pairs; whole tiles on
//          the diagonal are computed); B·H·pairs exps.
// perf:    K and V tiles are loaded with 2-byte loads and not double-buffered
//          (no cp.async), V's fragments with 2-byte shared loads (no
//          ldmatrix.trans); one block per 64 rows.
// Test:    tests/cuda/test_cuda_attention.cpp (against the CPU kernel and the
//          model); plan: tests/kernels/test_attention_plan.cpp.
#include <cmath>

#include "core/cuda_check.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/mma.cuh"

namespace ember::kernels::cuda {

namespace {

using mma::Bits;

template <bool kBf16, int D>
__global__ void __launch_bounds__(32 * kWarps)
    forward_tc(AttentionShape s, int64_t row_tiles, Heads out, float* lse, Heads q, Heads k,
               Heads v, AttnScalars a) {
    extern __shared__ __align__(16) Bits smem[];
    constexpr int LD = D + kSmemPad;
    constexpr int kChunks = D / 16;      // k-chunks of q·kᵀ
    constexpr int kKeyTiles = kTileKeys / 8;  // n-tiles of S
    constexpr int kOutTiles = D / 8;     // n-tiles of O
    Bits* ks = smem;
    Bits* vs = smem + kTileKeys * LD;
    const BlockTile bt = block_tile(blockIdx.x, s.bh, row_tiles, s.causal);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = mma::group(lane), t = mma::thread(lane);
    const int64_t r0 = bt.tile * kTileRows, wr0 = r0 + 16 * warp;
    const int64_t rows[2] = {wr0 + g, wr0 + g + 8};  // this lane's rows

    // q as A fragments, straight from global memory (zeros past Tq).
    uint32_t qf[kChunks][4];
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int64_t row = rows[r & 1];
            const int col = 16 * kk + 2 * t + 8 * (r >> 1);
            const Bits* p = q.row<Bits>(bt.bh, row < s.tq ? row : 0) + col;
            qf[kk][r] = row < s.tq ? mma::pair(p, p + 1) : 0u;
        }

    float o[kOutTiles][4] = {};
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};  // l: this lane's part of the row sum
    const int64_t tiles = key_tiles_of(s, bt.tile, kTileRows);
    for (int64_t kt = 0; kt < tiles; ++kt) {
        const int64_t k0 = kt * kTileKeys;
        __syncthreads();  // the previous tile's reads are done
        load_tile(ks, LD, k, bt.bh, k0, kTileKeys, D, s.tk);
        load_tile(vs, LD, v, bt.bh, k0, kTileKeys, D, s.tk);
        __syncthreads();

        float sc[kKeyTiles][4] = {};
#pragma unroll
        for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
            for (int kk = 0; kk < kChunks; ++kk) {
                uint32_t b[2];
                mma::load_b_cols(b, ks + 8 * j * LD + 16 * kk, LD, lane);
                mma::mma<kBf16>(sc[j], qf[kk], b);
            }
        // Scale, mask, the rows' new maxima.
        const bool masked = tile_masked(s, wr0, 16, k0);
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float x = sc[j][i] * a.scale;
                if (masked) {
                    const int64_t row = rows[i >> 1], key = k0 + 8 * j + 2 * t + (i & 1);
                    if (key >= s.tk || (s.causal && key > row)) x = -INFINITY;
                }
                sc[j][i] = x;
                mx[i >> 1] = fmaxf(mx[i >> 1], x);
            }
        float base[2], alpha[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const float mnew = fmaxf(m[h], mma::quad_max(mx[h]));
            base[h] = mnew == -INFINITY ? 0.0f : mnew;  // a row with nothing seen yet
            alpha[h] = math::exp_nonpositive(m[h] - base[h]);
            m[h] = mnew;
            l[h] *= alpha[h];
        }
        // P, its row sums, dropout, and O·alpha + P·V.
        const bool dropout = a.dropout_p > 0;
#pragma unroll
        for (int j = 0; j < kKeyTiles; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const float p = math::exp_nonpositive(sc[j][i] - base[i >> 1]);
                l[i >> 1] += p;
                float kept = p;
                if (dropout) {
                    const int64_t row = rows[i >> 1], key = k0 + 8 * j + 2 * t + (i & 1);
                    kept = row < s.tq && key < s.tk && attn_keep(a, s, bt.bh, row, key)
                               ? p * a.keep_scale
                               : 0.0f;
                }
                sc[j][i] = kept;
            }
#pragma unroll
        for (int jd = 0; jd < kOutTiles; ++jd)
#pragma unroll
            for (int i = 0; i < 4; ++i) o[jd][i] *= alpha[i >> 1];
        mma::acc_by_rows<kBf16, kTileKeys / 16>(o, sc, vs, LD, lane);
    }
    // out = O / l, lse = m + log l, for the rows that exist.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float sum = mma::quad_sum(l[h]);
        const int64_t row = rows[h];
        if (row >= s.tq) continue;
        mma::store_row<kBf16>(out.row<Bits>(bt.bh, row), o, h, 1.0f / sum, lane);
        if (t == 0) lse[bt.bh * s.tq + row] = m[h] + logf(sum);
    }
}

template <bool kBf16, int D>
void launch_forward(const AttentionPlan& p, const Heads& out, float* lse, const Heads& q,
                    const Heads& k, const Heads& v, const AttnScalars& a, StreamRef stream) {
    auto kernel = forward_tc<kBf16, D>;
    EMBER_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(p.smem)));
    kernel<<<unsigned(p.grid), p.threads, p.smem, stream.handle>>>(p.shape, p.row_tiles, out, lse,
                                                                     q, k, v, a);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

template <bool kBf16>
void forward_for_d(const AttentionPlan& p, const Heads& out, float* lse, const Heads& q,
                   const Heads& k, const Heads& v, const AttnScalars& a, StreamRef stream) {
    switch (p.shape.d) {
        case 32:
            return launch_forward<kBf16, 32>(p, out, lse, q, k, v, a, stream);
        case 64:
            return launch_forward<kBf16, 64>(p, out, lse, q, k, v, a, stream);
        case 128:
            return launch_forward<kBf16, 128>(p, out, lse, q, k, v, a, stream);
        default:
            EMBER_FAIL("internal error: attention_forward_tc got D = ", p.shape.d);
    }
}

}  // namespace

void attention_forward_tc(const AttentionPlan& p, bool bf16, const Heads& out, float* lse,
                          const Heads& q, const Heads& k, const Heads& v, const AttnScalars& a,
                          StreamRef stream) {
    if (p.grid == 0) return;
    if (bf16)
        forward_for_d<true>(p, out, lse, q, k, v, a, stream);
    else
        forward_for_d<false>(p, out, lse, q, k, v, a, stream);
}

}  // namespace ember::kernels::cuda

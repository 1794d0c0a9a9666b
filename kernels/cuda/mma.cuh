// Warp-level tensor-core products for the attention kernels: one
// mma.sync.m16n8k16 (f16 or bf16 operands, f32 accumulators) and the loads
// that fill its fragments from shared memory. Which element a lane holds is
// kernels/cuda/attention_plan.h's a_coords / b_coords / c_coords (the PTX
// ISA's layouts), tested on the CPU; the loads below follow them:
//   A (16 × 16): reg r holds row g + 8·(r & 1), columns 2t + 8·(r >> 1) + {0, 1};
//   B (16 × 8):  reg r holds k = 2t + 8·r + {0, 1}, column n = g;
//   C (16 × 8):  c[i] is row g + 8·(i >= 2), column 2t + (i & 1);
// with g = lane / 4, t = lane % 4; a register's lower half is the lower
// column (or k). The C of two adjacent n-tiles is, packed pairwise, the A of
// one 16-wide k-chunk: attention feeds its probabilities to the next product
// without leaving registers (pack_a).
#pragma once

#include <cstdint>

#include "../../core/half.h"

namespace ember::kernels::cuda::mma {

/// Storage of one operand element: the bits of an f16 or a bf16.
using Bits = uint16_t;

/// Two values rounded to the operand type (to nearest even, as the CPU's
/// Half / BFloat16), lower column in the lower half.
template <bool kBf16>
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
    const uint32_t a = kBf16 ? float_to_bf16_bits(lo) : float_to_half_bits(lo);
    const uint32_t b = kBf16 ? float_to_bf16_bits(hi) : float_to_half_bits(hi);
    return a | (b << 16);
}

template <bool kBf16>
__device__ __forceinline__ float to_float(Bits b) {
    return kBf16 ? bf16_bits_to_float(b) : half_bits_to_float(b);
}

/// c += a · b on the warp's fragments.
template <bool kBf16>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    if constexpr (kBf16) {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    } else {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
}

__device__ __forceinline__ int group(int lane) { return lane >> 2; }
__device__ __forceinline__ int thread(int lane) { return lane & 3; }

/// Two adjacent elements p[0], p[1] of shared memory (4-byte aligned).
__device__ __forceinline__ uint32_t pair(const Bits* p) {
    return *reinterpret_cast<const uint32_t*>(p);
}
/// Two elements anywhere, lo in the lower half.
__device__ __forceinline__ uint32_t pair(const Bits* lo, const Bits* hi) {
    return uint32_t(*lo) | (uint32_t(*hi) << 16);
}

/// A fragment of the 16 × 16 block at `s` of a row-major tile (row stride ld):
/// element (m, k) at s[m·ld + k].
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const Bits* s, int ld, int lane) {
    const int g = group(lane), t = thread(lane);
#pragma unroll
    for (int r = 0; r < 4; ++r) a[r] = pair(s + (g + 8 * (r & 1)) * ld + 2 * t + 8 * (r >> 1));
}

/// B fragment of the 16 × 8 block whose element (k, n) is s[n·ld + k]: the
/// rows of a tile of K (or V, dO, Q) used as the columns of Kᵀ.
__device__ __forceinline__ void load_b_cols(uint32_t (&b)[2], const Bits* s, int ld, int lane) {
    const int g = group(lane), t = thread(lane);
#pragma unroll
    for (int r = 0; r < 2; ++r) b[r] = pair(s + g * ld + 2 * t + 8 * r);
}

/// B fragment of the 16 × 8 block whose element (k, n) is s[k·ld + n]: a
/// row-major tile used as it is (V in P·V).
__device__ __forceinline__ void load_b_rows(uint32_t (&b)[2], const Bits* s, int ld, int lane) {
    const int g = group(lane), t = thread(lane);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        const int k = 2 * t + 8 * r;
        b[r] = pair(s + k * ld + g, s + (k + 1) * ld + g);
    }
}

/// The A fragment of k-chunk kk from the accumulators of n-tiles 2kk and
/// 2kk + 1 (a 16 × 16 block of a C), rounded to the operand type.
template <bool kBf16>
__device__ __forceinline__ void pack_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
    a[0] = pack<kBf16>(c0[0], c0[1]);
    a[1] = pack<kBf16>(c0[2], c0[3]);
    a[2] = pack<kBf16>(c1[0], c1[1]);
    a[3] = pack<kBf16>(c1[2], c1[3]);
}

/// c[j] += A · Bⱼᵀ for the warp's 16 rows of A at `a` and the rows 8j..8j+7
/// of the tile at `b` (both row-major, row stride ld, kChunks·16 wide): a
/// product whose columns are the rows of a tile — S = Q·Kᵀ, dP = dO·Vᵀ.
template <bool kBf16, int kChunks, int kTiles>
__device__ __forceinline__ void rows_by_rows(float (&c)[kTiles][4], const Bits* a, const Bits* b,
                                             int ld, int lane) {
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
        uint32_t af[4];
        load_a(af, a + 16 * kk, ld, lane);
#pragma unroll
        for (int j = 0; j < kTiles; ++j) {
            uint32_t bf[2];
            load_b_cols(bf, b + 8 * j * ld + 16 * kk, ld, lane);
            mma<kBf16>(c[j], af, bf);
        }
    }
}

/// c[jd] += P · B for P the warp's 16 × (kChunks·16) block held as the
/// accumulators p (n-tiles of 8 columns, packed to A fragments by pack_a)
/// and B the tile at `b` (row-major, row stride ld), columns 8jd..8jd+7:
/// O += P·V, dQ += dS·K, dV += Pᵀ·dO.
template <bool kBf16, int kChunks, int kOut>
__device__ __forceinline__ void acc_by_rows(float (&c)[kOut][4], const float (&p)[2 * kChunks][4],
                                            const Bits* b, int ld, int lane) {
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk) {
        uint32_t pa[4];
        pack_a<kBf16>(pa, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
        for (int jd = 0; jd < kOut; ++jd) {
            uint32_t bf[2];
            load_b_rows(bf, b + 16 * kk * ld + 8 * jd, ld, lane);
            mma<kBf16>(c[jd], pa, bf);
        }
    }
}

/// Row h (0: g, 1: g + 8) of the accumulators c, times `scale`, rounded and
/// stored at dst (the row's first column): this lane's pairs 8jd + 2t, +1.
template <bool kBf16, int kOut>
__device__ __forceinline__ void store_row(Bits* dst, const float (&c)[kOut][4], int h, float scale,
                                          int lane) {
    const int t = thread(lane);
#pragma unroll
    for (int jd = 0; jd < kOut; ++jd) {
        const uint32_t w = pack<kBf16>(c[jd][2 * h] * scale, c[jd][2 * h + 1] * scale);
        dst[8 * jd + 2 * t] = Bits(w & 0xffffu);
        dst[8 * jd + 2 * t + 1] = Bits(w >> 16);
    }
}

/// The max and the sum over the four lanes of a group (one row of a C).
__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(0xffffffffu, x, 1);
    return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

}  // namespace ember::kernels::cuda::mma

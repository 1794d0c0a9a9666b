// How the bf16 GEMM (kernels/cpu/gemm_bf16.cpp) packs its operands: k
// pairs of bf16 in 32-bit words (the even k in the low half, VDPBF16PS's
// order), subnormals read as zero; b in panels of 64 columns, a in panels of
// 6 rows, a weight gradient's bias sums taken on the way. Internal to
// kernels/cpu/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "../../core/half.h"
#include "../matmul_args.h"
#include "gemm_bf16_tile.h"
#include "transpose16.h"

namespace ember::kernels::cpu::bf16_pack {

constexpr int64_t kMr = kBf16Mr;
constexpr int64_t kNr = kBf16Nr;

// A bf16's bits with a subnormal read as zero (VDPBF16PS's rule, applied by
// the packing so that both tiles see the same operands).
inline uint16_t daz(uint16_t h) { return (h & 0x7f80u) == 0 ? uint16_t(h & 0x8000u) : h; }
inline uint16_t bits(float x) { return daz(float_to_bf16_bits(x)); }
inline uint16_t bits(BFloat16 x) { return daz(x.bits); }
inline uint32_t pair(uint16_t even, uint16_t odd) { return uint32_t(even) | uint32_t(odd) << 16; }

inline float to_f32(float x) { return x; }
inline float to_f32(BFloat16 x) { return float(x); }
template <class T>
const T* at(const T* p, MatrixLayout l, int64_t r, int64_t c) {
    return l.row_major ? p + r * l.ld + c : p + c * l.ld + r;
}

// 16 × 16 blocks of a column-major bf16 b's pair words (column j's pairs
// side by side) transposed into the panel's rows, subnormal halves flushed;
// returns how many pairs (a multiple of 16) it packed for the first
// nc / 16 · 16 columns. Needs 4-byte aligned pairs (even k0 and ld).
inline int64_t pack_b_columns16(const BFloat16* b, int64_t ld, int64_t k0, int64_t kc, int64_t j0,
                         int64_t nc, uint32_t* bp) {
    if (ld % 2 != 0 || k0 % 2 != 0 || reinterpret_cast<uintptr_t>(b) % 4 != 0) return 0;
    using u32x16 = uint32_t __attribute__((vector_size(64)));
    const int64_t pairs = kc / 2 / 16 * 16;
    for (int64_t jb = 0; jb + 16 <= nc; jb += 16)
        for (int64_t qb = 0; qb < pairs; qb += 16) {
            vec16 r[16];
            for (int i = 0; i < 16; ++i)
                std::memcpy(&r[i], b + (j0 + jb + i) * ld + k0 + 2 * qb, sizeof r[i]);
            transpose16(r);
            for (int t = 0; t < 16; ++t) {
                u32x16 w = (u32x16)r[t];
                w = (w & 0x7f80u) == 0 ? w & 0xffff8000u : w;      // the even k's half
                w = (w & 0x7f800000u) == 0 ? w & 0x8000ffffu : w;  // the odd k's half
                std::memcpy(bp + (qb + t) * kNr + jb, &w, sizeof w);
            }
        }
    return pairs;
}

// Panels [p0, p1) of b's k-block at k0 in pairs, one after another at bp:
// panel p's element (q, j) = (b(k0 + 2q, 64p + j), b(k0 + 2q + 1, 64p + j)),
// zero past kc and n.
template <class T>
void pack_b_panels(const T* b, MatrixLayout lb, int64_t n, int64_t k0, int64_t kc, int64_t p0,
                   int64_t p1, uint32_t* bp) {
    const int64_t pairs = (kc + 1) / 2, panel = pairs * kNr;
    if (lb.row_major) {
        // Two rows of b side by side, read once from end to end across the
        // panels (the streams a cold b is prefetched best on), in loops that
        // vectorize.
        for (int64_t q = 0; q < pairs; ++q) {
            const bool odd = 2 * q + 1 < kc;
            const T* e = at(b, lb, k0 + 2 * q, 0);
            const T* o = odd ? at(b, lb, k0 + 2 * q + 1, 0) : nullptr;
            for (int64_t p = p0; p < p1; ++p) {
                const int64_t j0 = p * kNr, nc = std::min(kNr, n - j0);
                uint32_t* dst = bp + (p - p0) * panel + q * kNr;
                if (odd)
                    for (int64_t j = 0; j < nc; ++j) dst[j] = pair(bits(e[j0 + j]), bits(o[j0 + j]));
                else
                    for (int64_t j = 0; j < nc; ++j) dst[j] = pair(bits(e[j0 + j]), 0);
                std::fill(dst + nc, dst + kNr, 0u);
            }
        }
        return;
    }
    // Column-major (x·wᵀ, w row-major): a column's pairs lie side by side;
    // bf16's whole 16 × 16 blocks of pairs by transposes first.
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t j0 = p * kNr, nc = std::min(kNr, n - j0);
        uint32_t* panel_p = bp + (p - p0) * panel;
        int64_t done = 0;
        if constexpr (std::is_same_v<T, BFloat16>)
            done = pack_b_columns16(b, lb.ld, k0, kc, j0, nc, panel_p);
        for (int64_t q = 0; q < pairs; ++q) {
            uint32_t* dst = panel_p + q * kNr;
            const bool odd = 2 * q + 1 < kc;
            for (int64_t j = q < done ? nc / 16 * 16 : 0; j < nc; ++j) {
                const T* col = at(b, lb, k0 + 2 * q, j0 + j);
                dst[j] = pair(bits(col[0]), odd ? bits(col[1]) : 0);
            }
            std::fill(dst + nc, dst + kNr, 0u);
        }
    }
}

// Six rows of a column-major bf16 matrix as a 6-row panel in pairs:
// dst[q·6 + r] = (col(2q)[r], col(2q + 1)[r]) where col(k) = a0 + k·ld, for
// kc k's (zero past them); reads eight values of each column (the caller
// checks they exist). With `sums`, adds each row's values as given (f64:
// the even k's and the odd k's in two chains, as pack_a_block's loop) to
// sums[0, 6).
inline void pack_pairs_by_columns(const BFloat16* a0, int64_t ld, int64_t kc, uint32_t* dst,
                           double* sums) {
    using u16x8 = uint16_t __attribute__((vector_size(16)));
    using u32x4 = uint32_t __attribute__((vector_size(16)));
    using u32x8 = uint32_t __attribute__((vector_size(32)));
    using f32x8 = float __attribute__((vector_size(32)));
    using f64x8 = double __attribute__((vector_size(64)));
    auto column = [&](int64_t k) {
        u16x8 v;
        std::memcpy(&v, a0 + k * ld, sizeof v);
        return v;
    };
    auto daz8 = [](u16x8 v) { return (v & 0x7f80) == 0 ? v & 0x8000 : v; };  // read as zero
    auto widen = [](u16x8 v) {  // the eight bf16 values, exactly, in f64
        const u32x8 w = __builtin_convertvector(v, u32x8) << 16;
        f32x8 f;
        std::memcpy(&f, &w, sizeof f);
        return __builtin_convertvector(f, f64x8);
    };
    f64x8 even = {}, odd = {};
    const int64_t pairs = (kc + 1) / 2;
    for (int64_t q = 0; q < pairs; ++q) {
        const u16x8 e = column(2 * q), o = 2 * q + 1 < kc ? column(2 * q + 1) : u16x8{};
        if (sums) {  // an absent odd k adds +0 to a chain that cannot be −0
            even += widen(e);
            odd += widen(o);
        }
        const u16x8 ez = daz8(e), oz = daz8(o);
        const u32x4 lo = (u32x4)__builtin_shuffle(ez, oz, u16x8{0, 8, 1, 9, 2, 10, 3, 11});
        const u32x4 hi = (u32x4)__builtin_shuffle(ez, oz, u16x8{4, 12, 5, 13, 6, 14, 7, 15});
        std::memcpy(dst + q * kMr, &lo, sizeof lo);
        std::memcpy(dst + q * kMr + 4, &hi, 2 * sizeof(uint32_t));
    }
    if (sums)
        for (int64_t r = 0; r < kMr; ++r) sums[r] += even[r] + odd[r];
}

// The mc × kc block of a at (i0, k0) as panels of 6 rows in pairs: panel p
// holds ap[p·6·pairs + q·6 + r] = (a(i0 + 6p + r, k0 + 2q), a(…, k0 + 2q + 1)),
// zero past mc and kc; m_all is a's row count. With `sums`, adds each
// row's values as given (in f64) to sums[row − i0].
template <class T>
void pack_a_block(const T* a, MatrixLayout la, int64_t m_all, int64_t i0, int64_t mc, int64_t k0,
                  int64_t kc, uint32_t* ap, double* sums) {
    const int64_t pairs = (kc + 1) / 2;
    // Element (r, k) of the block at a0[r·rs + k·ks]: pair by pair, the six
    // rows side by side (contiguous for a column-major a such as gᵀ).
    const int64_t rs = la.row_major ? la.ld : 1, ks = la.row_major ? 1 : la.ld;
    for (int64_t p = 0; p * kMr < mc; ++p) {
        uint32_t* dst = ap + p * kMr * pairs;
        const int64_t rows = std::min(kMr, mc - p * kMr);
        const T* a0 = at(a, la, i0 + p * kMr, k0);
        bool packed = false;
        if constexpr (std::is_same_v<T, BFloat16>) {
            // A column-major bf16 a (gᵀ of a weight gradient): eight rows
            // read at once from each k's two lines, interleaved in registers.
            if (!la.row_major && rows == kMr && i0 + p * kMr + 8 <= m_all) {
                pack_pairs_by_columns(a0, la.ld, kc, dst, sums ? sums + p * kMr : nullptr);
                packed = true;
            }
        }
        for (int64_t q = 0; q < pairs && !packed; ++q) {
            const bool odd = 2 * q + 1 < kc;
            const T* e = a0 + 2 * q * ks;
            const T* o = odd ? e + ks : e;
            for (int64_t r = 0; r < kMr; ++r)
                dst[q * kMr + r] = r < rows ? pair(bits(e[r * rs]), odd ? bits(o[r * rs]) : 0) : 0;
        }
        if (!sums || packed) continue;
        // The rows' sums: the even k's and the odd k's apart (two chains of
        // additions, not one), added at the end.
        for (int64_t r = 0; r < rows; ++r) {
            double even = 0, odd = 0;
            const T* row = a0 + r * rs;
            for (int64_t q = 0; q < kc / 2; ++q) {
                even += double(to_f32(row[2 * q * ks]));
                odd += double(to_f32(row[(2 * q + 1) * ks]));
            }
            if (kc % 2) even += double(to_f32(row[(kc - 1) * ks]));
            sums[p * kMr + r] += even + odd;
        }
    }
}

}  // namespace ember::kernels::cpu::bf16_pack

// Fused, blocked CPU attention: FlashAttention's online softmax on tiles of
// 64 query rows × 64 keys, with packed operands and register-tiled products.
//
// Math:     S = scale · q kᵀ, masked (causal: key j > row i) to −inf;
//           P = softmax of each row of S; out = dropout(P) · v;
//           lse_i = log Σ_j exp(S_ij). Backward: D_i = Σ_d dO_id · out_id;
//           P = exp(S − lse) recomputed; dv = dropout(P)ᵀ · dO;
//           dP = dropout mask ∘ (dO · vᵀ); dS = P ∘ (dP − D);
//           dq = scale · dS · k; dk = scale · dSᵀ · q.
// Layout:   q, k, v, out, grads [B, H, T, D] with any strides of B, H and T,
//           D unit-stride; lse [B, H, Tq] contiguous. Per (b, h) the operands
//           are packed once in the compute type (f32; f64 for f64) with rows
//           padded to whole vectors of zeros: scale·q and dO as rows, k as
//           columns (kᵀ) and rows, v as rows and columns (vᵀ).
// Dtypes:   f32, f64; f16 and bf16 read and written as they are, computed in f32.
// Cost:     forward 2·B·H·Tq·Tk·(D + Dv) FLOPs (about half of it under
//           causal: tiles above the diagonal are skipped, not masked),
//           backward 2.5× that (S recomputed; dv, dP, dq, dk); Tq·Tk exps
//           each way. Bytes: the operands once each way — nothing of size
//           Tq × Tk exists (per thread: O((Tq + Tk)·D) packed operands and
//           three 64 × 64 tiles).
// Threads:  one (b, h) per thread at a time, its tiles in a fixed order: the
//           result is bit-identical for any thread count.
// Test:     tests/kernels/test_attention.cpp; benchmark: bench/attention.cpp.
#include "kernels/cpu/attention.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "kernels/math.h"
#include "kernels/cpu/transpose16.h"
#include "kernels/random_math.h"

namespace ember::kernels::cpu {

namespace {

constexpr int64_t kTileRows = 64;  // query rows per tile
constexpr int64_t kTileKeys = 128;  // keys per tile
constexpr int kRegRows = 8;        // rows of a register tile, at most
constexpr int kRegVecs = 4;        // vectors of a register tile, at most

template <class A>
struct Simd;
template <>
struct Simd<float> {
    using vec = float __attribute__((vector_size(64)));  // one AVX-512 register
    static constexpr int64_t lanes = 16;
};
template <>
struct Simd<double> {
    using vec = double __attribute__((vector_size(64)));
    static constexpr int64_t lanes = 8;
};

template <class A>
typename Simd<A>::vec vload(const A* p) {
    typename Simd<A>::vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
template <class A>
void vstore(A* p, typename Simd<A>::vec v) {
    std::memcpy(p, &v, sizeof v);
}

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

// c[r][j] (= or +=) Σ_k a(r, k) · b[k][j] for r < R, j < V vectors and k in
// [k0, k1), where a(r, k) = a[r·ars + k·acs] is broadcast and row k of b
// starts at b + k·ldb: per k, V vector loads and R broadcasts for R·V FMAs.
template <class A, int R, int V>
void reg_tile(const A* a, int64_t ars, int64_t acs, const A* b, int64_t ldb, int64_t k0,
              int64_t k1, A* c, int64_t ldc, bool accumulate) {
    using vec = typename Simd<A>::vec;
    constexpr int64_t L = Simd<A>::lanes;
    vec s[R][V];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) s[r][v] = accumulate ? vload(c + r * ldc + v * L) : vec{};
    for (int64_t k = k0; k < k1; ++k) {
        vec bv[V];
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) bv[v] = vload(b + k * ldb + v * L);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const A x = a[r * ars + k * acs];
#pragma GCC unroll 4
            for (int v = 0; v < V; ++v) s[r][v] += x * bv[v];
        }
    }
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) vstore(c + r * ldc + v * L, s[r][v]);
}

template <class A>
using RegTileFn = void (*)(const A*, int64_t, int64_t, const A*, int64_t, int64_t, int64_t, A*,
                           int64_t, bool);
template <class A, int V>
constexpr RegTileFn<A> kRegColumn[kRegRows] = {
    reg_tile<A, 1, V>, reg_tile<A, 2, V>, reg_tile<A, 3, V>, reg_tile<A, 4, V>,
    reg_tile<A, 5, V>, reg_tile<A, 6, V>, reg_tile<A, 7, V>, reg_tile<A, 8, V>};
template <class A>
constexpr const RegTileFn<A>* kRegTiles[kRegVecs] = {kRegColumn<A, 1>, kRegColumn<A, 2>,
                                                     kRegColumn<A, 3>, kRegColumn<A, 4>};

// Rows per register tile for V vectors: as many as keep 16–24 accumulators.
constexpr int64_t reg_rows(int64_t v) { return v <= 2 ? 8 : 6; }

constexpr int64_t kNoLimit = int64_t(1) << 60;

// What a group of rows [r, r + n) of a product needs under the causal mask,
// in the tile's coordinates: columns below r + n + col_end (rounded up to
// whole vectors), and k in [r + k_begin, r + n + k_end). The defaults limit
// nothing. Key c is visible to query row q iff c <= q + off (off = r0 − c0):
// products over keys as columns (S, dP) take col_end = off, over keys as k
// (P·v, dS·k) k_end = off, over queries as k with keys as rows (Pᵀ·dO,
// dSᵀ·q) k_begin = −off — and what they skip is exactly the masked zeros.
struct Limits {
    int64_t col_end = kNoLimit, k_begin = -kNoLimit, k_end = kNoLimit;
};

// c[rows][cols] (= or +=) a(rows × kn) · b[kn][cols], cols a multiple of the
// lanes, in register tiles; a(r, k) = a[r·ars + k·acs]. Under `lim` a row
// group computes only what it needs (columns it skips are left as they
// were; the callers never read them).
template <class A>
void gemm(int64_t rows, int64_t cols, int64_t kn, const A* a, int64_t ars, int64_t acs, const A* b,
          int64_t ldb, A* c, int64_t ldc, bool accumulate, const Limits& lim = {}) {
    constexpr int64_t L = Simd<A>::lanes;
    const int64_t max_v = std::min<int64_t>(kRegVecs, cols / L);
    const int64_t step = reg_rows(max_v);
    for (int64_t r = 0; r < rows; r += step) {
        const int64_t n = std::min(step, rows - r);
        const int64_t col_stop =
            lim.col_end == kNoLimit ? cols
                                    : std::clamp(round_up(r + n + lim.col_end, L), int64_t(0), cols);
        const int64_t k0 = std::clamp(r + lim.k_begin, int64_t(0), kn);
        const int64_t k1 = lim.k_end == kNoLimit ? kn : std::clamp(r + n + lim.k_end, k0, kn);
        for (int64_t j = 0; j < col_stop; j += kRegVecs * L) {
            const int64_t v = std::min<int64_t>(kRegVecs, (col_stop - j) / L);
            kRegTiles<A>[v - 1][n - 1](a + r * ars, ars, acs, b + j, ldb, k0, k1, c + r * ldc + j,
                                       ldc, accumulate);
        }
    }
}

// One [B, H, T, D] operand of the call, element (b, h, t, d) at
// data + b·sb + h·sh + t·st + d.
template <class T>
struct Operand {
    T* data;
    int64_t sb, sh, st;
    Operand(const View& v) : data(v.ptr<T>()), sb(v.strides[0]), sh(v.strides[1]), st(v.strides[2]) {}
    T* row(int64_t b, int64_t h, int64_t t) const { return data + b * sb + h * sh + t * st; }
};

// The sizes of a call, the padded ones, and its arguments.
struct Dims {
    int64_t b, h, tq, tk, d, dv;
    int64_t dp, dvp, tkp;  // D, Dv and Tk rounded up to whole vectors
    AttentionArgs args;
};

template <class A>
Dims dims_of(const View& q, const View& v, const AttentionArgs& args) {
    constexpr int64_t L = Simd<A>::lanes;
    Dims s{q.shape[0], q.shape[1], q.shape[2], v.shape[2], q.shape[3], v.shape[3], 0, 0, 0, args};
    s.dp = round_up(s.d, L);
    s.dvp = round_up(s.dv, L);
    s.tkp = round_up(s.tk, L);
    return s;
}

// dst[t·ld + j] = mul · src(t, j) for t < n, j < width; zeros up to rows_p
// rows and ld columns.
template <class T, class A>
void pack_rows(A* dst, int64_t ld, int64_t rows_p, const Operand<const T>& src, int64_t b,
               int64_t h, int64_t n, int64_t width, A mul) {
    for (int64_t t = 0; t < rows_p; ++t) {
        A* o = dst + t * ld;
        if (t < n) {
            const T* in = src.row(b, h, t);
            for (int64_t j = 0; j < width; ++j) o[j] = mul * math::load(in[j]);
            std::fill(o + width, o + ld, A(0));
        } else {
            std::fill(o, o + ld, A(0));
        }
    }
}

// dst[j·ld + t] = src(t, j): the transpose, zeros up to width_p rows and ld
// columns; f32 in 16 × 16 blocks transposed in registers.
template <class T, class A>
void pack_cols(A* dst, int64_t ld, int64_t width_p, const Operand<const T>& src, int64_t b,
               int64_t h, int64_t n, int64_t width) {
    std::fill(dst, dst + width_p * ld, A(0));
    int64_t t0 = 0;
    if constexpr (std::is_same_v<T, float>) {
        for (; t0 + 16 <= n; t0 += 16) {
            int64_t j0 = 0;
            for (; j0 + 16 <= width; j0 += 16) {
                vec16 r[16];
                for (int i = 0; i < 16; ++i) std::memcpy(&r[i], src.row(b, h, t0 + i) + j0, sizeof r[i]);
                transpose16(r);
                for (int i = 0; i < 16; ++i) std::memcpy(dst + (j0 + i) * ld + t0, &r[i], sizeof r[i]);
            }
            for (int64_t t = t0; t < t0 + 16; ++t)
                for (int64_t j = j0; j < width; ++j) dst[j * ld + t] = src.row(b, h, t)[j];
        }
    }
    for (int64_t t = t0; t < n; ++t) {
        const T* in = src.row(b, h, t);
        for (int64_t j = 0; j < width; ++j) dst[j * ld + t] = math::load(in[j]);
    }
}

// p[c] = exp(p[c] − m) for c < n and 0 for n <= c < np (np whole vectors;
// p[n..np) may hold anything); returns the sum of the exps. Whole vectors
// with a lane-wise sum, so the loop vectorizes.
template <class A>
A exp_row(A* p, int64_t n, int64_t np, A m) {
    constexpr int64_t L = Simd<A>::lanes;
    A acc[L] = {};
    for (int64_t c0 = 0; c0 < np; c0 += L) {
#pragma omp simd
        for (int64_t l = 0; l < L; ++l) {
            const A e = c0 + l < n ? math::exp_nonpositive(p[c0 + l] - m) : A(0);
            p[c0 + l] = e;
            acc[l] += e;
        }
    }
    A sum = 0;
    for (int64_t l = 0; l < L; ++l) sum += acc[l];
    return sum;
}

// The largest of p[0..n) and `start`.
template <class A>
A row_max(const A* p, int64_t n, A start) {
    using vec = typename Simd<A>::vec;
    constexpr int64_t L = Simd<A>::lanes;
    A m = start;
    int64_t c = 0;
    if (n >= L) {
        vec mv = vload(p);
        for (c = L; c + L <= n; c += L) {
            const vec x = vload(p + c);
            mv = x > mv ? x : mv;
        }
        for (int64_t i = 0; i < L; ++i) m = std::max(m, mv[i]);
    }
    for (; c < n; ++c) m = std::max(m, p[c]);
    return m;
}

// The keys row i of a tile sees: all Tk, or (causal) keys 0..i.
int64_t visible_keys(const Dims& s, int64_t row) {
    return s.args.causal ? std::min(s.tk, row + 1) : s.tk;
}

// The Limits of the tile at (r0, c0) for a product whose keys are its
// columns ('c'), its k with queries as rows ('k'), or whose keys are its rows
// with queries as k ('q'); none without the causal mask.
Limits causal_limits(const Dims& s, int64_t r0, int64_t c0, char kind) {
    Limits l;
    if (!s.args.causal) return l;
    const int64_t off = r0 - c0;
    if (kind == 'c') l.col_end = off;
    if (kind == 'k') l.k_end = off;
    if (kind == 'q') l.k_begin = -off;
    return l;
}

// Dropout of row `row` (of head bh), keys [c0, c0 + n): keep[c] = 1/(1 − p)
// for a kept probability, 0 for a dropped one (AttentionArgs: the f32
// uniform stream over [B, H, Tq, Tk], one Philox block per 4 entries).
template <class A>
void dropout_row(const Dims& s, int64_t bh, int64_t row, int64_t c0, int64_t n, A* keep) {
    const AttentionArgs& a = s.args;
    const A scale = A(1) / (A(1) - A(a.dropout_p));
    const int64_t base = (bh * s.tq + row) * s.tk + c0;
    for (int64_t c = 0; c < n; ++c)
        keep[c] = math::dropout_keep(math::uniform_at<float>(a.seed, a.first_block, base + c),
                                     a.dropout_p)
                      ? scale
                      : A(0);
}

// Per-thread buffers, sized once per call.
template <class A>
struct Scratch {
    std::vector<A> q, kt, kr, v, vt, dout, s, p, dp, acc, dq, dk, dv, keep, rowd;
};

template <class T, class A>
void forward_head(const Dims& s, int64_t b, int64_t h, const Operand<T>& out, A* lse,
                  const Operand<const T>& q, const Operand<const T>& k, const Operand<const T>& v,
                  Scratch<A>& w) {
    const int64_t tqp = round_up(s.tq, kTileRows);
    w.q.resize(size_t(tqp * s.dp));
    w.kt.resize(size_t(s.dp * s.tkp));
    w.v.resize(size_t(s.tkp * s.dvp));
    w.s.resize(size_t(kTileRows * kTileKeys));
    w.acc.resize(size_t(kTileRows * s.dvp));
    w.keep.resize(size_t(kTileKeys));
    pack_rows(w.q.data(), s.dp, tqp, q, b, h, s.tq, s.d, A(s.args.scale));
    pack_cols(w.kt.data(), s.tkp, s.dp, k, b, h, s.tk, s.d);
    pack_rows(w.v.data(), s.dvp, s.tkp, v, b, h, s.tk, s.dv, A(1));
    const int64_t bh = b * s.h + h;
    const bool dropout = s.args.dropout_p > 0;
    A m[kTileRows], l[kTileRows];
    for (int64_t r0 = 0; r0 < s.tq; r0 += kTileRows) {
        const int64_t rows = std::min(kTileRows, s.tq - r0);
        std::fill(m, m + rows, -std::numeric_limits<A>::infinity());
        std::fill(l, l + rows, A(0));
        std::fill(w.acc.begin(), w.acc.end(), A(0));
        const int64_t kend = visible_keys(s, r0 + rows - 1);
        for (int64_t c0 = 0; c0 < kend; c0 += kTileKeys) {
            const int64_t cols = std::min(kTileKeys, kend - c0);
            const int64_t colsp = round_up(cols, Simd<A>::lanes);
            A* S = w.s.data();
            const Limits keys_as_cols = causal_limits(s, r0, c0, 'c');
            gemm(rows, colsp, s.dp, w.q.data() + r0 * s.dp, s.dp, 1, w.kt.data() + c0, s.tkp, S,
                 kTileKeys, false, keys_as_cols);
            for (int64_t r = 0; r < rows; ++r) {
                A* sr = S + r * kTileKeys;
                const int64_t n = std::min(cols, visible_keys(s, r0 + r) - c0);
                if (n <= 0) {  // every key of the tile is after this row
                    std::fill(sr, sr + colsp, A(0));
                    continue;
                }
                const A mx = row_max(sr, n, m[r]);
                const A alpha = math::exp_nonpositive(m[r] - mx);
                const A sum = exp_row(sr, n, colsp, mx);
                l[r] = l[r] * alpha + sum;
                m[r] = mx;
                A* ar = w.acc.data() + r * s.dvp;
                for (int64_t j = 0; j < s.dvp; ++j) ar[j] *= alpha;
                if (dropout) {  // the sum above is of the undropped probabilities
                    dropout_row(s, bh, r0 + r, c0, n, w.keep.data());
                    for (int64_t c = 0; c < n; ++c) sr[c] *= w.keep[size_t(c)];
                }
            }
            gemm(rows, s.dvp, colsp, S, kTileKeys, 1, w.v.data() + c0 * s.dvp, s.dvp,
                 w.acc.data(), s.dvp, true, causal_limits(s, r0, c0, 'k'));
        }
        for (int64_t r = 0; r < rows; ++r) {
            T* o = out.row(b, h, r0 + r);
            const A* ar = w.acc.data() + r * s.dvp;
            const A inv = l[r] > 0 ? A(1) / l[r] : A(0);
            for (int64_t j = 0; j < s.dv; ++j) o[j] = math::cast<T>(ar[j] * inv);
            lse[r0 + r] = l[r] > 0 ? m[r] + std::log(l[r]) : -std::numeric_limits<A>::infinity();
        }
    }
}

template <class T, class A>
void backward_head(const Dims& s, int64_t b, int64_t h, const Operand<T>& dq,
                   const Operand<T>& dk, const Operand<T>& dv, const Operand<const T>& dout,
                   const Operand<const T>& q, const Operand<const T>& k,
                   const Operand<const T>& v, const Operand<const T>& out, const A* lse,
                   Scratch<A>& w) {
    const int64_t tqp = round_up(s.tq, kTileRows);
    w.q.resize(size_t(tqp * s.dp));
    w.kt.resize(size_t(s.dp * s.tkp));
    w.kr.resize(size_t(s.tkp * s.dp));
    w.vt.resize(size_t(s.dvp * s.tkp));
    w.dout.resize(size_t(tqp * s.dvp));
    w.s.resize(size_t(kTileRows * kTileKeys));
    w.dp.resize(size_t(kTileRows * kTileKeys));
    w.dq.assign(size_t(tqp * s.dp), A(0));
    w.dk.assign(size_t(s.tkp * s.dp), A(0));
    w.dv.assign(size_t(s.tkp * s.dvp), A(0));
    w.keep.resize(size_t(kTileKeys));
    w.rowd.resize(size_t(s.tq));
    pack_rows(w.q.data(), s.dp, tqp, q, b, h, s.tq, s.d, A(s.args.scale));
    pack_cols(w.kt.data(), s.tkp, s.dp, k, b, h, s.tk, s.d);
    pack_rows(w.kr.data(), s.dp, s.tkp, k, b, h, s.tk, s.d, A(1));
    pack_cols(w.vt.data(), s.tkp, s.dvp, v, b, h, s.tk, s.dv);
    pack_rows(w.dout.data(), s.dvp, tqp, dout, b, h, s.tq, s.dv, A(1));
    for (int64_t i = 0; i < s.tq; ++i) {  // D_i = dO_i · out_i
        const T* o = out.row(b, h, i);
        const A* g = w.dout.data() + i * s.dvp;
        A sum = 0;
        for (int64_t j = 0; j < s.dv; ++j) sum += g[j] * math::load(o[j]);
        w.rowd[size_t(i)] = sum;
    }
    const int64_t bh = b * s.h + h;
    const bool dropout = s.args.dropout_p > 0;
    for (int64_t r0 = 0; r0 < s.tq; r0 += kTileRows) {
        const int64_t rows = std::min(kTileRows, s.tq - r0);
        const int64_t kend = visible_keys(s, r0 + rows - 1);
        for (int64_t c0 = 0; c0 < kend; c0 += kTileKeys) {
            const int64_t cols = std::min(kTileKeys, kend - c0);
            const int64_t colsp = round_up(cols, Simd<A>::lanes);
            A* P = w.s.data();
            A* dP = w.dp.data();
            const Limits keys_as_cols = causal_limits(s, r0, c0, 'c');
            gemm(rows, colsp, s.dp, w.q.data() + r0 * s.dp, s.dp, 1, w.kt.data() + c0, s.tkp, P,
                 kTileKeys, false, keys_as_cols);
            gemm(rows, colsp, s.dvp, w.dout.data() + r0 * s.dvp, s.dvp, 1, w.vt.data() + c0,
                 s.tkp, dP, kTileKeys, false, keys_as_cols);
            for (int64_t r = 0; r < rows; ++r) {
                A* pr = P + r * kTileKeys;
                A* gr = dP + r * kTileKeys;
                const int64_t n = std::max<int64_t>(0, std::min(cols, visible_keys(s, r0 + r) - c0));
                const A row_lse = lse[r0 + r], row_d = w.rowd[size_t(r0 + r)];
                exp_row(pr, n, colsp, row_lse);
                if (dropout && n > 0) {
                    // dP of the kept entries, scaled; P itself stays undropped
                    // for dS, and its dropped form goes into dV below (in gr's
                    // place until dV is done: dS needs dP first, so keep both).
                    dropout_row(s, bh, r0 + r, c0, n, w.keep.data());
                    for (int64_t c = 0; c < n; ++c) gr[c] *= w.keep[size_t(c)];
                }
                // dS = P ∘ (dP − D), into dP's tile.
                for (int64_t c = 0; c < n; ++c) gr[c] = pr[c] * (gr[c] - row_d);
                std::fill(gr + n, gr + colsp, A(0));
                if (dropout && n > 0)  // P becomes dropout(P) for dV
                    for (int64_t c = 0; c < n; ++c) pr[c] *= w.keep[size_t(c)];
            }
            // dV[c0..] += dropout(P)ᵀ · dO; dQ[r0..] += dS · k; dK[c0..] += dSᵀ · scale·q.
            const Limits queries_as_k = causal_limits(s, r0, c0, 'q');
            gemm(colsp, s.dvp, rows, P, 1, kTileKeys, w.dout.data() + r0 * s.dvp, s.dvp,
                 w.dv.data() + c0 * s.dvp, s.dvp, true, queries_as_k);
            gemm(rows, s.dp, colsp, dP, kTileKeys, 1, w.kr.data() + c0 * s.dp, s.dp,
                 w.dq.data() + r0 * s.dp, s.dp, true, causal_limits(s, r0, c0, 'k'));
            gemm(colsp, s.dp, rows, dP, 1, kTileKeys, w.q.data() + r0 * s.dp, s.dp,
                 w.dk.data() + c0 * s.dp, s.dp, true, queries_as_k);
        }
    }
    const A scale = A(s.args.scale);
    for (int64_t i = 0; i < s.tq; ++i) {
        T* o = dq.row(b, h, i);
        for (int64_t j = 0; j < s.d; ++j) o[j] = math::cast<T>(scale * w.dq[size_t(i * s.dp + j)]);
    }
    for (int64_t t = 0; t < s.tk; ++t) {
        T* ok = dk.row(b, h, t);
        T* ov = dv.row(b, h, t);
        for (int64_t j = 0; j < s.d; ++j) ok[j] = math::cast<T>(w.dk[size_t(t * s.dp + j)]);
        for (int64_t j = 0; j < s.dv; ++j) ov[j] = math::cast<T>(w.dv[size_t(t * s.dvp + j)]);
    }
}

// Asks for the rows of every head of batch element b (n rows each): the
// heads of one projection sit side by side in memory, so reading them all
// now streams whole rows, where the heads one by one would each touch a
// sliver of every row.
template <class T>
void prefetch_heads(const Dims& s, const Operand<const T>& x, int64_t b, int64_t n, int64_t width) {
    const int64_t bytes = width * int64_t(sizeof(T));
    for (int64_t h = 0; h < s.h; ++h)
        for (int64_t t = 0; t < n; ++t) {
            const char* row = reinterpret_cast<const char*>(x.row(b, h, t));
            for (int64_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off);
        }
}

// Runs head(b, h) for every (b, h), each on one thread from start to end (the
// result does not depend on the thread count): by batch element, its heads
// in turn, when there are enough of them to keep the threads busy (with
// `prefetch(b)` one element ahead); by (b, h) otherwise.
template <class Head, class Prefetch>
void for_each_head(const Dims& s, Head&& head, Prefetch&& prefetch) {
    const int64_t heads = s.b * s.h;
    const bool by_batch = s.h > 1 && s.b >= 2 * omp_get_max_threads();
#pragma omp parallel if (heads > 1)
    {
        if (by_batch) {
            // A run of batch elements per thread; the next one's rows are
            // asked for while this one computes.
            const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
            const int64_t b0 = s.b * t / nt, b1 = s.b * (t + 1) / nt;
            if (b0 < b1) prefetch(b0);
            for (int64_t b = b0; b < b1; ++b) {
                if (b + 1 < b1) prefetch(b + 1);
                for (int64_t h = 0; h < s.h; ++h) head(b, h);
            }
        } else {
#pragma omp for schedule(dynamic)
            for (int64_t bh = 0; bh < heads; ++bh) head(bh / s.h, bh % s.h);
        }
    }
}

template <class T>
void run_forward(const View& out, const View& lse, const View& q, const View& k, const View& v,
                 const AttentionArgs& args) {
    using A = math::Acc<T>;
    const Dims s = dims_of<A>(q, v, args);
    const Operand<T> o(out);
    const Operand<const T> vq(q), vk(k), vv(v);
    A* l = lse.ptr<A>();
    std::vector<Scratch<A>> scratch(static_cast<size_t>(omp_get_max_threads()));
    for_each_head(
        s,
        [&](int64_t b, int64_t h) {
            forward_head<T, A>(s, b, h, o, l + (b * s.h + h) * s.tq, vq, vk, vv,
                               scratch[size_t(omp_get_thread_num())]);
        },
        [&](int64_t b) {
            prefetch_heads(s, vq, b, s.tq, s.d);
            prefetch_heads(s, vk, b, s.tk, s.d);
            prefetch_heads(s, vv, b, s.tk, s.dv);
        });
}

template <class T>
void run_backward(const View& dq, const View& dk, const View& dv, const View& grad_out,
                  const View& q, const View& k, const View& v, const View& out, const View& lse,
                  const AttentionArgs& args) {
    using A = math::Acc<T>;
    const Dims s = dims_of<A>(q, v, args);
    const Operand<T> gq(dq), gk(dk), gv(dv);
    const Operand<const T> go(grad_out), vq(q), vk(k), vv(v), vo(out);
    const A* l = lse.ptr<A>();
    std::vector<Scratch<A>> scratch(static_cast<size_t>(omp_get_max_threads()));
    for_each_head(
        s,
        [&](int64_t b, int64_t h) {
            backward_head<T, A>(s, b, h, gq, gk, gv, go, vq, vk, vv, vo, l + (b * s.h + h) * s.tq,
                                scratch[size_t(omp_get_thread_num())]);
        },
        [&](int64_t b) {
            prefetch_heads(s, vq, b, s.tq, s.d);
            prefetch_heads(s, vk, b, s.tk, s.d);
            prefetch_heads(s, vv, b, s.tk, s.dv);
            prefetch_heads(s, go, b, s.tq, s.dv);
            prefetch_heads(s, vo, b, s.tq, s.dv);
        });
}

}  // namespace

void attention_forward(const View& out, const View& lse, const View& q, const View& k,
                       const View& v, const AttentionArgs& args) {
    switch (q.dtype) {
        case DType::f32:
            return run_forward<float>(out, lse, q, k, v, args);
        case DType::f64:
            return run_forward<double>(out, lse, q, k, v, args);
        case DType::f16:
            return run_forward<Half>(out, lse, q, k, v, args);
        case DType::bf16:
            return run_forward<BFloat16>(out, lse, q, k, v, args);
        default:
            break;
    }
    EMBER_FAIL("internal error: cpu::attention_forward got dtype ", dtype_name(q.dtype));
}

void attention_backward(const View& dq, const View& dk, const View& dv, const View& grad_out,
                        const View& q, const View& k, const View& v, const View& out,
                        const View& lse, const AttentionArgs& args) {
    switch (q.dtype) {
        case DType::f32:
            return run_backward<float>(dq, dk, dv, grad_out, q, k, v, out, lse, args);
        case DType::f64:
            return run_backward<double>(dq, dk, dv, grad_out, q, k, v, out, lse, args);
        case DType::f16:
            return run_backward<Half>(dq, dk, dv, grad_out, q, k, v, out, lse, args);
        case DType::bf16:
            return run_backward<BFloat16>(dq, dk, dv, grad_out, q, k, v, out, lse, args);
        default:
            break;
    }
    EMBER_FAIL("internal error: cpu::attention_backward got dtype ", dtype_name(q.dtype));
}

}  // namespace ember::kernels::cpu

// ember's f32 GEMM: the operands packed into panels, a 6 × 64 register tile.
//
// Math:    c[M×N] (= or +=) a[M×K] · b[K×N]; for each element the K products
//          are summed in order, k-block by k-block (kKc), whatever the
//          thread count.
// Layout:  a and b row- or column-major with any leading dimension; c
//          row-major. b is packed k-block by k-block into panels of 64
//          columns (kc rows of 64 floats each, zero-padded); a's blocks of
//          rows into panels of 6 rows (kc columns of 6 floats, zero-padded)
//          — a row-major a is read where it lies.
// Tile:    6 rows × 4 vectors of 16 columns = 24 accumulators; per k, 4
//          vector loads of b, 6 broadcasts of a, 24 FMAs.
// Cost:    2·M·N·K FLOPs; b read once per k-block and row block of 96, a
//          once per 64-column panel group, c once per k-block.
// Threads: each a part of c — rows × column panels (kernels/cpu/
//          gemm_blocks.h) — in blocks of up to 96 rows times groups of
//          panels (512 KB packed), packing the panels and rows it reads
//          itself. Test: tests/kernels/test_gemm.cpp (and every matmul,
//          linear and conv test); benchmark: bench/matmul.cpp.
#include "kernels/cpu/gemm.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/cpu/gemm_blocks.h"
#include "kernels/cpu/transpose16.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

constexpr int64_t kMr = 6;      // rows of the register tile
constexpr int64_t kNr = 64;     // columns of the register tile (4 vectors)
constexpr int64_t kKc = 512;    // k per block: a 6 × 512 panel of a (12 KB) stays in L1
constexpr int64_t kMc = 96;     // rows per block of a (16 panels, 192 KB at kc = 512: L2)
constexpr int64_t kGroupBytes = 512 << 10;  // packed b panels a thread's blocks reuse (L2)
constexpr int64_t kLanes = 16;

using vec = vec16;

vec load(const float* p) {
    vec v;
    std::memcpy(&v, p, sizeof v);
    return v;
}
void store(float* p, vec v) { std::memcpy(p, &v, sizeof v); }

// Element (r, c) of a matrix in `l`.
const float* at(const float* p, MatrixLayout l, int64_t r, int64_t c) {
    return l.row_major ? p + r * l.ld + c : p + c * l.ld + r;
}

// Panels [p0, p1) of b's k-block at k0, one after another at bp: panel p's
// element (k, j) = b(k0 + k, 64p + j), zero for columns past n.
void pack_b_panels(const float* b, MatrixLayout lb, int64_t n, int64_t k0, int64_t kc, int64_t p0,
                   int64_t p1, float* bp) {
    const int64_t panel = kc * kNr;
    if (lb.row_major) {  // each row of b read once from end to end across the panels
        for (int64_t k = 0; k < kc; ++k) {
            const float* src = at(b, lb, k0 + k, 0);
            for (int64_t p = p0; p < p1; ++p) {
                const int64_t j0 = p * kNr, nc = std::min(kNr, n - j0);
                float* dst = bp + (p - p0) * panel + k * kNr;
                std::memcpy(dst, src + j0, size_t(nc) * sizeof(float));
                std::fill(dst + nc, dst + kNr, 0.0f);
            }
        }
        return;
    }
    // Column-major b (x·wᵀ with w row-major): column j is contiguous in k;
    // 16 × 16 blocks transposed in registers.
    for (int64_t p = p0; p < p1; ++p) {
        const int64_t j0 = p * kNr, nc = std::min(kNr, n - j0);
        float* panel_p = bp + (p - p0) * panel;
        int64_t k = 0;
        if (nc == kNr)
            for (; k + kLanes <= kc; k += kLanes)
                for (int64_t j = 0; j < kNr; j += kLanes) {
                    vec r[16];
                    for (int i = 0; i < 16; ++i) r[i] = load(at(b, lb, k0 + k, j0 + j + i));
                    transpose16(r);
                    for (int i = 0; i < 16; ++i) store(panel_p + (k + i) * kNr + j, r[i]);
                }
        for (; k < kc; ++k) {
            float* dst = panel_p + k * kNr;
            for (int64_t j = 0; j < nc; ++j) dst[j] = *at(b, lb, k0 + k, j0 + j);
            std::fill(dst + nc, dst + kNr, 0.0f);
        }
    }
}

// The mc × kc block of a at (i0, k0) as panels of 6 rows: panel p holds
// ap[p·6·kc + k·6 + r] = a(i0 + 6p + r, k0 + k), zero for rows past mc.
// With `sums`, adds each row's values to sums[row − i0] (f64, in k order).
void pack_a_block(const float* a, MatrixLayout la, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
                  float* ap, double* sums) {
    for (int64_t p = 0; p * kMr < mc; ++p) {
        float* dst = ap + p * kMr * kc;
        const int64_t rows = std::min(kMr, mc - p * kMr);
        if (!la.row_major && rows == kMr) {  // six contiguous values per k
            double s[kMr] = {};
            for (int64_t k = 0; k < kc; ++k) {
                const float* src = at(a, la, i0 + p * kMr, k0 + k);
                std::memcpy(dst + k * kMr, src, kMr * sizeof(float));
                if (sums)
                    for (int64_t r = 0; r < kMr; ++r) s[r] += double(src[r]);
            }
            if (sums)
                for (int64_t r = 0; r < kMr; ++r) sums[p * kMr + r] += s[r];
            continue;
        }
        for (int64_t r = 0; r < kMr; ++r) {
            if (r >= rows) {
                for (int64_t k = 0; k < kc; ++k) dst[k * kMr + r] = 0.0f;
                continue;
            }
            double s = 0;
            for (int64_t k = 0; k < kc; ++k) {
                const float v = *at(a, la, i0 + p * kMr + r, k0 + k);
                dst[k * kMr + r] = v;
                s += double(v);
            }
            if (sums) sums[p * kMr + r] += s;
        }
    }
}

// How a tile's values are stored: `acc` adds them to c; otherwise `bias`
// (64 columns, or null) is their starting value.
struct Store {
    bool acc;
    const float* bias;
};

// Where a tile reads its 6 rows of a: element (r, k) at ap[r·rs + k·ks] —
// a packed panel (rs 1, ks 6), or a row-major a's own rows (rs lda, ks 1).
struct Rows {
    const float* ap;
    int64_t rs, ks;
};

// c[6×64] (= or +=) a (6 × kc) · bp (kc × 64).
void tile(int64_t kc, Rows a, const float* bp, float* c, int64_t ldc, Store st) {
    vec s[kMr][4] = {};
    const float* ap = a.ap;
    const int64_t rs = a.rs, ks = a.ks;
    for (int64_t k = 0; k < kc; ++k) {
        const vec b0 = load(bp + k * kNr), b1 = load(bp + k * kNr + 16),
                  b2 = load(bp + k * kNr + 32), b3 = load(bp + k * kNr + 48);
#pragma GCC unroll 6
        for (int64_t r = 0; r < kMr; ++r) {
            const float x = ap[r * rs + k * ks];
            s[r][0] += x * b0;
            s[r][1] += x * b1;
            s[r][2] += x * b2;
            s[r][3] += x * b3;
        }
    }
    for (int64_t r = 0; r < kMr; ++r)
        for (int v = 0; v < 4; ++v) {
            float* p = c + r * ldc + v * kLanes;
            if (st.acc)
                store(p, load(p) + s[r][v]);
            else if (st.bias)
                store(p, load(st.bias + v * kLanes) + s[r][v]);
            else
                store(p, s[r][v]);
        }
}

// A tile at the matrix's edge: through a full tile in a scratch buffer, then
// its rows × cols corner into c.
void edge_tile(int64_t kc, Rows a, const float* bp, float* c, int64_t ldc, int64_t rows,
               int64_t cols, Store st) {
    float t[kMr * kNr];
    tile(kc, a, bp, t, kNr, {false, nullptr});
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) {
            float& o = c[r * ldc + j];
            o = st.acc ? o + t[r * kNr + j] : st.bias ? st.bias[j] + t[r * kNr + j] : t[r * kNr + j];
        }
}

// The activation of a finished rows × cols tile of c (pre: its copy before).
void activate(float* c, int64_t ldc, int64_t rows, int64_t cols, const GemmEpilogue& ep,
              float* pre) {
    for (int64_t r = 0; r < rows; ++r) {
        float* row = c + r * ldc;
        if (pre) std::memcpy(pre + r * ep.ld_pre, row, size_t(cols) * sizeof(float));
        if (ep.act == LinearActivation::relu) {
#pragma omp simd
            for (int64_t j = 0; j < cols; ++j) row[j] = math::Relu{}(row[j]);
        } else if (ep.act == LinearActivation::gelu_tanh) {
#pragma omp simd
            for (int64_t j = 0; j < cols; ++j) row[j] = math::GeluTanh{}(row[j]);
        }
    }
}

}  // namespace

void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, MatrixLayout la, const float* b,
              MatrixLayout lb, float* c, int64_t ldc, bool accumulate, const GemmEpilogue* ep) {
    if (ep && ep->a_row_sums) std::fill(ep->a_row_sums, ep->a_row_sums + std::max<int64_t>(m, 0), 0.0);
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < m; ++i) {
                float* row = c + i * ldc;
                for (int64_t j = 0; j < n; ++j) row[j] = ep && ep->bias ? ep->bias[j] : 0.0f;
            }
        if (ep && ep->act != LinearActivation::none)
            activate(c, ldc, m, n, *ep, static_cast<float*>(ep->pre));
        return;
    }
    const bool activated = ep && ep->act != LinearActivation::none;
    const int64_t panels = (n + kNr - 1) / kNr;
    const int64_t kc_max = std::min(k, kKc);
    const int64_t group = std::max<int64_t>(1, kGroupBytes / (kNr * kc_max * 4));
    const GemmSplit split = gemm_split(m, panels, 2.0 * double(m) * double(n) * double(k), kMr,
                                       kMc, group, la.row_major && !(ep && ep->a_row_sums));
    // Each thread's own packed a block and packed panels of b. Packing
    // buffers are left uninitialized: packing writes every element a tile
    // reads, the zero padding included.
    struct Scratch {
        std::unique_ptr<float[]> apack, bpack;
    };
    gemm_schedule(
        split, k, kKc,
        [&] {
            return Scratch{std::make_unique_for_overwrite<float[]>(size_t(split.max_rows * kc_max)),
                           std::make_unique_for_overwrite<float[]>(size_t(split.group * kNr * kc_max))};
        },
        [&](const Scratch& own, int64_t k0, int64_t kc, int64_t p0, int64_t p1) {
            pack_b_panels(b, lb, n, k0, kc, p0, p1, own.bpack.get());
        },
        [&](const Scratch& own, const GemmItem& it) {
            const int64_t k0 = it.k0, kc = it.kc, i0 = it.rows.first, mc = it.rows.count;
            const bool acc = accumulate || k0 > 0, last = k0 + kc >= k;
            // A block's row sums, from the one item that packs it with the
            // first group of panels (each k-block in turn: in order).
            double* sums = ep && ep->a_row_sums && it.first_group ? ep->a_row_sums + i0 : nullptr;
            // A row-major a is read where it lies (six rows side by side per
            // tile: one stream each); only a last short panel is packed.
            const bool direct = la.row_major && !sums;
            const int64_t whole = direct ? mc / kMr * kMr : 0;
            if (whole < mc)
                pack_a_block(a, la, i0 + whole, mc - whole, k0, kc, own.apack.get() + whole * kc,
                             sums);
            for (int64_t p = it.p0; p < it.p1; ++p) {
                const int64_t j0 = p * kNr, cols = std::min(kNr, n - j0);
                const float* bp = own.bpack.get() + (p - it.p0) * kNr * kc;
                const Store st{acc, ep && ep->bias ? ep->bias + j0 : nullptr};
                for (int64_t r = 0; r < mc; r += kMr) {
                    const Rows ap = r < whole ? Rows{at(a, la, i0 + r, k0), la.ld, 1}
                                              : Rows{own.apack.get() + r * kc, 1, kMr};
                    float* ct = c + (i0 + r) * ldc + j0;
                    const int64_t rows = std::min(kMr, mc - r);
                    if (rows == kMr && cols == kNr)
                        tile(kc, ap, bp, ct, ldc, st);
                    else
                        edge_tile(kc, ap, bp, ct, ldc, rows, cols, st);
                    if (last && activated)
                        activate(ct, ldc, rows, cols, *ep,
                                 ep->pre ? static_cast<float*>(ep->pre) + (i0 + r) * ep->ld_pre + j0
                                         : nullptr);
                }
            }
        });
}

}  // namespace ember::kernels::cpu

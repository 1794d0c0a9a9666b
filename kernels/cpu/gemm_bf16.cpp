// ember's bf16 GEMM: the operands rounded to bf16 and packed in k pairs, a
// 6 × 64 register tile of VDPBF16PS (kernels/cpu/gemm_bf16_tile.cpp).
//
// Math:    c[M×N] (= or +=) a[M×K] · b[K×N]; per element the K products
//          summed a k pair at a time in order, k-block by k-block (kKc),
//          whatever the thread count; c rounded to its dtype once.
// Layout:  a and b f32 or bf16, row- or column-major with any leading
//          dimension; c f32 or bf16, row-major. b is packed k-block by
//          k-block into panels of 64 columns (kc/2 rows of 64 pairs, zero-
//          padded), a's blocks of rows into panels of 6 rows (kc/2 columns
//          of 6 pairs), each thread packing what its part of c reads. A bf16
//          row-major a with an even K is read where it lies (its rows are
//          pairs already). A bf16 c with K past one k-block sums in an f32
//          copy, rounded once at the end.
// Cost:    2·M·N·K FLOPs at twice the f32 tile's rate per instruction; b
//          read once per k-block and row block of 96 (half f32's bytes), a
//          once per column-panel group, c once per k-block.
// Threads: kernels/cpu/gemm_blocks.h's split, as gemm_f32. Test:
//          tests/kernels/test_gemm_bf16.cpp (and the bf16 matmul and linear
//          tests); benchmark: bench/matmul.cpp.
#include "kernels/cpu/gemm_bf16.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/half.h"
#include "core/settings.h"
#include "kernels/cpu/gemm_bf16_tile.h"
#include "kernels/cpu/gemm_blocks.h"
#include "kernels/cpu/transpose16.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

constexpr int64_t kMr = kBf16Mr;
constexpr int64_t kNr = kBf16Nr;
// k per block: a 6-row panel of a is 12 KB (L1), a 64-column panel of b 128 KB.
constexpr int64_t kKc = 1024;
// Rows per block of a: 192 KB packed at kc = 1024 (L2).
constexpr int64_t kMc = 96;
// Bytes of packed b panels a thread packs at a time and its row blocks reuse
// (L2): 4 panels at kc = 1024, 16 at kc = 256.
constexpr int64_t kGroupBytes = 512 << 10;
// A product this narrow (or narrower) is computed transposed.
constexpr int64_t kNarrow = 16;

using Tile = void (*)(int64_t, const uint32_t*, int64_t, int64_t, const uint32_t*, const TileOut&);

// A bf16's bits with a subnormal read as zero (VDPBF16PS's rule, applied by
// the packing so that both tiles see the same operands).
uint16_t daz(uint16_t h) { return (h & 0x7f80u) == 0 ? uint16_t(h & 0x8000u) : h; }
uint16_t bits(float x) { return daz(float_to_bf16_bits(x)); }
uint16_t bits(BFloat16 x) { return daz(x.bits); }
uint32_t pair(uint16_t even, uint16_t odd) { return uint32_t(even) | uint32_t(odd) << 16; }

float to_f32(float x) { return x; }
float to_f32(BFloat16 x) { return float(x); }
template <class T>
T from_f32(float v) {
    return T(v);
}

template <class T>
const T* at(const T* p, MatrixLayout l, int64_t r, int64_t c) {
    return l.row_major ? p + r * l.ld + c : p + c * l.ld + r;
}

// 16 × 16 blocks of a column-major bf16 b's pair words (column j's pairs
// side by side) transposed into the panel's rows, subnormal halves flushed;
// returns how many pairs (a multiple of 16) it packed for the first
// nc / 16 · 16 columns. Needs 4-byte aligned pairs (even k0 and ld).
int64_t pack_b_columns16(const BFloat16* b, int64_t ld, int64_t k0, int64_t kc, int64_t j0,
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
void pack_pairs_by_columns(const BFloat16* a0, int64_t ld, int64_t kc, uint32_t* dst,
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

// What becomes of a finished block of sums: added to c (acc), or started
// from the bias (or zero); on the last k-block the activation, applied to the
// value rounded to c's dtype (the plain path's bits), its input kept in pre.
template <class OutT>
struct Finish {
    bool acc = false;
    const float* bias = nullptr;  // at the block's first column
    LinearActivation act = LinearActivation::none;
    OutT* pre = nullptr;  // at the block's first element
    int64_t ld_pre = 0;
};

// row[0, w) = v[0, w) rounded to OutT.
template <class OutT>
void store_row(OutT* row, const float* v, int64_t w) {
    for (int64_t j = 0; j < w; ++j) row[j] = from_f32<OutT>(v[j]);
}

// c[rows × cols] from the sums t (leading dimension ldt) as `f` says, 64
// columns at a time through f32 values (loops that vectorize).
template <class OutT>
void finish(const float* t, int64_t ldt, OutT* c, int64_t ldc, int64_t rows, int64_t cols,
            const Finish<OutT>& f) {
    float v[kNr];
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j0 = 0; j0 < cols; j0 += kNr) {
            const int64_t w = std::min(kNr, cols - j0);
            const float* s = t + r * ldt + j0;
            OutT* row = c + r * ldc + j0;
            if (f.acc)
                for (int64_t j = 0; j < w; ++j) v[j] = to_f32(row[j]) + s[j];
            else if (f.bias)
                for (int64_t j = 0; j < w; ++j) v[j] = f.bias[j0 + j] + s[j];
            else
                for (int64_t j = 0; j < w; ++j) v[j] = s[j];
            if (f.act != LinearActivation::none) {
                for (int64_t j = 0; j < w; ++j) v[j] = to_f32(from_f32<OutT>(v[j]));
                if (f.pre) store_row(f.pre + r * f.ld_pre + j0, v, w);
                if (f.act == LinearActivation::relu)
                    for (int64_t j = 0; j < w; ++j) v[j] = math::Relu{}(v[j]);
                else
                    for (int64_t j = 0; j < w; ++j) v[j] = math::GeluTanh{}(v[j]);
            }
            store_row(row, v, w);
        }
}

// The product into c of type OutT (f32, or bf16 with K within one k-block).
template <class TA, class TB, class OutT>
void run(int64_t m, int64_t n, int64_t k, const TA* a, MatrixLayout la, const TB* b,
         MatrixLayout lb, OutT* c, int64_t ldc, bool accumulate, const GemmEpilogue* ep, OutT* pre,
         Tile tile) {
    const int64_t panels = (n + kNr - 1) / kNr;
    const int64_t kc_max = std::min(k, kKc), pairs_max = (kc_max + 1) / 2;
    const bool activated = ep && ep->act != LinearActivation::none;
    // bf16 c written by the tiles themselves: one k-block, nothing to
    // accumulate, no activation but ReLU, no pre-activation to keep.
    const bool direct_c =
        k <= kKc && !accumulate &&
        (!ep || ep->act == LinearActivation::none || (ep->act == LinearActivation::relu && !pre));
    // A bf16 row-major a holds its k pairs side by side: read in place when
    // every pair is whole (even K and leading dimension, 4-byte aligned).
    bool direct_a = false;
    if constexpr (std::is_same_v<TA, BFloat16>)
        direct_a = la.row_major && k % 2 == 0 && la.ld % 2 == 0 &&
                   reinterpret_cast<uintptr_t>(a) % 4 == 0 && !(ep && ep->a_row_sums);
    const int64_t group = std::max<int64_t>(1, kGroupBytes / (kNr * pairs_max * 4));
    const GemmSplit split = gemm_split(m, panels, 2.0 * double(m) * double(n) * double(k), kMr,
                                       kMc, group, direct_a);
    // Each thread's own packed a block, packed panels of b and f32 scratch tile.
    struct Scratch {
        std::unique_ptr<uint32_t[]> apack, bpack;
        std::unique_ptr<float[]> t;
    };
    gemm_schedule(
        split, k, kKc,
        [&] {
            return Scratch{
                std::make_unique_for_overwrite<uint32_t[]>(size_t(split.max_rows * pairs_max)),
                std::make_unique_for_overwrite<uint32_t[]>(size_t(split.group * kNr * pairs_max)),
                std::make_unique_for_overwrite<float[]>(size_t(kMr * kNr))};
        },
        [&](const Scratch& own, int64_t k0, int64_t kc, int64_t p0, int64_t p1) {
            pack_b_panels(b, lb, n, k0, kc, p0, p1, own.bpack.get());
        },
        [&](const Scratch& own, const GemmItem& it) {
            const int64_t k0 = it.k0, kc = it.kc, pairs = (kc + 1) / 2;
            const int64_t i0 = it.rows.first, mc = it.rows.count;
            const bool acc = accumulate || k0 > 0, last = k0 + kc >= k;
            // A block's row sums, from the one item that packs it with the
            // first group of panels (each k-block in turn: in order).
            double* sums = ep && ep->a_row_sums && it.first_group ? ep->a_row_sums + i0 : nullptr;
            const int64_t whole = direct_a ? mc / kMr * kMr : 0;
            if (whole < mc)
                pack_a_block(a, la, m, i0 + whole, mc - whole, k0, kc,
                             own.apack.get() + whole * pairs, sums);
            for (int64_t p = it.p0; p < it.p1; ++p) {
                const int64_t j0 = p * kNr, cols = std::min(kNr, n - j0);
                const uint32_t* bp = own.bpack.get() + (p - it.p0) * kNr * pairs;
                for (int64_t r = 0; r < mc; r += kMr) {
                    // c's tile is read or written after the products: its
                    // lines are on their way meanwhile.
                    for (int64_t i = 0; i < std::min(kMr, mc - r); ++i)
                        for (int64_t j = 0; j < cols; j += 64 / int64_t(sizeof(OutT)))
                            __builtin_prefetch(c + (i0 + r + i) * ldc + j0 + j, 1);
                    // A whole bf16 tile with nothing to add to it (the only
                    // k-block) is written from the registers.
                    TileOut out;
                    out.t = own.t.get();
                    if constexpr (std::is_same_v<OutT, BFloat16>)
                        if (direct_c && mc - r >= kMr && cols == kNr) {
                            out.c = &(c + (i0 + r) * ldc + j0)->bits;
                            out.ldc = ldc;
                            out.bias = ep && ep->bias ? ep->bias + j0 : nullptr;
                            out.relu = ep && ep->act == LinearActivation::relu;
                        }
                    if (r < whole)
                        tile(pairs, reinterpret_cast<const uint32_t*>(at(a, la, i0 + r, k0)),
                             la.ld / 2, 1, bp, out);
                    else
                        tile(pairs, own.apack.get() + r * pairs, 1, kMr, bp, out);
                    if (out.c) continue;
                    Finish<OutT> f;
                    f.acc = acc;
                    f.bias = ep && ep->bias ? ep->bias + j0 : nullptr;
                    if (last && activated) {
                        f.act = ep->act;
                        f.pre = pre ? pre + (i0 + r) * ep->ld_pre + j0 : nullptr;
                        f.ld_pre = ep->ld_pre;
                    }
                    finish(own.t.get(), kNr, c + (i0 + r) * ldc + j0, ldc, std::min(kMr, mc - r),
                           cols, f);
                }
            }
        });
}

// c's dtype chosen: f32 directly; bf16 directly within one k-block, else
// through an f32 copy rounded once at the end.
template <class TA, class TB>
void run_out(int64_t m, int64_t n, int64_t k, const TA* a, MatrixLayout la, const TB* b,
             MatrixLayout lb, void* c, DType c_dtype, int64_t ldc, bool accumulate,
             const GemmEpilogue* ep, Tile tile) {
    if (c_dtype == DType::f32) {
        run(m, n, k, a, la, b, lb, static_cast<float*>(c), ldc, accumulate, ep,
            ep ? static_cast<float*>(ep->pre) : nullptr, tile);
        return;
    }
    auto* cb = static_cast<BFloat16*>(c);
    auto* pre = ep ? static_cast<BFloat16*>(ep->pre) : nullptr;
    if (k <= kKc) {
        run(m, n, k, a, la, b, lb, cb, ldc, accumulate, ep, pre, tile);
        return;
    }
    std::vector<float> sums(size_t(m * n));
    if (accumulate)
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) sums[size_t(i * n + j)] = float(cb[i * ldc + j]);
    GemmEpilogue inner;
    if (ep) {
        inner.bias = ep->bias;
        inner.a_row_sums = ep->a_row_sums;
    }
    run(m, n, k, a, la, b, lb, sums.data(), n, accumulate, &inner, static_cast<float*>(nullptr),
        tile);
    Finish<BFloat16> f;
    if (ep) {
        f.act = ep->act;
        f.pre = pre;
        f.ld_pre = ep->ld_pre;
    }
    finish(sums.data(), n, cb, ldc, m, n, f);
}

template <class TA>
void run_b(int64_t m, int64_t n, int64_t k, const TA* a, MatrixLayout la, Bf16Operand b, void* c,
           DType c_dtype, int64_t ldc, bool accumulate, const GemmEpilogue* ep, Tile tile) {
    if (b.dtype == DType::f32)
        run_out(m, n, k, a, la, static_cast<const float*>(b.data), b.layout, c, c_dtype, ldc,
                accumulate, ep, tile);
    else
        run_out(m, n, k, a, la, static_cast<const BFloat16*>(b.data), b.layout, c, c_dtype, ldc,
                accumulate, ep, tile);
}

// K = 0: c keeps its values (accumulating) or takes the bias (or zeros),
// then the activation.
template <class OutT>
void empty_sum(int64_t m, int64_t n, OutT* c, int64_t ldc, bool accumulate, const GemmEpilogue* ep,
               OutT* pre) {
    const std::vector<float> zeros(size_t(n), 0.0f);
    Finish<OutT> f;
    f.acc = accumulate;
    f.bias = ep && ep->bias ? ep->bias : nullptr;
    if (ep && ep->act != LinearActivation::none) {
        f.act = ep->act;
        f.pre = pre;
        f.ld_pre = ep->ld_pre;
    }
    finish(zeros.data(), 0, c, ldc, m, n, f);
}

// The layout of a matrix's transpose: the same memory read the other way.
MatrixLayout transposed(MatrixLayout l) { return {!l.row_major, l.ld}; }

// c[m × n] from a product's f32 sums (row-major, leading dimension n): added
// to c, or from the bias, then the activation (no pre-activation kept).
template <class OutT>
void finish_product(const float* sums, OutT* c, int64_t ldc, int64_t m, int64_t n, bool accumulate,
                    const GemmEpilogue* ep) {
    Finish<OutT> f;
    f.acc = accumulate;
    f.bias = ep && !accumulate ? ep->bias : nullptr;
    f.act = ep ? ep->act : LinearActivation::none;
    finish(sums, n, c, ldc, m, n, f);
}

}  // namespace

void gemm_bf16(int64_t m, int64_t n, int64_t k, Bf16Operand a, Bf16Operand b, void* c,
               DType c_dtype, int64_t ldc, bool accumulate, const GemmEpilogue* ep) {
    EMBER_INTERNAL_ASSERT((a.dtype == DType::f32 || a.dtype == DType::bf16) &&
                          (b.dtype == DType::f32 || b.dtype == DType::bf16) &&
                          (c_dtype == DType::f32 || c_dtype == DType::bf16));
    if (ep && ep->a_row_sums)
        std::fill(ep->a_row_sums, ep->a_row_sums + std::max<int64_t>(m, 0), 0.0);
    if (m <= 0 || n <= 0) return;
    if (k <= 0) {
        if (c_dtype == DType::f32)
            empty_sum(m, n, static_cast<float*>(c), ldc, accumulate, ep,
                      ep ? static_cast<float*>(ep->pre) : nullptr);
        else
            empty_sum(m, n, static_cast<BFloat16*>(c), ldc, accumulate, ep,
                      ep ? static_cast<BFloat16*>(ep->pre) : nullptr);
        return;
    }
    if (n <= kNarrow && m >= kNr && k <= kKc && !(ep && (ep->a_row_sums || ep->pre))) {
        // A narrow product (a classifier head): its transpose cᵀ = bᵀ · aᵀ puts
        // the few columns in the tile's rows, where a 6 × 64 tile would be
        // mostly padding. One k-block: the same products in the same order,
        // the same sums, finished into c as the direct product's are.
        std::vector<float> sums(size_t(n * m)), rows(size_t(m * n));
        gemm_bf16(n, m, k, {b.data, b.dtype, transposed(b.layout)},
                  {a.data, a.dtype, transposed(a.layout)}, sums.data(), DType::f32, m, false);
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) rows[size_t(i * n + j)] = sums[size_t(j * m + i)];
        if (c_dtype == DType::f32)
            finish_product(rows.data(), static_cast<float*>(c), ldc, m, n, accumulate, ep);
        else
            finish_product(rows.data(), static_cast<BFloat16*>(c), ldc, m, n, accumulate, ep);
        return;
    }
    const Tile tile = cpu_bf16_native() ? bf16_tile_native : bf16_tile_emulated;
    if (a.dtype == DType::f32)
        run_b(m, n, k, static_cast<const float*>(a.data), a.layout, b, c, c_dtype, ldc, accumulate,
              ep, tile);
    else
        run_b(m, n, k, static_cast<const BFloat16*>(a.data), a.layout, b, c, c_dtype, ldc,
              accumulate, ep, tile);
}

}  // namespace ember::kernels::cpu

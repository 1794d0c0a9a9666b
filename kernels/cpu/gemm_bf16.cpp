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
#include "kernels/cpu/gemm_bf16_pack.h"
#include "kernels/cpu/gemm_bf16_tile.h"
#include "kernels/cpu/gemm_blocks.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

using namespace bf16_pack;
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

template <class T>
T from_f32(float v) {
    return T(v);
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

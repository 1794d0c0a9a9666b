// Fused attention a warp per row: the path for f32 and f64 (and for f16/bf16
// head dims the tensor-core kernels do not take, up to 256), the decode
// kernel for a few query rows against a long KV cache, and D = rowsum(dO ∘ O)
// for both backwards. Nothing of size Tq × Tk is stored.
//
// Math:    kernels/cuda/attention_tc.cu's, in the accumulation type (f32; f64
//          for f64), one key at a time: s = scale · q·k (a warp sum), m' =
//          max(m, s), l = l·e^(m − m') + e^(s − m'), o = o·e^(m − m') +
//          dropout(e^(s − m'))·v. Backward per (row, key): p = e^(s − lse),
//          dp = dO·v, ds = p (dp − D); dq += ds·k (a warp per row) and
//          dv += dropout(p)·dO, dk += ds·q (a warp per key): no atomics.
// Layout:  a lane holds dims lane, lane + 32, ... (kPer of them); warp sums
//          are xor butterflies, so every result is deterministic.
// Decode:  Tq <= kDecodeRows (one token against the cache): a block per
//          (head, split of the keys), its 4 warps on quarters of the split,
//          merged in shared memory; the splits' (m, l, o) merged in order by
//          a second kernel (flash-decoding). kernels/cuda/attention_plan.h.
// Bytes:   forward: K and V read once per query row (from L2 for nearby
//          rows); decode: K and V once. FLOPs as the tensor-core kernels'.
// perf:    CUDA cores only; a warp sum per dot product.
// Test:    tests/cuda/test_cuda_attention.cpp.
#include <cmath>
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/workspace.h"

namespace ember::kernels::cuda {

namespace {

using math::Acc;

template <class A>
__device__ __forceinline__ A warp_sum(A x) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

template <class A>
__device__ __forceinline__ A scale_of(const AttnScalars& a) {
    if constexpr (std::is_same_v<A, double>)
        return a.scale64;
    else
        return a.scale;
}

// 1 / (1 − p) in the accumulation type.
template <class A>
__device__ __forceinline__ A keep_scale_of(const AttnScalars& a) {
    if constexpr (std::is_same_v<A, double>)
        return a.keep_scale64;
    else
        return a.keep_scale;
}

// A row of n values of head bh into this lane's registers (0 past n).
template <class T, int kPer>
__device__ __forceinline__ void load_row(Acc<T> (&r)[kPer], const Heads& h, int64_t bh, int64_t t,
                                         int64_t n, int lane) {
    const T* p = h.row<T>(bh, t);
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
        const int64_t i = 32 * c + lane;
        r[c] = i < n ? math::load(p[i]) : Acc<T>(0);
    }
}

template <class T, int kPer>
__device__ __forceinline__ Acc<T> dot_row(const Acc<T> (&x)[kPer], const Heads& h, int64_t bh,
                                          int64_t t, int64_t n, int lane) {
    const T* p = h.row<T>(bh, t);
    Acc<T> s = 0;
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
        const int64_t i = 32 * c + lane;
        if (i < n) s += x[c] * math::load(p[i]);
    }
    return warp_sum(s);
}

// The running state of one row: max, sum of exps, unnormalized output.
template <class A, int kPer>
struct RowState {
    A m, l;
    A o[kPer];
};

template <class A, int kPer>
__device__ __forceinline__ RowState<A, kPer> empty_state() {
    RowState<A, kPer> st;
    st.m = -INFINITY;
    st.l = 0;
#pragma unroll
    for (int c = 0; c < kPer; ++c) st.o[c] = 0;
    return st;
}

// Merges b into a (e^(m − m') each; an empty side contributes nothing).
template <class A, int kPer>
__device__ __forceinline__ void merge(RowState<A, kPer>& a, const RowState<A, kPer>& b) {
    const A m = a.m > b.m ? a.m : b.m;
    if (m == A(-INFINITY)) return;
    const A fa = math::exp_nonpositive(a.m - m), fb = math::exp_nonpositive(b.m - m);
    a.m = m;
    a.l = a.l * fa + b.l * fb;
#pragma unroll
    for (int c = 0; c < kPer; ++c) a.o[c] = a.o[c] * fa + b.o[c] * fb;
}

// Row `row` of head bh over keys [kb, ke) (those it sees), into st.
template <class T, int kPer>
__device__ void row_over_keys(RowState<Acc<T>, kPer>& st, const Acc<T> (&qr)[kPer],
                              const AttentionShape& s, const Heads& k, const Heads& v, int64_t bh,
                              int64_t row, int64_t kb, int64_t ke, const AttnScalars& a, int lane) {
    using A = Acc<T>;
    ke = std::min(ke, visible_keys(s, row));
    for (int64_t key = kb; key < ke; ++key) {
        const A x = dot_row<T, kPer>(qr, k, bh, key, s.d, lane) * scale_of<A>(a);
        const A mnew = st.m > x ? st.m : x;
        const A alpha = math::exp_nonpositive(st.m - mnew), p = math::exp_nonpositive(x - mnew);
        st.l = st.l * alpha + p;
        A kept = p;
        if (a.dropout_p > 0) kept = attn_keep(a, s, bh, row, key) ? p * keep_scale_of<A>(a) : A(0);
        const T* vr = v.row<T>(bh, key);
#pragma unroll
        for (int c = 0; c < kPer; ++c) {
            const int64_t i = 32 * c + lane;
            st.o[c] = st.o[c] * alpha + (i < s.dv ? kept * math::load(vr[i]) : A(0));
        }
        st.m = mnew;
    }
}

// out and lse of one row from its final state.
template <class T, int kPer>
__device__ void write_row(const RowState<Acc<T>, kPer>& st, const Heads& out, Acc<T>* lse,
                          const AttentionShape& s, int64_t bh, int64_t row, int lane) {
    using A = Acc<T>;
    const A inv = A(1) / st.l;
    T* dst = out.row<T>(bh, row);
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
        const int64_t i = 32 * c + lane;
        if (i < s.dv) dst[i] = math::cast<T>(st.o[c] * inv);
    }
    if (lane == 0) lse[bh * s.tq + row] = st.m + std::log(st.l);
}

template <class T, int kPer>
__global__ void forward_rows(AttentionShape s, int64_t row_tiles, Heads out, Acc<T>* lse, Heads q,
                             Heads k, Heads v, AttnScalars a) {
    const BlockTile bt = block_tile(blockIdx.x, s.bh, row_tiles, s.causal);
    const int lane = threadIdx.x % 32;
    const int64_t row = bt.tile * kRowWarps + threadIdx.x / 32;
    if (row >= s.tq) return;
    Acc<T> qr[kPer];
    load_row<T, kPer>(qr, q, bt.bh, row, s.d, lane);
    RowState<Acc<T>, kPer> st = empty_state<Acc<T>, kPer>();
    row_over_keys<T, kPer>(st, qr, s, k, v, bt.bh, row, 0, s.tk, a, lane);
    write_row<T, kPer>(st, out, lse, s, bt.bh, row, lane);
}

// Decode: block (head, split); each query row's partial (m, l, o) over the
// split's keys, its warps' quarters merged in order by warp 0.
template <class T, int kPer>
__global__ void decode_split(AttentionPlan p, Acc<T>* part, Heads q, Heads k, Heads v,
                             AttnScalars a) {
    using A = Acc<T>;
    using State = RowState<A, kPer>;
    __shared__ A ml[kDecodeWarps][2];
    __shared__ A os[kDecodeWarps][kPer][32];
    const AttentionShape& s = p.shape;
    const int64_t bh = blockIdx.x / p.splits, split = blockIdx.x % p.splits;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const KeyRange keys = decode_keys(p, split);
    const int64_t quarter = ceil_div(keys.end - keys.begin, kDecodeWarps);
    const int64_t kb = keys.begin + warp * quarter, ke = std::min(keys.end, kb + quarter);
    for (int64_t row = 0; row < s.tq; ++row) {
        A qr[kPer];
        load_row<T, kPer>(qr, q, bh, row, s.d, lane);
        State st = empty_state<A, kPer>();
        row_over_keys<T, kPer>(st, qr, s, k, v, bh, row, kb, ke, a, lane);
        __syncthreads();  // warp 0 has read the previous row's states
        if (lane == 0) {
            ml[warp][0] = st.m;
            ml[warp][1] = st.l;
        }
#pragma unroll
        for (int c = 0; c < kPer; ++c) os[warp][c][lane] = st.o[c];
        __syncthreads();
        if (warp != 0) continue;
        for (int w = 1; w < kDecodeWarps; ++w) {
            State other;
            other.m = ml[w][0];
            other.l = ml[w][1];
#pragma unroll
            for (int c = 0; c < kPer; ++c) other.o[c] = os[w][c][lane];
            merge(st, other);
        }
        A* slot = part + ((bh * s.tq + row) * p.splits + split) * (2 + s.dv);
        if (lane == 0) {
            slot[0] = st.m;
            slot[1] = st.l;
        }
#pragma unroll
        for (int c = 0; c < kPer; ++c)
            if (32 * c + lane < s.dv) slot[2 + 32 * c + lane] = st.o[c];
    }
}

// Decode: a warp per (head, row) merges the splits' partials in order.
template <class T, int kPer>
__global__ void decode_combine(AttentionPlan p, const Acc<T>* part, Heads out, Acc<T>* lse) {
    using A = Acc<T>;
    const AttentionShape& s = p.shape;
    const int lane = threadIdx.x % 32;
    const int64_t item = int64_t(blockIdx.x) * kDecodeWarps + threadIdx.x / 32;
    if (item >= s.bh * s.tq) return;
    const int64_t bh = item / s.tq, row = item % s.tq;
    RowState<A, kPer> st = empty_state<A, kPer>();
    for (int64_t split = 0; split < p.splits; ++split) {
        const A* slot = part + (item * p.splits + split) * (2 + s.dv);
        RowState<A, kPer> other;
        other.m = slot[0];
        other.l = slot[1];
#pragma unroll
        for (int c = 0; c < kPer; ++c)
            other.o[c] = 32 * c + lane < s.dv ? slot[2 + 32 * c + lane] : A(0);
        merge(st, other);
    }
    write_row<T, kPer>(st, out, lse, s, bh, row, lane);
}

// D = rowsum(dO ∘ out) for every row: a warp per row.
template <class T, int kPer>
__global__ void row_dots(AttentionShape s, Acc<T>* rowd, Heads g, Heads out) {
    const int lane = threadIdx.x % 32;
    const int64_t item = int64_t(blockIdx.x) * kRowWarps + threadIdx.x / 32;
    if (item >= s.bh * s.tq) return;
    const int64_t bh = item / s.tq, row = item % s.tq;
    Acc<T> gr[kPer];
    load_row<T, kPer>(gr, g, bh, row, s.dv, lane);
    const Acc<T> d = dot_row<T, kPer>(gr, out, bh, row, s.dv, lane);
    if (lane == 0) rowd[item] = d;
}

// dq of one row (a warp), over the keys it sees.
template <class T, int kPer>
__global__ void dq_rows(AttentionShape s, int64_t row_tiles, Heads dq, Heads g, Heads q, Heads k,
                        Heads v, const Acc<T>* lse, const Acc<T>* rowd, AttnScalars a) {
    using A = Acc<T>;
    const BlockTile bt = block_tile(blockIdx.x, s.bh, row_tiles, s.causal);
    const int lane = threadIdx.x % 32;
    const int64_t row = bt.tile * kRowWarps + threadIdx.x / 32;
    if (row >= s.tq) return;
    A qr[kPer], gr[kPer], acc[kPer] = {};
    load_row<T, kPer>(qr, q, bt.bh, row, s.d, lane);
    load_row<T, kPer>(gr, g, bt.bh, row, s.dv, lane);
    const A l = lse[bt.bh * s.tq + row], d = rowd[bt.bh * s.tq + row], sc = scale_of<A>(a);
    const int64_t keys = visible_keys(s, row);
    for (int64_t key = 0; key < keys; ++key) {
        const A p = math::exp_nonpositive(dot_row<T, kPer>(qr, k, bt.bh, key, s.d, lane) * sc - l);
        A dp = dot_row<T, kPer>(gr, v, bt.bh, key, s.dv, lane);
        if (a.dropout_p > 0) dp = attn_keep(a, s, bt.bh, row, key) ? dp * keep_scale_of<A>(a) : A(0);
        const A ds = p * (dp - d);
        const T* kr = k.row<T>(bt.bh, key);
#pragma unroll
        for (int c = 0; c < kPer; ++c)
            if (32 * c + lane < s.d) acc[c] += ds * math::load(kr[32 * c + lane]);
    }
    T* dst = dq.row<T>(bt.bh, row);
#pragma unroll
    for (int c = 0; c < kPer; ++c)
        if (32 * c + lane < s.d) dst[32 * c + lane] = math::cast<T>(acc[c] * sc);
}

// dk and dv of one key (a warp), over the rows that see it.
template <class T, int kPer>
__global__ void dkv_rows(AttentionShape s, int64_t key_tiles, Heads dk, Heads dv, Heads g, Heads q,
                         Heads k, Heads v, const Acc<T>* lse, const Acc<T>* rowd, AttnScalars a) {
    using A = Acc<T>;
    const BlockTile bt = block_tile(blockIdx.x, s.bh, key_tiles, false);
    const int lane = threadIdx.x % 32;
    const int64_t key = bt.tile * kRowWarps + threadIdx.x / 32;
    if (key >= s.tk) return;
    A kr[kPer], vr[kPer], dka[kPer] = {}, dva[kPer] = {};
    load_row<T, kPer>(kr, k, bt.bh, key, s.d, lane);
    load_row<T, kPer>(vr, v, bt.bh, key, s.dv, lane);
    const A sc = scale_of<A>(a);
    for (int64_t row = s.causal ? key : 0; row < s.tq; ++row) {
        const int64_t i = bt.bh * s.tq + row;
        const A p = math::exp_nonpositive(dot_row<T, kPer>(kr, q, bt.bh, row, s.d, lane) * sc - lse[i]);
        A dp = dot_row<T, kPer>(vr, g, bt.bh, row, s.dv, lane), kept = p;
        if (a.dropout_p > 0) {
            const bool keep = attn_keep(a, s, bt.bh, row, key);
            kept = keep ? p * keep_scale_of<A>(a) : A(0);
            dp = keep ? dp * keep_scale_of<A>(a) : A(0);
        }
        const A ds = p * (dp - rowd[i]);
        const T* qr = q.row<T>(bt.bh, row);
        const T* gr = g.row<T>(bt.bh, row);
#pragma unroll
        for (int c = 0; c < kPer; ++c) {
            const int64_t j = 32 * c + lane;
            if (j < s.dv) dva[c] += kept * math::load(gr[j]);
            if (j < s.d) dka[c] += ds * math::load(qr[j]);
        }
    }
    T* dkr = dk.row<T>(bt.bh, key);
    T* dvr = dv.row<T>(bt.bh, key);
#pragma unroll
    for (int c = 0; c < kPer; ++c) {
        const int64_t j = 32 * c + lane;
        if (j < s.d) dkr[j] = math::cast<T>(dka[c] * sc);
        if (j < s.dv) dvr[j] = math::cast<T>(dva[c]);
    }
}

// Calls f(std::integral_constant<int, kPer>) for the lanes' dims of max(D, Dv).
template <class F>
void visit_per(const AttentionShape& s, F&& f) {
    const int64_t n = std::max(s.d, s.dv);
    if (n <= 32) return f(std::integral_constant<int, 1>{});
    if (n <= 64) return f(std::integral_constant<int, 2>{});
    if (n <= 128) return f(std::integral_constant<int, 4>{});
    return f(std::integral_constant<int, 8>{});
}

unsigned blocks_of(int64_t items, int per_block) { return unsigned(ceil_div(items, per_block)); }

// Calls f(T{}) for the element type of dt.
template <class F>
void with_attention_dtype(DType dt, F&& f) {
    switch (dt) {
        case DType::f32:
            return f(float{});
        case DType::f64:
            return f(double{});
        case DType::f16:
            return f(Half{});
        case DType::bf16:
            return f(BFloat16{});
        default:
            EMBER_FAIL("internal error: fused attention got dtype ", dtype_name(dt));
    }
}

}  // namespace

void attention_forward_rows(const AttentionPlan& p, DType dt, const Heads& out, void* lse,
                            const Heads& q, const Heads& k, const Heads& v, const AttnScalars& a,
                            StreamRef stream) {
    if (p.grid == 0) return;
    with_attention_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        using A = Acc<T>;
        visit_per(p.shape, [&](auto per) {
            constexpr int kPer = decltype(per)::value;
            if (p.path == AttentionPath::decode) {
                const int64_t rows = p.shape.bh * p.shape.tq;
                const Workspace part(stream, size_t(rows * p.splits * (2 + p.shape.dv)) * sizeof(A));
                decode_split<T, kPer><<<unsigned(p.grid), p.threads, 0, stream.handle>>>(
                    p, part.as<A>(), q, k, v, a);
                EMBER_CUDA_CHECK(cudaGetLastError());
                decode_combine<T, kPer><<<blocks_of(rows, kDecodeWarps), 32 * kDecodeWarps, 0,
                                          stream.handle>>>(p, part.as<A>(), out,
                                                           static_cast<A*>(lse));
            } else {
                forward_rows<T, kPer><<<unsigned(p.grid), p.threads, 0, stream.handle>>>(
                    p.shape, p.row_tiles, out, static_cast<A*>(lse), q, k, v, a);
            }
            EMBER_CUDA_CHECK(cudaGetLastError());
        });
    });
}

void attention_row_dots(const AttentionShape& s, DType dt, void* rowd, const Heads& g,
                        const Heads& out, StreamRef stream) {
    if (s.bh * s.tq == 0) return;
    with_attention_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        visit_per(s, [&](auto per) {
            row_dots<T, decltype(per)::value>
                <<<blocks_of(s.bh * s.tq, kRowWarps), 32 * kRowWarps, 0, stream.handle>>>(
                    s, static_cast<Acc<T>*>(rowd), g, out);
            EMBER_CUDA_CHECK(cudaGetLastError());
        });
    });
}

void attention_backward_rows(const AttentionPlan& p, DType dt, const Heads& dq, const Heads& dk,
                             const Heads& dv, const Heads& g, const Heads& q, const Heads& k,
                             const Heads& v, const void* lse, const void* rowd,
                             const AttnScalars& a, StreamRef stream) {
    if (p.grid == 0) return;
    with_attention_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        using A = Acc<T>;
        const A* l = static_cast<const A*>(lse);
        const A* d = static_cast<const A*>(rowd);
        visit_per(p.shape, [&](auto per) {
            constexpr int kPer = decltype(per)::value;
            dq_rows<T, kPer><<<unsigned(p.grid), p.threads, 0, stream.handle>>>(
                p.shape, p.row_tiles, dq, g, q, k, v, l, d, a);
            EMBER_CUDA_CHECK(cudaGetLastError());
            dkv_rows<T, kPer><<<unsigned(p.grid_kv), p.threads, 0, stream.handle>>>(
                p.shape, p.key_tiles, dk, dv, g, q, k, v, l, d, a);
            EMBER_CUDA_CHECK(cudaGetLastError());
        });
    });
}

}  // namespace ember::kernels::cuda

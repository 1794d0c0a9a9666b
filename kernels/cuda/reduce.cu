// CUDA reductions over the middle dim of a dense [outer, size, inner] buffer;
// CPU twin: kernels/cpu/reduce.cpp.
// Math: sum; mean = sum / size; norm = sum |x|, sqrt(sum x^2), max |x|;
//   var = sum (x - mean)^2 / max(0, size - correction) in two passes (the means,
//   then the squares), std = sqrt(var); amax / amin (a NaN wins); max / min with
//   the index of the first extreme (the first NaN wins).
// Dtypes as the twin: f16/bf16 accumulate in f32, f64 in f64, integer and bool
//   sums in i64 (wrapping).
// Bytes: outer*size*inner*sizeof(in) + outer*inner*sizeof(out) (var/std read the
//   input twice); FLOPs: ~1 per input element (norm 2, var 4).
// Launch (kernels/cuda/reduce_plan.h): inner == 1: a warp per (row, chunk), two
//   leaves of 256 at a time, 8 warps a block (a half-warp per row for rows of at
//   most 256); inner > 1: a thread per (column, part), coalesced across columns,
//   (256 / Y, Y) blocks whose Y threads split a column, grid.y chunks. Outputs
//   too few to fill the device are cut into chunks along size; a second launch
//   (a block per output) folds their partials.
// Deterministic: the combine order is fixed, and it is the CPU's (Note [Reduction
//   order]): sums and means are bit-identical to the CPU's; norm and var may
//   differ by FMA contraction (a few ulp).
// Test: tests/cuda/test_cuda_reduce.cpp and the op table (tests/cuda/test_cuda_ops.cpp);
//   plan: tests/kernels/test_reduce_plan.cpp; bench: `ember bench reduce`.
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/reduce_plan.h"
#include "kernels/cuda/workspace.h"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

using math::cast;

// ---- Ops: Acc, init(), map(v, k, i) of element i of output k, combine(a, b), store(k, acc) ----

template <class A>
EMBER_HD A lowest() {
    if constexpr (std::numeric_limits<A>::has_infinity)
        return -std::numeric_limits<A>::infinity();
    else
        return std::numeric_limits<A>::lowest();
}
template <class A>
EMBER_HD A highest() {
    if constexpr (std::numeric_limits<A>::has_infinity)
        return std::numeric_limits<A>::infinity();
    else
        return std::numeric_limits<A>::max();
}

template <class T, class A, class Out>
struct SumOp {
    using Acc = A;
    Out* out;
    __device__ A init() const { return A(0); }
    __device__ A map(T v, int64_t, int64_t) const { return cast<A>(v); }
    __device__ A combine(A a, A b) const {
        if constexpr (std::is_integral_v<A>)
            return A(uint64_t(a) + uint64_t(b));  // wraps, as the CPU's
        else
            return a + b;
    }
    __device__ void store(int64_t k, A a) const { out[k] = cast<Out>(a); }
};

template <class T, class A, class Out>
struct MeanOp : SumOp<T, A, Out> {
    A count;
    __device__ void store(int64_t k, A a) const { this->out[k] = cast<Out>(a / count); }
};

template <class T, class A>
struct AbsSumOp : SumOp<T, A, T> {  // the 1-norm
    __device__ A map(T v, int64_t, int64_t) const { return math::Abs{}(cast<A>(v)); }
};

template <class T, class A>
struct SqSumOp : SumOp<T, A, T> {  // the 2-norm
    __device__ A map(T v, int64_t, int64_t) const {
        const A x = cast<A>(v);
        return x * x;
    }
    __device__ void store(int64_t k, A a) const { this->out[k] = cast<T>(std::sqrt(a)); }
};

template <class T, class A>
struct SqDevOp : SumOp<T, A, T> {  // sum (x - center[k])^2, stored as var or std
    const A* center;
    A divisor;
    bool root;
    __device__ A map(T v, int64_t k, int64_t) const {
        const A d = cast<A>(v) - center[k];
        return d * d;
    }
    __device__ void store(int64_t k, A a) const {
        const A v = a / divisor;
        this->out[k] = cast<T>(root ? std::sqrt(v) : v);
    }
};

// Extremes compare in f32 for f16/bf16 and as u8 for bool, as the CPU's.
template <class T>
using ExtremeAcc = std::conditional_t<math::is_half_v<T>, float,
                                      std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;


/// amax / amin (NaN wins); with Abs, max |x| (the inf-norm, 0 when empty).
template <class T, bool IsMax, bool Abs = false>
struct ExtremeOp {
    using A = ExtremeAcc<T>;
    using Acc = A;
    T* out;
    __device__ A init() const { return Abs ? A(0) : IsMax ? lowest<A>() : highest<A>(); }
    __device__ A map(T v, int64_t, int64_t) const {
        if constexpr (Abs)
            return math::Abs{}(cast<A>(v));
        else
            return cast<A>(v);
    }
    __device__ A combine(A a, A b) const { return IsMax ? nan_max(a, b) : nan_min(a, b); }
    __device__ void store(int64_t k, A a) const { out[k] = cast<T>(a); }
};

template <class A>
struct ArgAcc {
    A value;
    int64_t index;
};

/// max / min with the first index: the better value, a NaN beating any number;
/// between equal values (or two NaNs) the lower index. A total order, so any
/// grouping gives the CPU's answer.
template <class T, bool IsMax>
struct ArgOp {
    using A = ExtremeAcc<T>;
    using Acc = ArgAcc<A>;
    const T* x;
    T* values;  // null: indices only
    int64_t* indices;
    int64_t size, inner;
    __device__ Acc init() const {
        return {IsMax ? lowest<A>() : highest<A>(), std::numeric_limits<int64_t>::max()};
    }
    __device__ Acc map(T v, int64_t, int64_t i) const { return {cast<A>(v), i}; }
    __device__ static bool better(A v, A best) {
        return (IsMax ? v > best : v < best) || (v != v && best == best);
    }
    __device__ Acc combine(Acc a, Acc b) const {
        const bool tie = a.value == b.value || (a.value != a.value && b.value != b.value);
        return (better(b.value, a.value) || (tie && b.index < a.index)) ? b : a;
    }
    __device__ void store(int64_t k, Acc a) const {
        indices[k] = a.index;
        if (values) {
            const int64_t o = k / inner, j = k - o * inner;
            values[k] = x[(o * size + a.index) * inner + j];  // the element itself (NaN bits too)
        }
    }
};

// ---- Kernels ----

/// Lane `lane` (0..15) of a leaf's half-warp: the fold of elements begin + lane,
/// begin + lane + 16, ... below end of output k's row.
template <class Op, class T>
__device__ __forceinline__ typename Op::Acc lane_fold(const Op& op, const T* row, int64_t k,
                                                      ReduceRange leaf, int lane) {
    typename Op::Acc a = op.init();
    if (leaf.end - leaf.begin == kReduceRowLeaf) {
        constexpr int kTerms = int(kReduceRowLeaf / kReduceLanes);
        T v[kTerms];
#pragma unroll
        for (int j = 0; j < kTerms; ++j) v[j] = row[leaf.begin + lane + kReduceLanes * j];
#pragma unroll
        for (int j = 0; j < kTerms; ++j)
            a = op.combine(a, op.map(v[j], k, leaf.begin + lane + kReduceLanes * j));
    } else {
        for (int64_t i = leaf.begin + lane; i < leaf.end; i += kReduceLanes)
            a = op.combine(a, op.map(row[i], k, i));
    }
    return a;
}

/// The 16 lanes of each half-warp as a tree (lane l with l + 8, + 4, + 2, + 1):
/// lanes 0 and 16 end with their leaf's result. Every lane must call it.
template <class Op, class A>
__device__ __forceinline__ A lane_tree(A v, const Op& op) {
#pragma unroll
    for (int w = kReduceLanes / 2; w > 0; w /= 2) v = op.combine(v, shfl_down(v, w));
    return v;
}

/// inner == 1: a warp per work item (Note [Reduction order]).
template <class Op, class T>
__global__ void __launch_bounds__(kReduceBlock)
    rows_kernel(const T* __restrict__ x, ReducePlan p, Op op, typename Op::Acc* part) {
    using A = typename Op::Acc;
    constexpr int kWarps = kReduceBlock / kWarp;
    const int lane = int(threadIdx.x) % kWarp, half = lane / kReduceLanes;
    const int lane16 = lane % kReduceLanes;
    const int64_t stride = int64_t(gridDim.x) * kWarps;
    TreeStack<A> stack;  // lane 0's
    for (int64_t w = int64_t(blockIdx.x) * kWarps + threadIdx.x / kWarp; w < p.work; w += stride) {
        if (p.two_rows) {  // one leaf a row: a row per half-warp
            const int64_t row = 2 * w + half;
            A a = op.init();
            if (row < p.items) a = lane_fold(op, x + row * p.size, row, {0, p.size}, lane16);
            a = lane_tree(a, op);
            if (lane16 == 0 && row < p.items) op.store(row, a);
            continue;
        }
        const RowItem it = row_item(p, w);
        const T* row = x + it.row * p.size;
        stack.count = 0;
        // Pairs of leaves (a chunk starts at an even leaf): one per half-warp.
        for (int64_t pair = it.leaves.begin; pair < it.leaves.end; pair += 2) {
            const int64_t leaf = pair + half;
            A a = op.init();
            if (leaf < it.leaves.end) a = lane_fold(op, row, it.row, row_leaf(p, leaf), lane16);
            a = lane_tree(a, op);
            a = op.combine(a, shfl_down(a, kReduceLanes));  // leaf pair, then leaf pair + 1
            if (lane == 0) stack.push(a, op);
        }
        if (lane == 0) {
            const A r = stack.result(op);
            if (p.chunks == 1)
                op.store(it.row, r);
            else
                part[w] = r;  // w = row * chunks + chunk
        }
    }
}

/// inner > 1: thread (x, y) folds part y of chunk blockIdx.y of one column;
/// the block's y threads combine as a tree.
template <class Op, class T>
__global__ void __launch_bounds__(kReduceBlock)
    cols_kernel(const T* __restrict__ x, ReducePlan p, Op op, typename Op::Acc* part) {
    using A = typename Op::Acc;
    __shared__ A tile[kReduceBlock];
    const int tx = int(threadIdx.x), ty = int(threadIdx.y), bx = p.block_x;
    const int64_t chunk = blockIdx.y;
    const ReduceRange leaves = col_part(p, chunk, ty);
    for (int64_t b = blockIdx.x; b * bx < p.items; b += gridDim.x) {
        const int64_t k = b * bx + tx;
        A a = op.init();
        if (k < p.items) {
            const int64_t o = k / p.inner, j = k - o * p.inner;
            const T* col = x + o * p.size * p.inner + j;
            TreeStack<A> stack;
            for (int64_t leaf = leaves.begin; leaf < leaves.end; ++leaf) {
                const ReduceRange r = col_leaf(p, leaf);
                A v = op.init();
                if (r.end - r.begin == kReduceColLeaf) {
                    T t[kReduceColLeaf];
#pragma unroll
                    for (int i = 0; i < int(kReduceColLeaf); ++i) t[i] = col[(r.begin + i) * p.inner];
#pragma unroll
                    for (int i = 0; i < int(kReduceColLeaf); ++i) v = op.combine(v, op.map(t[i], k, r.begin + i));
                } else {
                    for (int64_t i = r.begin; i < r.end; ++i) v = op.combine(v, op.map(col[i * p.inner], k, i));
                }
                stack.push(v, op);
            }
            a = stack.result(op);
        }
        tile[ty * bx + tx] = a;
        __syncthreads();
        for (int s = 1; s < p.block_y; s *= 2) {  // block_y is a power of two
            if (ty % (2 * s) == 0)
                tile[ty * bx + tx] = op.combine(tile[ty * bx + tx], tile[(ty + s) * bx + tx]);
            __syncthreads();
        }
        if (ty == 0 && k < p.items) {
            if (p.chunks == 1)
                op.store(k, tile[tx]);
            else
                part[k * p.chunks + chunk] = tile[tx];
        }
        __syncthreads();  // the tile is read before the next columns overwrite it
    }
}

/// Folds each output's chunk partials: thread t its combine_range, then the
/// warp and the block as trees, in chunk order.
template <class Op>
__global__ void __launch_bounds__(kReduceCombineBlock)
    combine_kernel(const typename Op::Acc* __restrict__ part, ReducePlan p, Op op) {
    using A = typename Op::Acc;
    constexpr int kWarps = kReduceCombineBlock / kWarp;
    __shared__ A warp_result[kWarps];
    const int t = int(threadIdx.x), lane = t % kWarp;
    const ReduceRange mine = combine_range(p, t);
    for (int64_t k = blockIdx.x; k < p.items; k += gridDim.x) {
        TreeStack<A> stack;
        for (int64_t c = mine.begin; c < mine.end; ++c) stack.push(part[k * p.chunks + c], op);
        A v = stack.result(op);
#pragma unroll
        for (int off = 1; off < kWarp; off *= 2) v = op.combine(v, shfl_down(v, off));
        if (lane == 0) warp_result[t / kWarp] = v;
        __syncthreads();
        if (t == 0) {
            for (int s = 1; s < kWarps; s *= 2)
                for (int i = 0; i + s < kWarps; i += 2 * s)
                    warp_result[i] = op.combine(warp_result[i], warp_result[i + s]);
            op.store(k, warp_result[0]);
        }
        __syncthreads();
    }
}

/// Reduces `in` ([outer, size, inner], dense) with op, which stores the outputs.
template <class T, class Op>
void reduce(const View& in, ReduceShape s, const Op& op, StreamRef stream) {
    using A = typename Op::Acc;
    EMBER_INTERNAL_ASSERT(in.is_contiguous() && in.numel() == s.outer * s.size * s.inner);
    if (s.outer * s.inner == 0) return;
    const ReducePlan p = plan_reduce(s, CudaContext::of(stream.device).properties().sm_count);
    EMBER_INTERNAL_ASSERT(p.leaves < (int64_t(1) << kReduceStackLevels));
    const Workspace part(stream, p.chunks > 1 ? sizeof(A) * size_t(p.items * p.chunks) : 0);
    const T* x = in.ptr<const T>();
    if (p.rows) {
        rows_kernel<<<unsigned(p.grid_x), kReduceBlock, 0, stream.handle>>>(x, p, op, part.as<A>());
    } else {
        const dim3 grid(unsigned(p.grid_x), unsigned(p.grid_y)), block(p.block_x, p.block_y);
        cols_kernel<<<grid, block, 0, stream.handle>>>(x, p, op, part.as<A>());
    }
    EMBER_CUDA_CHECK(cudaGetLastError());
    if (p.chunks > 1) {
        const unsigned blocks = unsigned(std::min(p.items, kReduceMaxGrid));
        combine_kernel<<<blocks, kReduceCombineBlock, 0, stream.handle>>>(part.as<A>(), p, op);
        EMBER_CUDA_CHECK(cudaGetLastError());
    }
}

void check_views(const View& out, const View& in, ReduceShape s) {
    EMBER_INTERNAL_ASSERT(out.is_contiguous() && out.numel() == s.outer * s.inner);
    EMBER_INTERNAL_ASSERT(in.is_contiguous() && in.numel() == s.outer * s.size * s.inner);
}

template <class T>
void var_impl(const View& out, const View& in, ReduceShape s, double correction, bool root,
              StreamRef stream) {
    using A = math::Acc<T>;
    check_views(out, in, s);
    const Workspace means(stream, sizeof(A) * size_t(s.outer * s.inner));
    reduce<T>(in, s, MeanOp<T, A, A>{{means.as<A>()}, A(s.size)}, stream);
    const A divisor = A(std::max(0.0, double(s.size) - correction));
    reduce<T>(in, s, SqDevOp<T, A>{{out.ptr<T>()}, means.as<A>(), divisor, root}, stream);
}

template <bool IsMax>
void extreme(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    check_views(out, in, s);
    visit_dtype(in.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        reduce<T>(in, s, ExtremeOp<T, IsMax>{out.ptr<T>()}, stream);
    });
}

template <bool IsMax>
void extreme_index(const View& values, const View& indices, const View& in, ReduceShape s,
                   StreamRef stream) {
    EMBER_INTERNAL_ASSERT(s.size > 0 && indices.dtype == DType::i64 &&
                          indices.numel() == s.outer * s.inner);
    visit_dtype(in.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        T* val = values.data ? values.ptr<T>() : nullptr;
        reduce<T>(in, s,
                  ArgOp<T, IsMax>{in.ptr<const T>(), val, indices.ptr<int64_t>(), s.size, s.inner},
                  stream);
    });
}

}  // namespace

void sum(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    check_views(out, in, s);
    visit_dtype(in.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (math::is_float_v<T>) {
            reduce<T>(in, s, SumOp<T, math::Acc<T>, T>{out.ptr<T>()}, stream);
        } else {
            EMBER_INTERNAL_ASSERT(out.dtype == DType::i64);
            reduce<T>(in, s, SumOp<T, int64_t, int64_t>{out.ptr<int64_t>()}, stream);
        }
    });
}

void mean(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    check_views(out, in, s);
    visit_floating(in.dtype, "mean", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        reduce<T>(in, s, MeanOp<T, A, T>{{out.ptr<T>()}, A(s.size)}, stream);
    });
}

void norm(const View& out, const View& in, ReduceShape s, double p, StreamRef stream) {
    check_views(out, in, s);
    EMBER_CHECK(p == 1 || p == 2 || (std::isinf(p) && p > 0), "norm: p must be 1, 2 or inf, got ", p);
    visit_floating(in.dtype, "norm", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        if (p == 1)
            reduce<T>(in, s, AbsSumOp<T, A>{{out.ptr<T>()}}, stream);
        else if (p == 2)
            reduce<T>(in, s, SqSumOp<T, A>{{out.ptr<T>()}}, stream);
        else
            reduce<T>(in, s, ExtremeOp<T, true, true>{out.ptr<T>()}, stream);
    });
}

void var(const View& out, const View& in, ReduceShape s, double correction, StreamRef stream) {
    visit_floating(in.dtype, "var", [&](auto tag) {
        var_impl<typename decltype(tag)::type>(out, in, s, correction, false, stream);
    });
}

void std(const View& out, const View& in, ReduceShape s, double correction, StreamRef stream) {
    visit_floating(in.dtype, "std", [&](auto tag) {
        var_impl<typename decltype(tag)::type>(out, in, s, correction, true, stream);
    });
}

void amax(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    extreme<true>(out, in, s, stream);
}
void amin(const View& out, const View& in, ReduceShape s, StreamRef stream) {
    extreme<false>(out, in, s, stream);
}

void max(const View& values, const View& indices, const View& in, ReduceShape s,
         StreamRef stream) {
    extreme_index<true>(values, indices, in, s, stream);
}
void min(const View& values, const View& indices, const View& in, ReduceShape s,
         StreamRef stream) {
    extreme_index<false>(values, indices, in, s, stream);
}

}  // namespace ember::kernels::cuda

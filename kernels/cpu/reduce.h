// CPU reduction kernels on contiguous buffers seen as [outer, size, inner]
// (ReduceShape, kernels/reduce.h), and the pairwise-sum building block they
// share with softmax. The front (kernels/reduce.cpp) brings any tensor into
// this layout.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "loop.h"
#include "../math.h"
#include "../reduce_args.h"
#include "../reduce_order.h"
#include "../view.h"

namespace ember::kernels::cpu {

/// out = sum over `size`. Integer and bool inputs give an i64 out; floating
/// inputs give their own dtype (f16/bf16 accumulate in f32).
void sum(const View& out, const View& in, ReduceShape s);
/// out = sum / size (floating only).
void mean(const View& out, const View& in, ReduceShape s);
/// out = (sum |x|^p)^(1/p) for p = 1 or 2, max |x| for p = inf (floating only).
void norm(const View& out, const View& in, ReduceShape s, double p);
/// out = sum (x - mean)^2 / max(0, size - correction), two-pass (floating only).
void var(const View& out, const View& in, ReduceShape s, double correction);
/// out = sqrt(var).
void std(const View& out, const View& in, ReduceShape s, double correction);
/// Largest / smallest value (any dtype, out of the same dtype); a NaN wins.
void amax(const View& out, const View& in, ReduceShape s);
void amin(const View& out, const View& in, ReduceShape s);
/// Values (same dtype; skipped when values.data is null) and i64 indices of
/// the first max / min along `size`; the first NaN wins. size must be > 0.
void max(const View& values, const View& indices, const View& in, ReduceShape s);
void min(const View& values, const View& indices, const View& in, ReduceShape s);

// Note [Pairwise summation]
// A running f32 sum of n terms can be off by O(n) ulps (16M additions of 0.1f
// come out 15% high: past 2^20 each one rounds to 0.125). Sums here add the terms of each
// kLeaf-element leaf into kLanes independent accumulators (so the compiler vectorizes the loop),
// add the lanes as a tree, and add leaves as a binary tree whose left half is always a power-of-two
// number of leaves: error O(log n) ulps. Because of that split rule, a long row cut into
// kChunk-element chunks (a power of two number of leaves) and summed per chunk on different
// threads, then recombined with the same rule over the chunks, gives bit-identical results to the
// serial sum: results do not depend on the number of threads.

inline constexpr int kLanes = kReduceLanes;       // kernels/reduce_order.h, shared with CUDA
inline constexpr int64_t kLeaf = kReduceRowLeaf;  // elements per leaf: 16 terms per lane
inline constexpr int64_t kChunk = kLeaf << 8;  // elements per parallel chunk (65536)
// Exact ops compare and select, a longer dependency chain than an add: they
// use 64 lanes (4 registers) so that consecutive iterations do not wait.
inline constexpr int kExactLanes = 64;

/// Where the pairwise tree splits n > unit items: the largest power-of-two
/// multiple of `unit` below n.
inline int64_t tree_split(int64_t n, int64_t unit) {
    int64_t m = unit;
    while (2 * m < n) m *= 2;
    return m;
}

/// Reduction of op.map(x[i], k) for i < n (n <= kLeaf unless Op::kExact)
/// with op.combine, in lanes; k is the index of the output element (ops like
/// var need it).
template <class Op, class T>
typename Op::Acc leaf_reduce(const T* x, int64_t n, const Op& op, int64_t k) {
    using A = typename Op::Acc;
    constexpr int L = Op::kExact ? kExactLanes : kLanes;
    A acc[L];
    for (int l = 0; l < L; ++l) acc[l] = op.init();
    int64_t i = 0;
    for (; i + L <= n; i += L) {
        // The lanes are independent; the pragma lets GCC vectorize the
        // NaN-propagating max, which plain -O3 leaves scalar.
#pragma omp simd
        for (int l = 0; l < L; ++l) acc[l] = op.combine(acc[l], op.map(math::cast<A>(x[i + l]), k));
    }
    for (int l = 0; i < n; ++i, ++l) acc[l] = op.combine(acc[l], op.map(math::cast<A>(x[i]), k));
    for (int w = L / 2; w > 0; w /= 2)
        for (int l = 0; l < w; ++l) acc[l] = op.combine(acc[l], acc[l + w]);
    return acc[0];
}

/// Pairwise reduction of op.map(x[i], k) for i < n (Note [Pairwise summation]).
template <class Op, class T>
typename Op::Acc tree_reduce(const T* x, int64_t n, const Op& op, int64_t k = 0) {
    // Exact ops (max, min) round nothing: one leaf of any length, lanes merged once.
    if (n <= kLeaf || Op::kExact) return leaf_reduce(x, n, op, k);
    const int64_t m = tree_split(n, kLeaf);
    return op.combine(tree_reduce(x, m, op, k), tree_reduce(x + m, n - m, op, k));
}

/// Combines n partial results (of consecutive chunks) with the tree's split rule.
template <class Op>
typename Op::Acc tree_combine(const typename Op::Acc* part, int64_t n, const Op& op) {
    if (n == 1) return part[0];
    const int64_t m = tree_split(n, 1);
    return op.combine(tree_combine(part, m, op), tree_combine(part + m, n - m, op));
}

/// The sum as an Op for tree_reduce, in accumulation type A. An Op has:
/// init() (the identity), map(v, k) (the term for value v of output k),
/// combine(a, b) (associative), kExact (combine never rounds, so any grouping
/// gives the same result) and, for the kernels, finish(acc, k).
template <class A>
struct SumOp {
    using Acc = A;
    static constexpr bool kExact = false;
    A init() const { return A(0); }
    A map(A v, int64_t) const { return v; }
    A combine(A a, A b) const {
        // Integer sums wrap like PyTorch's instead of overflowing (undefined in C++).
        if constexpr (std::is_integral_v<A>)
            return A(uint64_t(a) + uint64_t(b));
        else
            return a + b;
    }
    A finish(A a, int64_t) const { return a; }
};

/// max / min where a NaN on either side wins.
template <class A>
A nan_max(A a, A b) {
    return (a > b || a != a) ? a : b;
}
template <class A>
A nan_min(A a, A b) {
    return (a < b || a != a) ? a : b;
}
/// -inf, or the lowest value of a type without infinities.
template <class A>
A lowest() {
    if constexpr (std::numeric_limits<A>::has_infinity)
        return -std::numeric_limits<A>::infinity();
    else
        return std::numeric_limits<A>::lowest();
}
/// +inf, or the largest value.
template <class A>
A highest() {
    if constexpr (std::numeric_limits<A>::has_infinity)
        return std::numeric_limits<A>::infinity();
    else
        return std::numeric_limits<A>::max();
}

/// amax / amin as an Op (NaN propagates); with Abs, max |x| (the inf-norm, 0 when empty).
template <class A, bool IsMax, bool Abs = false>
struct ExtremeOp {
    using Acc = A;
    static constexpr bool kExact = true;
    A init() const { return Abs ? A(0) : IsMax ? lowest<A>() : highest<A>(); }
    A map(A v, int64_t) const {
        if constexpr (Abs)
            return std::abs(v);
        else
            return v;
    }
    A combine(A a, A b) const { return IsMax ? nan_max(a, b) : nan_min(a, b); }
    A finish(A a, int64_t) const { return a; }
};

/// Runs body(begin, end) on contiguous slices of [0, items), one per OpenMP
/// thread, when `work` (elements touched) is worth the threads; else inline.
template <class F>
void parallel_ranges(int64_t items, int64_t work, F body) {
    if (items <= 0) return;
    if (items == 1 || work < kParallelGrain || omp_get_max_threads() == 1 || omp_in_parallel()) {
        body(int64_t(0), items);
        return;
    }
#pragma omp parallel
    {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t chunk = (items + nt - 1) / nt;
        const int64_t b = std::min(items, t * chunk), e = std::min(items, b + chunk);
        if (b < e) body(b, e);
    }
}

}  // namespace ember::kernels::cpu

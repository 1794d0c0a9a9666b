// CPU reductions over the middle dim of a contiguous [outer, size, inner] buffer.
//
// Math: sum x; mean = sum / size; norm = sum |x|, sqrt(sum x^2), max |x|;
//   var = sum (x - mean)^2 / max(0, size - correction), std = sqrt(var) (two-pass);
//   amax/amin; max/min with the index of the first extreme (NaN wins).
// Dtypes: sum/amax/amin/max/min take any dtype (integer and bool sums give i64);
//   the rest take floating dtypes. f16/bf16 accumulate in f32; f32 sums are
//   pairwise (Note [Pairwise summation] in kernels/cpu/reduce.h).
// Bytes: outer*size*inner*sizeof(in) + outer*inner*sizeof(out) (var/std read the
//   input twice unless a row fits the cache); FLOPs: about one per input element.
// Layout: inner == 1 reduces contiguous rows (vectorized lanes, threads over rows
//   or, for few long rows, over fixed chunks); inner > 1 works on kTile-wide
//   column strips, summing kLeafRows rows at a time in registers (vectorized
//   over the columns), then pairwise; few strips are cut into row chunks.
// Test: tests/kernels/test_reduce.cpp; benchmark: bench/reduce.cpp (`ember bench reduce`).
#include "kernels/cpu/reduce.h"

#include <cmath>
#include <limits>
#include <vector>

namespace ember::kernels::cpu {

namespace {

using math::cast;

// Columns per strip (8 KiB runs of each row; the accumulator row stays in L1),
// rows summed in registers before the pairwise tree, rows per parallel chunk.
inline constexpr int64_t kTile = 2048;
inline constexpr int64_t kLeafRows = kReduceColLeaf;  // kernels/reduce_order.h, shared with CUDA
inline constexpr int64_t kChunkRows = kLeafRows << 7;

int64_t threads() { return omp_get_max_threads(); }

// Extremes are exact in the input type; f16/bf16 compare in f32, and bool as
// u8 (std::vector<bool> has no data()).
template <class T>
using ExtremeAcc = std::conditional_t<math::is_half_v<T>, float,
                                      std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>>;

// ---- The ops (interface in kernels/cpu/reduce.h, beside SumOp) ----

template <class A>
struct MeanOp : SumOp<A> {
    A count;
    A finish(A a, int64_t) const { return a / count; }
};
template <class A>
struct AbsSumOp : SumOp<A> {
    A map(A v, int64_t) const { return std::abs(v); }
};
template <class A>
struct SqSumOp : SumOp<A> {  // the 2-norm
    A map(A v, int64_t) const { return v * v; }
    A finish(A a, int64_t) const { return std::sqrt(a); }
};
template <class A>
struct SqDevOp : SumOp<A> {  // sum (x - center[k])^2, finished as var or std
    const A* center;
    A divisor;
    bool root;
    A map(A v, int64_t k) const { return (v - center[k]) * (v - center[k]); }
    A finish(A a, int64_t) const { return root ? std::sqrt(a / divisor) : a / divisor; }
};

// ---- Engines ----

// Few rows (or strips) for many threads: split them into chunks as well.
bool split_into_chunks(int64_t items, int64_t chunks) {
    return chunks > 1 && items < 4 * threads();
}

// out[o] = finish(reduce of row o) for contiguous rows of length n.
template <class Out, class T, class Op>
void reduce_rows(const T* in, Out* out, int64_t rows, int64_t n, const Op& op) {
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    if (!split_into_chunks(rows, chunks)) {
        parallel_ranges(rows, rows * n, [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o)
                out[o] = cast<Out>(op.finish(tree_reduce(in + o * n, n, op, o), o));
        });
        return;
    }
    // Same tree as the serial sum, cut at chunk boundaries (Note [Pairwise summation]).
    std::vector<typename Op::Acc> part(size_t(rows * chunks));
    parallel_ranges(rows * chunks, rows * n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
            const int64_t o = i / chunks, c = i % chunks;
            part[size_t(i)] =
                tree_reduce(in + o * n + c * kChunk, std::min(kChunk, n - c * kChunk), op, o);
        }
    });
    for (int64_t o = 0; o < rows; ++o)
        out[o] = cast<Out>(op.finish(tree_combine(part.data() + o * chunks, chunks, op), o));
}

// acc[j] = reduce over r < rows of map(x[r * stride + j], k0 + j), j < w: rows
// added pairwise with the same split rule as tree_reduce. `scratch` holds one
// kTile row per tree level.
template <class Op, class T, class A = typename Op::Acc>
void tree_reduce_cols(const T* x, int64_t rows, int64_t stride, int64_t w, const Op& op, int64_t k0,
                      A* acc, A* scratch) {
    if (rows <= kLeafRows) {
        // Down the rows in registers, vectorized across the columns.
#pragma omp simd
        for (int64_t j = 0; j < w; ++j) {
            A a = op.init();
            for (int64_t r = 0; r < rows; ++r)
                a = op.combine(a, op.map(cast<A>(x[r * stride + j]), k0 + j));
            acc[j] = a;
        }
        return;
    }
    const int64_t m = tree_split(rows, kLeafRows);
    tree_reduce_cols(x, m, stride, w, op, k0, acc, scratch);
    tree_reduce_cols(x + m * stride, rows - m, stride, w, op, k0, scratch, scratch + kTile);
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) acc[j] = op.combine(acc[j], scratch[j]);
}

int tree_levels(int64_t rows) {
    int levels = 1;
    for (int64_t m = kLeafRows; m < rows; m *= 2) ++levels;
    return levels;
}

// out[o, j] = finish(reduce over r of in[o, r, j]) for inner > 1, in strips of kTile columns.
template <class Out, class T, class Op>
void reduce_cols(const T* in, Out* out, ReduceShape s, const Op& op) {
    using A = typename Op::Acc;
    const int64_t tiles = (s.inner + kTile - 1) / kTile, strips = s.outer * tiles;
    int64_t chunks = (s.size + kChunkRows - 1) / kChunkRows;
    if (!split_into_chunks(strips, chunks)) chunks = 1;
    const int64_t task_rows = chunks > 1 ? kChunkRows : s.size;
    // Partial sums per (strip, chunk), tw columns each: a narrow inner dim
    // needs only that many, not a whole tile.
    const int64_t tw = std::min(kTile, s.inner);
    std::vector<A> part(size_t(chunks > 1 ? strips * chunks * tw : 0));
    parallel_ranges(strips * chunks, s.outer * s.size * s.inner, [&](int64_t b, int64_t e) {
        std::vector<A> buf(size_t(kTile * (tree_levels(task_rows) + 1)));
        for (int64_t i = b; i < e; ++i) {
            const int64_t strip = i / chunks, c = i % chunks;
            const int64_t o = strip / tiles, j0 = (strip % tiles) * kTile;
            const int64_t w = std::min(kTile, s.inner - j0), k0 = o * s.inner + j0;
            const int64_t r0 = c * task_rows, rows = std::min(task_rows, s.size - r0);
            const T* x = in + (o * s.size + r0) * s.inner + j0;
            A* acc = chunks > 1 ? part.data() + i * tw : buf.data();
            tree_reduce_cols(x, rows, s.inner, w, op, k0, acc, buf.data() + kTile);
            if (chunks == 1)
                for (int64_t j = 0; j < w; ++j) out[k0 + j] = cast<Out>(op.finish(acc[j], k0 + j));
        }
    });
    if (chunks == 1) return;
    parallel_ranges(strips, strips * chunks * tw, [&](int64_t b, int64_t e) {
        std::vector<A> col(static_cast<size_t>(chunks));
        for (int64_t strip = b; strip < e; ++strip) {
            const int64_t o = strip / tiles, j0 = (strip % tiles) * kTile;
            const int64_t w = std::min(kTile, s.inner - j0), k0 = o * s.inner + j0;
            for (int64_t j = 0; j < w; ++j) {
                for (int64_t c = 0; c < chunks; ++c)
                    col[size_t(c)] = part[size_t((strip * chunks + c) * tw + j)];
                out[k0 + j] = cast<Out>(op.finish(tree_combine(col.data(), chunks, op), k0 + j));
            }
        }
    });
}

template <class Out, class T, class Op>
void reduce_any(const View& out, const View& in, ReduceShape s, const Op& op) {
    EMBER_INTERNAL_ASSERT(in.is_contiguous() && out.is_contiguous() &&
                          in.numel() == s.outer * s.size * s.inner &&
                          out.numel() == s.outer * s.inner);
    if (s.inner == 1)
        reduce_rows(in.ptr<const T>(), out.ptr<Out>(), s.outer, s.size, op);
    else
        reduce_cols(in.ptr<const T>(), out.ptr<Out>(), s, op);
}

// Floating kernels take an op built for the accumulation type A = Acc<T>.
template <template <class> class MakeOp, class... Args>
void floating(const char* name, const View& out, const View& in, ReduceShape s, Args... args) {
    visit_floating(in.dtype, name, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        reduce_any<T, T>(out, in, s, MakeOp<A>{}(s, args...));
    });
}

template <class A>
struct MakeMean {
    MeanOp<A> operator()(ReduceShape s) const { return {{}, A(s.size)}; }
};
template <class A>
struct MakeNorm1 {
    AbsSumOp<A> operator()(ReduceShape) const { return {}; }
};
template <class A>
struct MakeNorm2 {
    SqSumOp<A> operator()(ReduceShape) const { return {}; }
};
template <class A>
struct MakeNormInf {
    ExtremeOp<A, true, true> operator()(ReduceShape) const { return {}; }
};

template <bool IsMax>
void extreme(const View& out, const View& in, ReduceShape s) {
    visit_dtype(in.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = ExtremeAcc<T>;
        reduce_any<T, T>(out, in, s, ExtremeOp<A, IsMax>{});
    });
}

template <class T>
void var_impl(const View& out, const View& in, ReduceShape s, double correction, bool root) {
    using A = math::Acc<T>;
    const A divisor = A(std::max(0.0, double(s.size) - correction));
    const T* x = in.ptr<const T>();
    T* y = out.ptr<T>();
    if (s.inner == 1 && !split_into_chunks(s.outer, (s.size + kChunk - 1) / kChunk)) {
        // Whole rows per thread: the second pass reads the row from the cache.
        parallel_ranges(s.outer, 2 * s.outer * s.size, [&](int64_t b, int64_t e) {
            for (int64_t o = b; o < e; ++o) {
                const T* row = x + o * s.size;
                const A center = tree_reduce(row, s.size, SumOp<A>{}) / A(s.size);
                const SqDevOp<A> dev{{}, &center, divisor, root};
                y[o] = cast<T>(dev.finish(tree_reduce(row, s.size, dev, 0), 0));
            }
        });
        return;
    }
    std::vector<A> means(size_t(s.outer * s.inner));
    View mv;  // the means as an A buffer of the output's shape
    mv.data = reinterpret_cast<char*>(means.data());
    mv.dtype = dtype_of<A>();
    mv.ndim = 1;
    mv.shape[0] = s.outer * s.inner;
    mv.strides[0] = 1;
    reduce_any<A, T>(mv, in, s, MeanOp<A>{{}, A(s.size)});
    reduce_any<T, T>(out, in, s, SqDevOp<A>{{}, means.data(), divisor, root});
}

// v replaces best: strictly better, so the first occurrence stays; a NaN beats
// any number (and the first NaN stays).
template <bool IsMax, class A>
bool better(A v, A best) {
    return (IsMax ? v > best : v < best) | (v != v && best == best);
}

template <class A>
struct ArgResult {
    A value;
    int64_t index;
};

// The first extreme of x[begin, end) (not empty) and its index, in lanes that
// each keep their own first extreme, then merged preferring the lower index.
template <bool IsMax, class A, class T>
ArgResult<A> arg_extreme(const T* x, int64_t begin, int64_t end) {
    constexpr int L = kExactLanes;
    A best[L];
    int64_t at[L];
    const int lanes = int(std::min<int64_t>(L, end - begin));
    for (int l = 0; l < lanes; ++l) best[l] = cast<A>(x[begin + l]), at[l] = begin + l;
    int64_t i = begin + lanes;
    for (; i + L <= end; i += L) {
#pragma omp simd
        for (int l = 0; l < L; ++l) {
            const A v = cast<A>(x[i + l]);
            const bool take = better<IsMax>(v, best[l]);
            best[l] = take ? v : best[l];
            at[l] = take ? i + l : at[l];
        }
    }
    for (int l = 0; i < end; ++i, ++l)
        if (better<IsMax>(cast<A>(x[i]), best[l])) best[l] = cast<A>(x[i]), at[l] = i;
    ArgResult<A> r{best[0], at[0]};
    for (int l = 1; l < lanes; ++l) {
        const bool tie = best[l] == r.value || (best[l] != best[l] && r.value != r.value);
        if (better<IsMax>(best[l], r.value) || (tie && at[l] < r.index)) r = {best[l], at[l]};
    }
    return r;
}

// Values and first index of the extreme along size; NaN wins (its first occurrence).
template <bool IsMax, class T>
void extreme_index(const View& values, const View& indices, const View& in, ReduceShape s) {
    using A = ExtremeAcc<T>;
    const T* x = in.ptr<const T>();
    T* val = values.data ? values.ptr<T>() : nullptr;
    int64_t* idx = indices.ptr<int64_t>();
    if (s.inner == 1) {
        const int64_t n = s.size, chunks = (n + kChunk - 1) / kChunk;
        auto finish = [&](int64_t o, int64_t i) {
            idx[o] = i;
            if (val) val[o] = x[o * n + i];
        };
        if (!split_into_chunks(s.outer, chunks)) {
            parallel_ranges(s.outer, s.outer * n, [&](int64_t b, int64_t e) {
                for (int64_t o = b; o < e; ++o)
                    finish(o, arg_extreme<IsMax, A>(x + o * n, 0, n).index);
            });
            return;
        }
        // Few long rows: chunks in parallel, merged in order (a later chunk must be strictly
        // better).
        std::vector<ArgResult<A>> part(size_t(s.outer * chunks));
        parallel_ranges(s.outer * chunks, s.outer * n, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) {
                const int64_t o = i / chunks, c = i % chunks;
                part[size_t(i)] =
                    arg_extreme<IsMax, A>(x + o * n, c * kChunk, std::min(n, (c + 1) * kChunk));
            }
        });
        for (int64_t o = 0; o < s.outer; ++o) {
            ArgResult<A> r = part[size_t(o * chunks)];
            for (int64_t c = 1; c < chunks; ++c)
                if (better<IsMax>(part[size_t(o * chunks + c)].value, r.value))
                    r = part[size_t(o * chunks + c)];
            finish(o, r.index);
        }
        return;
    }
    // perf: one thread per strip; few strips over a long dim run on few threads.
    const int64_t tiles = (s.inner + kTile - 1) / kTile;
    parallel_ranges(s.outer * tiles, s.outer * s.size * s.inner, [&](int64_t b, int64_t e) {
        std::vector<A> best(static_cast<size_t>(kTile));
        for (int64_t strip = b; strip < e; ++strip) {
            const int64_t o = strip / tiles, j0 = (strip % tiles) * kTile;
            const int64_t w = std::min(kTile, s.inner - j0), k0 = o * s.inner + j0;
            const T* base = x + o * s.size * s.inner + j0;
            for (int64_t j = 0; j < w; ++j) best[size_t(j)] = cast<A>(base[j]), idx[k0 + j] = 0;
            for (int64_t r = 1; r < s.size; ++r) {
                const T* row = base + r * s.inner;
#pragma omp simd
                for (int64_t j = 0; j < w; ++j) {
                    const A v = cast<A>(row[j]);
                    const bool take = better<IsMax>(v, best[size_t(j)]);
                    best[size_t(j)] = take ? v : best[size_t(j)];
                    idx[k0 + j] = take ? r : idx[k0 + j];
                }
            }
            if (val)
                for (int64_t j = 0; j < w; ++j) val[k0 + j] = base[idx[k0 + j] * s.inner + j];
        }
    });
}

template <bool IsMax>
void extreme_index_any(const View& values, const View& indices, const View& in, ReduceShape s) {
    EMBER_INTERNAL_ASSERT(in.is_contiguous() && s.size > 0 && indices.dtype == DType::i64);
    visit_dtype(in.dtype, [&](auto tag) {
        extreme_index<IsMax, typename decltype(tag)::type>(values, indices, in, s);
    });
}

}  // namespace

void sum(const View& out, const View& in, ReduceShape s) {
    visit_dtype(in.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (math::is_float_v<T>) {
            reduce_any<T, T>(out, in, s, SumOp<math::Acc<T>>{});
        } else {
            EMBER_INTERNAL_ASSERT(out.dtype == DType::i64);
            reduce_any<int64_t, T>(out, in, s, SumOp<int64_t>{});
        }
    });
}

void mean(const View& out, const View& in, ReduceShape s) {
    floating<MakeMean>("mean", out, in, s);
}

void norm(const View& out, const View& in, ReduceShape s, double p) {
    if (p == 1)
        floating<MakeNorm1>("norm", out, in, s);
    else if (p == 2)
        floating<MakeNorm2>("norm", out, in, s);
    else if (std::isinf(p) && p > 0)
        floating<MakeNormInf>("norm", out, in, s);
    else
        EMBER_FAIL("norm: p must be 1, 2 or inf, got ", p);
}

void var(const View& out, const View& in, ReduceShape s, double correction) {
    visit_floating(in.dtype, "var", [&](auto tag) {
        var_impl<typename decltype(tag)::type>(out, in, s, correction, false);
    });
}

void std(const View& out, const View& in, ReduceShape s, double correction) {
    visit_floating(in.dtype, "std", [&](auto tag) {
        var_impl<typename decltype(tag)::type>(out, in, s, correction, true);
    });
}

void amax(const View& out, const View& in, ReduceShape s) { extreme<true>(out, in, s); }
void amin(const View& out, const View& in, ReduceShape s) { extreme<false>(out, in, s); }

void max(const View& values, const View& indices, const View& in, ReduceShape s) {
    extreme_index_any<true>(values, indices, in, s);
}
void min(const View& values, const View& indices, const View& in, ReduceShape s) {
    extreme_index_any<false>(values, indices, in, s);
}

}  // namespace ember::kernels::cpu

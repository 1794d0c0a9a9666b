// CPU index kernels: gather (index_select and embedding are gathers through
// stride-0 views, built by the front) and scatter_add (index_add likewise).
//
// Math:   gather       out[p] = in[p with p[dim] := index[p]]
//         scatter_add  self[q with q[dim] := index[q]] += src[q], q over index's shape
//         (backward of gather is a scatter_add of the output gradient, and back.)
// Dtypes: gather moves raw elements of any dtype (1, 2, 4 or 8 bytes);
//         scatter_add adds in Acc<T> (f32 for f16/bf16), integers wrap, bool is `or`.
//         Indices i32 or i64, any strides.
// Bytes:  gather      numel(out) * (2 * sizeof(T) + sizeof(I)), the index read once per
//                     run where it is constant along the run (embedding rows);
//         scatter_add numel(index) * (3 * sizeof(T) + sizeof(I)). FLOPs: numel(index) adds.
// Determinism: gather writes each output once. scatter_add splits the lines
//         along `dim` across threads (no two lines share a target element), and
//         adds each line in order: bit-identical for any thread count.
// Tests:  tests/kernels/test_index.cpp.
#include "kernels/cpu/index.h"

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/loop.h"
#include "kernels/index_lines.h"
#include "kernels/math.h"

namespace ember::kernels::cpu {

namespace {

using Bad = std::optional<int64_t>;

// Like for_each_run (loop.h), but the body also gets its thread's "first bad
// index" slot: throwing inside an OpenMP region would terminate the process.
// Threads take consecutive ranges, so the first filled slot is the first bad
// index in loop order.
template <int N, class Body>
Bad for_each_run_checked(const StridedLoop<N>& L, int64_t grain, Body body) {
    if (L.numel == 0) return std::nullopt;
    if (L.numel < grain || omp_in_parallel() || omp_get_max_threads() == 1) {
        Bad bad;
        auto run = [&](char** p, const int64_t* s, int64_t n) { body(p, s, n, bad); };
        walk_range(L, 0, L.numel, run);
        return bad;
    }
    std::vector<Bad> bad(static_cast<size_t>(omp_get_max_threads()));
#pragma omp parallel
    {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t chunk = (L.numel + nt - 1) / nt;
        const int64_t b = std::min(L.numel, t * chunk), e = std::min(L.numel, b + chunk);
        auto run = [&](char** p, const int64_t* s, int64_t n) { body(p, s, n, bad[size_t(t)]); };
        if (b < e) walk_range(L, b, e, run);
    }
    for (const Bad& b : bad)
        if (b) return b;
    return std::nullopt;
}

template <class I>
int64_t load_index(const char* p) {
    I i;
    std::memcpy(&i, p, sizeof(I));
    return int64_t(i);
}

// Calls f(TypeTag<I>{}) for the index dtype (the front has checked it).
template <class F>
decltype(auto) visit_index(DType t, F&& f) {
    EMBER_INTERNAL_ASSERT(t == DType::i64 || t == DType::i32);
    if (t == DType::i64) return f(TypeTag<int64_t>{});
    return f(TypeTag<int32_t>{});
}

// S: element size in bytes. Elements move by memcpy, so one instantiation per
// size serves every dtype without aliasing casts.
template <int S, class I>
Bad gather_typed(const View& out, const View& in, const View& index, int64_t dim_stride,
                 int64_t dim_size) {
    const StridedLoop<3> L = make_loop<3>({&out, &in, &index});
    const int64_t jump = dim_stride * S;  // bytes per step of the index
    return for_each_run_checked(
        L, kParallelGrain, [=](char** p, const int64_t* s, int64_t n, Bad& bad) {
            if (s[2] == 0) {  // one index for the whole run: copy a row (embedding, index_select)
                const int64_t i = load_index<I>(p[2]);
                if (i < 0 || i >= dim_size) {
                    if (!bad) bad = i;
                    return;
                }
                const char* row = p[1] + i * jump;
                if (s[0] == S && s[1] == S) {
                    std::memcpy(p[0], row, size_t(n * S));
                } else {
                    for (int64_t k = 0; k < n; ++k) std::memcpy(p[0] + k * s[0], row + k * s[1], S);
                }
                return;
            }
            for (int64_t k = 0; k < n; ++k) {
                const int64_t i = load_index<I>(p[2] + k * s[2]);
                if (i < 0 || i >= dim_size) {
                    if (!bad) bad = i;
                    continue;
                }
                std::memcpy(p[0] + k * s[0], p[1] + k * s[1] + i * jump, S);
            }
        });
}

template <int S>
Bad gather_sized(const View& out, const View& in, const View& index, int64_t dim_stride,
                 int64_t dim_size) {
    return visit_index(index.dtype, [&](auto tag) {
        using I = typename decltype(tag)::type;
        return gather_typed<S, I>(out, in, index, dim_stride, dim_size);
    });
}

template <class T, class I>
Bad scatter_add_typed(const View& self, const View& index, const View& src, int dim) {
    // One element of this loop is one line along `dim`; index's view goes first
    // because make_loop takes the shape from operand 0.
    const View il = drop_dim(index, dim, index), sl = drop_dim(self, dim, index),
               rl = drop_dim(src, dim, index);
    const StridedLoop<3> L = make_loop<3>({&il, &sl, &rl});
    const int64_t len = index.shape[dim], size = self.shape[dim];
    const int64_t is = index.strides[dim] * int64_t(sizeof(I));
    const int64_t ss = self.strides[dim] * int64_t(sizeof(T));
    const int64_t rs = src.strides[dim] * int64_t(sizeof(T));
    const int64_t grain = std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(len, 1));
    return for_each_run_checked(L, grain, [=](char** p, const int64_t* s, int64_t n, Bad& bad) {
        // k outer: neighbouring lines advance together; each line still adds in order of k.
        for (int64_t k = 0; k < len; ++k) {
            for (int64_t j = 0; j < n; ++j) {
                const int64_t i = load_index<I>(p[0] + j * s[0] + k * is);
                if (i < 0 || i >= size) {
                    if (!bad) bad = i;
                    continue;
                }
                T* dst = reinterpret_cast<T*>(p[1] + j * s[1] + i * ss);
                const T v = *reinterpret_cast<const T*>(p[2] + j * s[2] + k * rs);
                *dst = scatter_add_step(*dst, v);
            }
        }
    });
}

}  // namespace

std::optional<int64_t> gather(const View& out, const View& in, const View& index,
                              int64_t dim_stride, int64_t dim_size) {
    EMBER_INTERNAL_ASSERT(out.ndim == in.ndim && out.ndim == index.ndim && out.dtype == in.dtype);
    switch (dtype_size(out.dtype)) {
        case 1:
            return gather_sized<1>(out, in, index, dim_stride, dim_size);
        case 2:
            return gather_sized<2>(out, in, index, dim_stride, dim_size);
        case 4:
            return gather_sized<4>(out, in, index, dim_stride, dim_size);
        case 8:
            return gather_sized<8>(out, in, index, dim_stride, dim_size);
    }
    EMBER_FAIL("internal error: gather on element size ", dtype_size(out.dtype));
}

std::optional<int64_t> find_bad_index(const View& index, int64_t size) {
    return visit_index(index.dtype, [&](auto tag) {
        using I = typename decltype(tag)::type;
        const StridedLoop<1> L = make_loop<1>({&index});
        return for_each_run_checked(L, kParallelGrain,
                                    [=](char** p, const int64_t* s, int64_t n, Bad& bad) {
                                        if (bad) return;
                                        for (int64_t k = 0; k < n; ++k) {
                                            const int64_t i = load_index<I>(p[0] + k * s[0]);
                                            if (i < 0 || i >= size) {
                                                bad = i;
                                                return;
                                            }
                                        }
                                    });
    });
}

std::optional<int64_t> scatter_add(const View& self, const View& index, const View& src, int dim) {
    EMBER_INTERNAL_ASSERT(self.ndim == index.ndim && src.ndim == index.ndim && dim >= 0 &&
                          dim < index.ndim && self.dtype == src.dtype);
    if (index.numel() == 0) return std::nullopt;
    return visit_dtype(self.dtype, [&](auto data_tag) {
        using T = typename decltype(data_tag)::type;
        return visit_index(index.dtype, [&](auto index_tag) {
            using I = typename decltype(index_tag)::type;
            return scatter_add_typed<T, I>(self, index, src, dim);
        });
    });
}

}  // namespace ember::kernels::cpu

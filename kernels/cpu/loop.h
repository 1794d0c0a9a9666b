// The one strided loop every CPU elementwise kernel runs on. Operands share a
// shape (the front function has already broadcast them with stride-0 dims);
// dims are coalesced where memory allows, the flat index range is split across
// OpenMP threads, and the body is called on 1-d runs of the innermost dim with
// byte strides. `map` builds on it: a kernel becomes one lambda, and a fully
// contiguous run becomes a plain indexed loop the compiler vectorizes.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../view.h"

namespace ember::kernels::cpu {

/// Below this many elements a loop runs on one thread.
inline constexpr int64_t kParallelGrain = 32768;

template <int N>
struct StridedLoop {
    int ndim = 0;
    int64_t numel = 0;
    int64_t shape[kMaxDims] = {};
    int64_t strides[N][kMaxDims] = {};  // bytes
    char* base[N] = {};
};

/// Coalesces the operands' common shape: drops size-1 dims, orders the dims
/// as operand 0 (the output) lies in memory (outermost first: a
/// channels-last output walks N, H, W, C), and merges neighbours that are
/// contiguous with each other in every operand. Every element is visited
/// once whatever the order; a row-major operand 0 keeps its order.
template <int N>
StridedLoop<N> make_loop(const std::array<const View*, N>& ops) {
    StridedLoop<N> L;
    const View& v0 = *ops[0];
    L.numel = v0.numel();
    for (int k = 0; k < N; ++k) L.base[k] = ops[k]->data;
    int order[kMaxDims];
    int dims = 0;
    for (int d = 0; d < v0.ndim; ++d)
        if (v0.shape[d] != 1) order[dims++] = d;
    // Stable: equal strides (stride-0 outputs do not occur) keep their order.
    std::stable_sort(order, order + dims, [&](int a, int b) {
        const int64_t sa = v0.strides[a] < 0 ? -v0.strides[a] : v0.strides[a];
        const int64_t sb = v0.strides[b] < 0 ? -v0.strides[b] : v0.strides[b];
        return sa > sb;
    });
    for (int i = 0; i < dims; ++i) {
        const int d = order[i];
        const int j = L.ndim++;
        L.shape[j] = v0.shape[d];
        for (int k = 0; k < N; ++k)
            L.strides[k][j] = ops[k]->strides[d] * dtype_size(ops[k]->dtype);
    }
    if (L.ndim == 0) {  // scalar or all-ones shape: one element
        L.ndim = 1;
        L.shape[0] = 1;
        for (int k = 0; k < N; ++k) L.strides[k][0] = dtype_size(ops[k]->dtype);
        return L;
    }
    // Merge dim j-1 into dim j where (size, stride) pairs are contiguous for all operands.
    int out = L.ndim - 1;
    for (int j = L.ndim - 2; j >= 0; --j) {
        bool merge = true;
        for (int k = 0; k < N; ++k)
            merge = merge && L.strides[k][j] == L.strides[k][out] * L.shape[out];
        if (merge) {
            L.shape[out] *= L.shape[j];
        } else {
            --out;
            L.shape[out] = L.shape[j];
            for (int k = 0; k < N; ++k) L.strides[k][out] = L.strides[k][j];
        }
    }
    const int shift = out;
    L.ndim -= shift;
    for (int j = 0; j < L.ndim; ++j) {
        L.shape[j] = L.shape[j + shift];
        for (int k = 0; k < N; ++k) L.strides[k][j] = L.strides[k][j + shift];
    }
    return L;
}

/// Calls body(ptrs, inner_strides, n) over flat elements [begin, end) in runs
/// along the innermost dim.
template <int N, class Body>
void walk_range(const StridedLoop<N>& L, int64_t begin, int64_t end, Body& body) {
    const int last = L.ndim - 1;
    const int64_t inner = L.shape[last];
    int64_t idx[kMaxDims];
    int64_t rest = begin;
    for (int d = last; d >= 0; --d) {
        idx[d] = rest % L.shape[d];
        rest /= L.shape[d];
    }
    char* p[N];
    int64_t s[N];
    for (int k = 0; k < N; ++k) s[k] = L.strides[k][last];
    int64_t pos = begin;
    while (pos < end) {
        for (int k = 0; k < N; ++k) {
            char* q = L.base[k];
            for (int d = 0; d <= last; ++d) q += idx[d] * L.strides[k][d];
            p[k] = q;
        }
        const int64_t n = std::min(inner - idx[last], end - pos);
        body(p, s, n);
        pos += n;
        idx[last] = 0;
        for (int d = last - 1; d >= 0; --d) {  // carry into the outer dims
            if (++idx[d] < L.shape[d]) break;
            idx[d] = 0;
        }
    }
}

/// Runs body over all elements, split across threads when large enough.
template <int N, class Body>
void for_each_run(const StridedLoop<N>& L, Body body, int64_t grain = kParallelGrain) {
    if (L.numel == 0) return;
    if (L.numel < grain || omp_in_parallel() || omp_get_max_threads() == 1) {
        walk_range(L, 0, L.numel, body);
        return;
    }
#pragma omp parallel
    {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t chunk = (L.numel + nt - 1) / nt;
        const int64_t b = std::min(L.numel, t * chunk), e = std::min(L.numel, b + chunk);
        if (b < e) walk_range(L, b, e, body);
    }
}

namespace detail {
template <class Out, class... In, class F, size_t... I>
void map_impl(const std::array<const View*, 1 + sizeof...(In)>& ops, F& f,
              std::index_sequence<I...>) {
    constexpr int N = 1 + sizeof...(In);
    const StridedLoop<N> L = make_loop<N>(ops);
    for_each_run(L, [&f](char** p, const int64_t* s, int64_t n) {
        Out* o = reinterpret_cast<Out*>(p[0]);
        const bool dense =
            s[0] == int64_t(sizeof(Out)) && ((s[I + 1] == int64_t(sizeof(In))) && ...);
        if (dense) {
            std::tuple<const In*...> in{reinterpret_cast<const In*>(p[I + 1])...};
            for (int64_t i = 0; i < n; ++i) o[i] = f(std::get<I>(in)[i]...);
        } else {
            for (int64_t i = 0; i < n; ++i)
                *reinterpret_cast<Out*>(p[0] + i * s[0]) =
                    f(*reinterpret_cast<const In*>(p[I + 1] + i * s[I + 1])...);
        }
    });
}
}  // namespace detail

/// out[i] = f(in0[i], in1[i], ...) over Views of one shape (inputs may have
/// stride-0 broadcast dims). Out and In are the element types of the views.
template <class Out, class... In, class F>
void map(const View& out, F f, const std::conditional_t<true, View, In>&... in) {
    detail::map_impl<Out, In...>({&out, &in...}, f, std::index_sequence_for<In...>{});
}

}  // namespace ember::kernels::cpu

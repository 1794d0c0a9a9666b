// CUDA index kernels: gather (index_select and embedding are gathers through
// stride-0 views, built by the front) and scatter_add (index_add likewise).
// CPU twin: kernels/cpu/index.cpp; results are bit-identical.
//
// Math:   gather       out[p] = in[p with p[dim] := index[p]]
//         scatter_add  self[q with q[dim] := index[q]] += src[q], q over index's shape
// Dtypes: gather moves raw elements of any dtype (1, 2, 4 or 8 bytes);
//         scatter_add adds in Acc<T> (f32 for f16/bf16), integers wrap, bool
//         is `or`. Indices i32 or i64, any strides (dims coalesced first:
//         kernels/cuda/index_plan.h).
// Bytes:  gather numel(out)·(2·sizeof(T) + sizeof(I)) (the index is cached
//         where it repeats, as along an embedding row); scatter_add
//         numel(index)·(3·sizeof(T) + sizeof(I)). FLOPs: numel(index) adds.
// Launch: gather one thread per output element; scatter_add one thread per
//         line along dim, adding its len elements in order; grid-stride, 256.
//         Where every line reads the same index (index_add, embedding's
//         backward) and lines are few, scatter_add sorts the index instead:
//         kernels/cuda/index_sorted.cu (Note [Sorted scatter_add], index_plan.h).
// Determinism: gather writes each element once; scatter_add's lines never
//         share a target, and each adds in the CPU's order (k ascending):
//         bit-identical to the CPU, run to run (the sorted path too). No
//         atomics but the flag's.
// Bad indices: every index a kernel reads is checked against [0, size); a
//         bad one raises the device error flag (position: its element offset
//         from the index's first element, the flat position when the index
//         is contiguous) and is skipped, never dereferenced. The Error comes
//         at the next synchronization, when the op has finished: gather's
//         output then has that element unwritten, and scatter_add's self
//         holds all the valid contributions (the CPU leaves self untouched).
// perf:   one thread per line gives scatter_add only `lines` threads. Where
//         every line shares the index (embedding's backward: D lines, each
//         walking all L tokens) and lines are under 32768 with 64+ elements,
//         the sorted path takes over (a thread per run of equal indices and
//         line). Left slow: few long lines that each read their own index,
//         and a value repeated R times — a serial fold of R adds on either
//         path, as the CPU's order demands without float atomics.
// Test:   the op table (tests/ops/entries_index.cpp via tests/cuda/test_cuda_ops.cpp),
//         edge cases in tests/cuda/test_cuda_index.cpp; plans:
//         tests/kernels/test_index_plan.cpp.
#include "core/cuda_check.h"
#include "kernels/cuda/index.h"
#include "kernels/cuda/index_plan.h"
#include "kernels/cuda/offset.cuh"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kBlock = 256;

// Unsigned words of each element size: gather copies bits, never converts.
template <int S> struct Word;
template <> struct Word<1> { using type = uint8_t; };
template <> struct Word<2> { using type = uint16_t; };
template <> struct Word<4> { using type = uint32_t; };
template <> struct Word<8> { using type = uint64_t; };

template <class F>
void visit_index(DType t, F&& f) {
    EMBER_INTERNAL_ASSERT(t == DType::i64 || t == DType::i32);
    if (t == DType::i64) f(TypeTag<int64_t>{});
    else f(TypeTag<int32_t>{});
}

template <class E, class I>
__global__ void gather_kernel(E* out, const E* in, const I* index, OffsetCalc<3> calc, int64_t n,
                              int64_t dim_stride, int64_t dim_size, ErrorFlagRef flag) {
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
         e += int64_t(gridDim.x) * blockDim.x) {
        int64_t off[3];
        calc.offsets(e, off);
        const int64_t i = int64_t(index[off[2]]);
        if (i < 0 || i >= dim_size) {
            raise_error(flag, off[2], i);
            continue;
        }
        out[off[0]] = in[off[1] + i * dim_stride];
    }
}

template <class I>
__global__ void check_kernel(const I* index, OffsetCalc<1> calc, int64_t n, int64_t size,
                             ErrorFlagRef flag) {
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < n;
         e += int64_t(gridDim.x) * blockDim.x) {
        int64_t off[1];
        calc.offsets(e, off);
        const int64_t i = int64_t(index[off[0]]);
        if (i < 0 || i >= size) raise_error(flag, off[0], i);
    }
}

template <class T, class I>
__global__ void scatter_add_kernel(T* self, const I* index, const T* src, OffsetCalc<3> calc,
                                   int64_t lines, int64_t len, int64_t is, int64_t ss, int64_t rs,
                                   int64_t size, ErrorFlagRef flag) {
    for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < lines;
         l += int64_t(gridDim.x) * blockDim.x) {
        int64_t off[3];
        calc.offsets(l, off);
        for (int64_t k = 0; k < len; ++k) {  // in order: the CPU's sums
            const int64_t at = off[0] + k * is, i = int64_t(index[at]);
            if (i < 0 || i >= size) {
                raise_error(flag, at, i);
                continue;
            }
            T* dst = self + off[1] + i * ss;
            *dst = scatter_add_step(*dst, src[off[2] + k * rs]);
        }
    }
}

template <int N>
OffsetCalc<N> calc_of(const View (&v)[N]) {
    const View* ops[N];
    for (int k = 0; k < N; ++k) ops[k] = &v[k];
    return make_offset_calc<N>(ops);
}

ErrorFlagRef arm(StreamRef stream, const char* op, int64_t size) {
    return CudaContext::of(stream.device).error_flag().arm(op, "index", size);
}

}  // namespace

void gather(const View& out, const View& in, const View& index, int64_t dim_stride,
            int64_t dim_size, const char* op, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.ndim == in.ndim && out.ndim == index.ndim && out.dtype == in.dtype);
    const int64_t n = out.numel();
    if (n == 0) return;
    View v[3] = {out, in, index};
    coalesce(v);
    const OffsetCalc<3> calc = calc_of(v);
    const ErrorFlagRef flag = arm(stream, op, dim_size);
    auto launch = [&](auto word) {
        using E = typename decltype(word)::type;
        visit_index(index.dtype, [&](auto tag) {
            using I = typename decltype(tag)::type;
            gather_kernel<E, I><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
                out.ptr<E>(), in.ptr<const E>(), index.ptr<const I>(), calc, n, dim_stride,
                dim_size, flag);
        });
    };
    switch (dtype_size(out.dtype)) {
        case 1: launch(TypeTag<Word<1>::type>{}); break;
        case 2: launch(TypeTag<Word<2>::type>{}); break;
        case 4: launch(TypeTag<Word<4>::type>{}); break;
        case 8: launch(TypeTag<Word<8>::type>{}); break;
        default: EMBER_FAIL("internal error: gather on element size ", dtype_size(out.dtype));
    }
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void find_bad_index(const View& index, int64_t size, const char* op, StreamRef stream) {
    const int64_t n = index.numel();
    if (n == 0) return;
    View v[1] = {index};
    coalesce(v);
    const OffsetCalc<1> calc = calc_of(v);
    const ErrorFlagRef flag = arm(stream, op, size);
    visit_index(index.dtype, [&](auto tag) {
        using I = typename decltype(tag)::type;
        check_kernel<I><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(index.ptr<const I>(),
                                                                           calc, n, size, flag);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void scatter_add(const View& self, const View& index, const View& src, int dim, const char* op,
                 StreamRef stream) {
    EMBER_INTERNAL_ASSERT(self.ndim == index.ndim && src.ndim == index.ndim && dim >= 0 &&
                          dim < index.ndim && self.dtype == src.dtype);
    if (index.numel() == 0) return;
    const ScatterLines s = scatter_lines(self, index, src, dim);
    const int64_t size = self.shape[dim];
    if (use_sorted_scatter(s, size)) {  // Note [Sorted scatter_add] (index_plan.h)
        scatter_add_sorted(self, index, src, dim, s, op, stream);
        return;
    }
    const View v[3] = {s.index, s.self, s.src};
    const OffsetCalc<3> calc = calc_of(v);
    const ErrorFlagRef flag = arm(stream, op, size);
    visit_dtype(self.dtype, [&](auto data_tag) {
        using T = typename decltype(data_tag)::type;
        visit_index(index.dtype, [&](auto index_tag) {
            using I = typename decltype(index_tag)::type;
            scatter_add_kernel<T, I><<<grid_for(s.lines, kBlock), kBlock, 0, stream.handle>>>(
                self.ptr<T>(), index.ptr<const I>(), src.ptr<const T>(), calc, s.lines, s.len,
                s.index_step, s.self_step, s.src_step, size, flag);
        });
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::kernels::cuda

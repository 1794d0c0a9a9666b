// scatter_add's sorted path (Note [Sorted scatter_add], index_plan.h): for an
// index every line reads alike — index_add, embedding's backward (self [V, D],
// L tokens) — sort the L index values once, then one thread per (run of equal
// values, line) folds that run into self. Taken by cuda::scatter_add
// (index.cu) where use_sorted_scatter() holds. CPU twin: kernels/cpu/index.cpp.
//
// Math:   self[l, key] += src[l, p] for p over the positions holding key, in
//         ascending p (l: a line, key: an index value), as the CPU's loop.
// Dtypes: as index.cu's scatter_add (every dtype; Acc<T> with a rounding back
//         to T per add for f16/bf16); indices i32 or i64.
// Bytes:  keys: L·(sizeof(I) + 8); sort: about 16·L per radix pass
//         (ceil(end_bit/8) passes or fewer, end_bit = bit width of size);
//         sums: numel(index)·sizeof(T) of src + 2·sizeof(T)·lines per
//         distinct index + 8·numel(index) of keys and positions (cached).
//         FLOPs: numel(index) adds.
// Launch: sorted_keys_kernel one thread per position (grid-stride, 256);
//         cub::DeviceRadixSort::SortPairs on (u32 key, i32 position), memory
//         from a Workspace; sorted_sum_kernel one thread per (position k,
//         line l), blocks of 256 with l fastest (a warp reads neighbouring
//         columns of one src row), grid (k blocks up to 2^20, line blocks):
//         sorted_sum_launch in index_plan.h. Only threads whose k starts a
//         run of equal keys work.
// Determinism: the radix sort is deterministic and stable (equal keys keep
//         ascending positions), each (key, line) target has one thread that
//         adds in position order: bit-identical to the CPU, run to run. No
//         atomics but the flag's.
// Bad indices: sorted_keys_kernel checks each of the L values against
//         [0, size), raises the flag as index.cu does (same op, position
//         k·index_step, value) and gives it the key `size`: it sorts last
//         and is skipped, so self holds every valid contribution.
// perf:   a run of one index value is a serial fold per line (the CPU's
//         order without float atomics): a value repeated R times costs R
//         dependent steps, however many threads there are.
// Test:   the op table (index_add, scatter_add) and tests/cuda/test_cuda_index.cpp
//         (embedding's backward); plan and a CPU emulation:
//         tests/kernels/test_index_plan.cpp.
#include <cub/device/device_radix_sort.cuh>

#include "core/cuda_check.h"
#include "kernels/cuda/index.h"
#include "kernels/cuda/index_plan.h"
#include "kernels/cuda/offset.cuh"
#include "kernels/cuda/workspace.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kBlock = 256;

// keys[k], pos[k] = sorted_key(index[k·step]), k; a bad value raises the flag.
template <class I>
__global__ void sorted_keys_kernel(uint32_t* __restrict__ keys, int32_t* __restrict__ pos,
                                   const I* __restrict__ index, int64_t len, int64_t step,
                                   int64_t size, ErrorFlagRef flag) {
    for (int64_t k = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; k < len;
         k += int64_t(gridDim.x) * blockDim.x) {
        const int64_t at = k * step, i = int64_t(index[at]);
        if (i < 0 || i >= size) raise_error(flag, at, i);
        keys[k] = sorted_key(i, size);
        pos[k] = int32_t(k);
    }
}

// Line l's offsets in self and src: without a division for the usual one
// coalesced dim (or none).
__device__ __forceinline__ void line_offsets(const OffsetCalc<2>& calc, int64_t l,
                                             int64_t (&off)[2]) {
    if (calc.ndim <= 1) {
        off[0] = calc.ndim ? l * calc.strides[0][0] : 0;
        off[1] = calc.ndim ? l * calc.strides[1][0] : 0;
    } else {
        calc.offsets(l, off);
    }
}

// One thread per (sorted position k, line l), mapped as sorted_sum_launch
// says: where k starts a run of equal valid keys, self[line l, key] = self +
// src[line l, pos[k]] + src[..., pos[k+1]] + ..., one rounding per add,
// loaded and stored once.
template <class T>
__global__ void sorted_sum_kernel(T* __restrict__ self, const T* __restrict__ src,
                                  const uint32_t* __restrict__ keys,
                                  const int32_t* __restrict__ pos, OffsetCalc<2> calc,
                                  int64_t lines, int64_t len, int64_t self_step, int64_t src_step,
                                  uint32_t sentinel, int line_shift) {
    const int64_t l = (int64_t(blockIdx.y) << line_shift) + (threadIdx.x & ((1u << line_shift) - 1));
    if (l >= lines) return;
    int64_t off[2];
    line_offsets(calc, l, off);
    const int64_t per_block = blockDim.x >> line_shift;
    for (int64_t k = blockIdx.x * per_block + (threadIdx.x >> line_shift); k < len;
         k += gridDim.x * per_block) {
        const uint32_t key = keys[k];
        if (key == sentinel || (k > 0 && keys[k - 1] == key)) continue;
        T* dst = self + off[0] + int64_t(key) * self_step;
        const T* from = src + off[1];
        T acc = *dst;
        for (int64_t j = k; j < len && keys[j] == key; ++j)
            acc = scatter_add_step(acc, from[int64_t(pos[j]) * src_step]);
        *dst = acc;
    }
}

template <class F>
void visit_index(DType t, F&& f) {
    EMBER_INTERNAL_ASSERT(t == DType::i64 || t == DType::i32);
    if (t == DType::i64) f(TypeTag<int64_t>{});
    else f(TypeTag<int32_t>{});
}

size_t align256(size_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

void scatter_add_sorted(const View& self, const View& index, const View& src, int dim,
                        const ScatterLines& lines, const char* op, StreamRef stream) {
    const int64_t size = self.shape[dim];
    EMBER_INTERNAL_ASSERT(use_sorted_scatter(lines, size) && self.dtype == src.dtype);
    const int len = int(lines.len);
    const int end_bit = sorted_end_bit(size);

    // One workspace: keys and positions, unsorted and sorted, then CUB's own.
    size_t sort_bytes = 0;
    EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, sort_bytes, static_cast<const uint32_t*>(nullptr), static_cast<uint32_t*>(nullptr),
        static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), len, 0, end_bit,
        stream.handle));
    const size_t words = align256(size_t(len) * sizeof(uint32_t));
    const Workspace ws(stream, 4 * words + sort_bytes);
    char* base = ws.as<char>();
    uint32_t* keys_in = reinterpret_cast<uint32_t*>(base);
    uint32_t* keys = reinterpret_cast<uint32_t*>(base + words);
    int32_t* pos_in = reinterpret_cast<int32_t*>(base + 2 * words);
    int32_t* pos = reinterpret_cast<int32_t*>(base + 3 * words);
    void* sort_temp = base + 4 * words;

    const ErrorFlagRef flag = CudaContext::of(stream.device).error_flag().arm(op, "index", size);
    visit_index(index.dtype, [&](auto tag) {
        using I = typename decltype(tag)::type;
        sorted_keys_kernel<I><<<grid_for(len, kBlock), kBlock, 0, stream.handle>>>(
            keys_in, pos_in, index.ptr<const I>(), len, lines.index_step, size, flag);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());

    EMBER_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp, sort_bytes, keys_in, keys, pos_in,
                                                     pos, len, 0, end_bit, stream.handle));

    const View* const ops[2] = {&lines.self, &lines.src};
    const OffsetCalc<2> calc = make_offset_calc<2>(ops);
    const SortedSumLaunch p = sorted_sum_launch(lines.lines, lines.len);
    const dim3 grid(unsigned(p.grid_x), unsigned(p.grid_y));
    visit_dtype(self.dtype, [&](auto data_tag) {
        using T = typename decltype(data_tag)::type;
        sorted_sum_kernel<T><<<grid, kSortedBlock, 0, stream.handle>>>(
            self.ptr<T>(), src.ptr<const T>(), keys, pos, calc, lines.lines, lines.len,
            lines.self_step, lines.src_step, uint32_t(size), p.line_shift);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::kernels::cuda

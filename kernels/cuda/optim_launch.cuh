// Device and host helpers of the CUDA multi-tensor updates
// (kernels/cuda/optim.cu): the launch table a kernel takes as its parameter
// (Note [Chunk tables as kernel parameters] in kernels/cuda/optim_plan.h),
// a block's walk over its chunk with vector loads where aligned, the
// low-precision copy of updated parameters, the per-chunk partial sums, a
// tensor's step values and the write of its next step count (in the
// update's last pass), and the host side that fills the tables and launches
// (counted: core/launch_count.h). Included by optim.cu only.
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/cuda_check.h"
#include "core/launch_count.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/loop.cuh"
#include "kernels/cuda/optim_plan.h"
#include "kernels/math.h"
#include "kernels/optim_args.h"
#include "kernels/optim_math.h"

namespace ember::kernels::cuda::optim_detail {

using math::Acc;
using math::cast;

// ---- The launch table (kernel parameters) ----

// One tensor entry as the kernels read it: 96 bytes.
struct Entry {
    void* param;
    const void* grad;
    void* state1;
    void* state2;
    void* state3;
    void* copy;
    const int64_t* step;           // the tensor's own step count, or null (Note [Device step counts])
    int64_t* next_step;            // where its first block writes the next count (with `step`)
    int64_t numel, first, chunk0;  // LaunchEntry's first and chunk0
    int32_t tensor, vec;           // the slot's index; 1: every buffer aligned for K-element loads
};

struct Launch {
    Entry e[kMaxLaunchTensors];
    int32_t n;             // entries used
    int64_t chunk_offset;  // the launch's first chunk in the list's numbering
};
// The kernel-parameter limit on sm_70+ since CUDA 12.1, with room for the
// other parameters of a kernel.
static_assert(sizeof(Launch) + 512 <= 32764, "the launch table must fit in the kernel parameters");

struct EntryFirst {
    const Entry* e;
    EMBER_HD int64_t operator()(int k) const { return e[k].first; }
};

// The entry of this block and the elements of its chunk.
__device__ __forceinline__ const Entry& entry_of(const Launch& lp) {
    return lp.e[find_entry(lp.n, blockIdx.x, EntryFirst{lp.e})];
}
__device__ __forceinline__ ChunkRange range_of(const Entry& e) {
    return chunk_range(blockIdx.x, e.first, e.chunk0, e.numel, kCudaChunk);
}

// Runs f(integral_constant<K>, i) on elements [i, i + K) of the chunk: K at
// a time where `vec`, the rest one at a time.
template <int K, class F>
__device__ __forceinline__ void walk(ChunkRange r, bool vec, F f) {
    int64_t i = r.begin + threadIdx.x;
    if constexpr (K > 1) {
        if (vec) {
            const int64_t vend = r.begin + (r.end - r.begin) / K * K;
            for (int64_t j = r.begin + int64_t(threadIdx.x) * K; j < vend;
                 j += int64_t(blockDim.x) * K)
                f(std::integral_constant<int, K>{}, j);
            i = vend + threadIdx.x;
        }
    }
    for (; i < r.end; i += blockDim.x) f(std::integral_constant<int, 1>{}, i);
}

template <int K, class A, class T>
__device__ __forceinline__ void load(const T* p, int64_t i, A (&out)[K]) {
    if constexpr (K == 1) {
        out[0] = cast<A>(p[i]);
    } else {
        const Pack<T, K> v = *reinterpret_cast<const Pack<T, K>*>(p + i);
#pragma unroll
        for (int k = 0; k < K; ++k) out[k] = cast<A>(v.v[k]);
    }
}

template <int K, class T, class A>
__device__ __forceinline__ void store(T* p, int64_t i, const A (&in)[K]) {
    if constexpr (K == 1) {
        p[i] = cast<T>(in[0]);
    } else {
        Pack<T, K> v;
#pragma unroll
        for (int k = 0; k < K; ++k) v.v[k] = cast<T>(in[k]);
        *reinterpret_cast<Pack<T, K>*>(p + i) = v;
    }
}

enum class CopyKind : int { f16, bf16, bf16_stochastic };
struct CopyArgs {
    CopyKind kind;
    uint64_t seed, step;
};

// The low-precision copy of the updated f32 parameters x (kernels/cpu/optim.cpp's write_copy).
template <class P, int K, class A>
__device__ __forceinline__ void write_copy(void* copy, const CopyArgs& c, int64_t i,
                                           const A (&x)[K]) {
    if constexpr (std::is_same_v<P, float>) {
        if (copy == nullptr) return;
        if (c.kind == CopyKind::f16) {
            store<K>(static_cast<Half*>(copy), i, x);
        } else if (c.kind == CopyKind::bf16) {
            store<K>(static_cast<BFloat16*>(copy), i, x);
        } else {
            BFloat16 r[K];
#pragma unroll
            for (int k = 0; k < K; ++k)
                r[k] = math::bf16_stochastic(x[k], math::rounding_bits(c.seed, c.step, i + k));
            store<K>(static_cast<BFloat16*>(copy), i, r);
        }
    }
}

// Two f64 sums reduced together.
struct Sum2 {
    double a, b;
};
struct AddSum2 {
    __device__ Sum2 operator()(Sum2 x, Sum2 y) const { return {x.a + y.a, x.b + y.b}; }
};

// Writes the block's partial sums (chunk lp.chunk_offset + blockIdx.x).
__device__ __forceinline__ void write_partials(const Launch& lp, Sum2 s, double* part1,
                                               double* part2) {
    const Sum2 t = block_reduce(s, AddSum2{});
    if (threadIdx.x == 0) {
        part1[lp.chunk_offset + blockIdx.x] = t.a;
        if (part2) part2[lp.chunk_offset + blockIdx.x] = t.b;
    }
}

// ---- Host side ----

// A launch's kernel parameters and its grid.
struct HostLaunch {
    Launch p;
    int64_t blocks;
};

inline bool aligned(const void* p, int64_t bytes) {
    return p == nullptr || reinterpret_cast<uintptr_t>(p) % uint64_t(bytes) == 0;
}

// The launches of `l`; K elements per vector load (the kernels' K for its
// parameter dtype). Where the slots have step counts, empty tensors get a
// block too: the one that writes their next count (writes_count).
inline std::vector<HostLaunch> launches_of(const UpdateList& l) {
    std::vector<int64_t> numels;
    bool counted = false;
    for (const UpdateSlot& s : l.slots) {
        numels.push_back(s.numel);
        counted = counted || s.step != nullptr;
    }
    const int64_t k = l.param == DType::f64 ? 2 : 4;
    const int64_t acc = l.param == DType::f64 ? 8 : 4;
    std::vector<HostLaunch> out;
    for (const UpdateLaunch& u :
         update_launches(numels, kCudaChunk, kMaxLaunchTensors, kMaxLaunchChunks, counted)) {
        HostLaunch& h = out.emplace_back();
        h.p.n = int32_t(u.entries.size());
        h.p.chunk_offset = u.chunk_offset;
        h.blocks = u.chunks;
        for (size_t i = 0; i < u.entries.size(); ++i) {
            const LaunchEntry& le = u.entries[i];
            const UpdateSlot& s = l.slots[size_t(le.tensor)];
            const bool vec = aligned(s.param, k * dtype_size(l.param)) &&
                             aligned(s.grad, k * dtype_size(l.grad)) &&
                             aligned(s.state1, k * acc) && aligned(s.state2, k * acc) &&
                             aligned(s.state3, k * acc) && aligned(s.copy, k * 2);
            h.p.e[i] = {s.param,  s.grad,    s.state1,  s.state2,  s.state3,    s.copy, s.step,
                        s.next_step, s.numel, le.first, le.chunk0, le.tensor, vec ? 1 : 0};
        }
    }
    return out;
}

inline int64_t total_chunks(const std::vector<HostLaunch>& ls) {
    int64_t n = 0;
    for (const HostLaunch& h : ls) n += h.blocks;
    return n;
}

// Launches kernel<<<blocks, kUpdateBlock>>>(launch, args...) for each
// launch, each counted under `name` (core/launch_count.h).
template <class Kernel, class... Args>
void launch_all(const char* name, const std::vector<HostLaunch>& ls, StreamRef stream,
                Kernel kernel, const Args&... args) {
    for (const HostLaunch& h : ls) {
        kernel<<<unsigned(h.blocks), kUpdateBlock, 0, stream.handle>>>(h.p, args...);
        EMBER_CUDA_CHECK(cudaGetLastError());
        count_launch(name);
    }
}

inline CopyArgs copy_args(const UpdateList& l) {
    const CopyKind kind = l.copy == DType::f16 ? CopyKind::f16
                          : l.stochastic_copy  ? CopyKind::bf16_stochastic
                                               : CopyKind::bf16;
    return {kind, l.seed, l.step};
}

// f(TypeTag<P>, TypeTag<G>) for the list's (param, grad) dtypes (as the CPU's).
template <class F>
void visit_signature(const UpdateList& l, const char* op, F f) {
    visit_floating(l.param, op, [&](auto ptag) {
        using P = typename decltype(ptag)::type;
        if (l.grad == l.param) return f(ptag, ptag);
        EMBER_INTERNAL_CHECK(
            l.param == DType::f32 && (l.grad == DType::bf16 || l.grad == DType::f16), op,
            ": parameters ", dtype_name(l.param), " with gradients ", dtype_name(l.grad));
        if constexpr (std::is_same_v<P, float>) {
            if (l.grad == DType::bf16) return f(ptag, TypeTag<BFloat16>{});
            return f(ptag, TypeTag<Half>{});
        }
    });
}

template <class P>
inline constexpr int kVec = sizeof(P) == 8 ? 2 : 4;

// ---- Step values and counts (Note [Device step counts], Note [Schedule
// tables] in kernels/optim.h) ----

// What an update kernel reads besides its tensors: the found-inf flag and
// the schedule tables.
struct StepArgs {
    const float* found_inf;
    ScheduleTables tables;
};

inline StepArgs step_args(const UpdateList& l) { return {l.found_inf, l.tables}; }

// The whole update is skipped: the found-inf flag is set (uniform over the grid).
__device__ __forceinline__ bool skip_update(const StepArgs& st) {
    return st.found_inf != nullptr && *st.found_inf != 0;
}

// Entry e's step, LR and momentum (or β1): from its own count and the
// tables where it has a count, else the host's (math::step_values).
__device__ __forceinline__ math::StepValues values_of(const Entry& e, const StepArgs& st,
                                                      int64_t host_t, double lr,
                                                      double momentum) {
    return math::step_values(e.step, host_t, lr, momentum, st.tables.lr, st.tables.momentum,
                             st.tables.size);
}

// In an update's last pass, before anything else: the block of the tensor's
// chunk 0 writes its next step count, count + 1, or count when the update is
// skipped. It is another word than the count every block of the tensor
// reads, so no block can see the count advanced, whatever the order the
// blocks run in; and the write is in the update's own launch, skipped or not.
__device__ __forceinline__ void advance_count(const Entry& e, bool skipped) {
    if (e.next_step != nullptr && threadIdx.x == 0 && writes_count(blockIdx.x, e.first, e.chunk0))
        *e.next_step = *e.step + (skipped ? 0 : 1);
}

}  // namespace ember::kernels::cuda::optim_detail

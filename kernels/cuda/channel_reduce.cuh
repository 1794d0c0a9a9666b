// Per-channel reductions for batch norm (kernels/cuda/batch_norm.cu): every
// value of each channel of a contiguous [N, C, S] folded into one State by an
// Op, then Op::finish(c, state) once per channel. Two walks, one contract:
//
// - planes (S > 1, NCHW): a channel's values are N runs of S contiguous
//   values; a 256-thread block per channel, or `splits` blocks per channel
//   writing partials that a second pass combines in order (ChannelPlan);
// - columns (S = 1: channels-last [N·H·W, C], or a [N, C] batch): a
//   channel is a column with stride C, so a block takes 32 neighbouring
//   columns × 8 row lanes and reads whole rows of them (coalesced); each of
//   `parts` row ranges writes a partial per column that a block per column
//   combines in a fixed order (ColumnPlan, the layer-norm column sums'
//   plan). perf: with C < 32 channels, 32 − C lanes of a tile idle.
//
// The Op provides: State and Merge (an associative combine), identity(),
// channel(c) (a per-channel context, e.g. the mean), add(state, i, ctx) with
// i the flat index of a value, and finish(c, state).
// Deterministic: which thread folds which value, and the order of every
// merge, depend on the shape alone. Plans: kernels/cuda/norm_plan.h (tested
// in tests/kernels/test_norm_plan.cpp).
#pragma once

#include <optional>

#include "core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/loop.cuh"
#include "kernels/cuda/norm_plan.h"
#include "kernels/cuda/workspace.h"

namespace ember::kernels::cuda::norm_detail {

// Logical block b reduces its chunk of channel b / splits (ChannelPlan);
// with one split it finishes the channel itself, else it writes partials[b].
template <class Op>
__global__ void __launch_bounds__(kNormThreads)
    channel_reduce_kernel(ChannelPlan p, Op op, typename Op::State* partials) {
    using State = typename Op::State;
    using Merge = typename Op::Merge;
    for (int64_t blk = blockIdx.x; blk < p.blocks; blk += gridDim.x) {
        const int64_t c = blk / p.splits, k = blk - c * p.splits, end = chunk_end(p, k);
        int64_t j = chunk_begin(p, k) + threadIdx.x;
        PlaneCursor at = PlaneCursor::at(p, j);
        const auto ctx = op.channel(c);
        State s = op.identity();
        for (; j < end; j += p.threads, at.advance(p)) s = op.add(s, at.offset(p, c), ctx);
        s = block_reduce(s, Merge{});
        if (threadIdx.x == 0) {
            if (p.splits == 1)
                op.finish(c, s);
            else
                partials[blk] = s;
        }
    }
}

// Block c merges channel c's `parts` partials, partial k at
// partials[c·c_stride + k·k_stride] (thread t: k = t, t + 256, ...; then the
// block's tree: a few channels may have ~1024 partials each, too long a
// chain for one thread), and finishes the channel.
template <class Op>
__global__ void __launch_bounds__(kNormThreads)
    combine_kernel(int64_t channels, int64_t parts, int64_t c_stride, int64_t k_stride, Op op,
                   const typename Op::State* partials) {
    using State = typename Op::State;
    using Merge = typename Op::Merge;
    for (int64_t c = blockIdx.x; c < channels; c += gridDim.x) {
        State s = op.identity();
        for (int64_t k = threadIdx.x; k < parts; k += blockDim.x)
            s = Merge{}(s, partials[c * c_stride + k * k_stride]);
        s = block_reduce(s, Merge{});
        if (threadIdx.x == 0) op.finish(c, s);
    }
}

// Column c of tile blockIdx.x over the rows of part blockIdx.y: thread
// (tx, ty) folds rows ty, ty + 8, ... of the part, then row lane 0 merges
// the 8 lanes in order of ty. One part: it finishes the column; more: it
// writes partials[part·C + c].
template <class Op>
__global__ void __launch_bounds__(kColTile* kColRows)
    column_reduce_kernel(ColumnPlan p, Op op, typename Op::State* partials) {
    using State = typename Op::State;
    using Merge = typename Op::Merge;
    __shared__ State lanes[kColRows][kColTile];
    const int tx = int(threadIdx.x), ty = int(threadIdx.y);
    const int64_t r0 = int64_t(blockIdx.y) * p.rows_per_part;
    const int64_t r1 = norm_min(p.R, r0 + p.rows_per_part);
    for (int64_t t = blockIdx.x; t < p.col_tiles; t += gridDim.x) {
        const int64_t c = t * kColTile + tx;
        State s = op.identity();
        if (c < p.M) {
            const auto ctx = op.channel(c);
            for (int64_t r = r0 + ty; r < r1; r += kColRows) s = op.add(s, r * p.M + c, ctx);
        }
        lanes[ty][tx] = s;
        __syncthreads();
        if (ty == 0 && c < p.M) {
            for (int y = 1; y < kColRows; ++y) s = Merge{}(s, lanes[y][tx]);
            if (p.parts == 1)
                op.finish(c, s);
            else
                partials[int64_t(blockIdx.y) * p.M + c] = s;
        }
        __syncthreads();
    }
}

/// Reduces every channel of a contiguous [N, C, S] with op and finishes each
/// once: by planes when S > 1, by columns of the [N, C] rows when S = 1.
template <class Op>
void reduce_channels(int64_t N, int64_t C, int64_t S, const Op& op, StreamRef stream) {
    using State = typename Op::State;
    std::optional<Workspace> partials;
    if (S == 1) {
        const ColumnPlan p = plan_columns(N, C);
        if (p.parts > 1) partials.emplace(stream, size_t(p.parts) * size_t(C) * sizeof(State));
        State* part = partials ? partials->template as<State>() : nullptr;
        column_reduce_kernel<<<dim3(unsigned(p.grid_x), unsigned(p.grid_y)),
                               dim3(kColTile, kColRows), 0, stream.handle>>>(p, op, part);
        EMBER_CUDA_CHECK(cudaGetLastError());
        if (p.parts == 1) return;
        const unsigned grid = unsigned(norm_min(C, kNormMaxGrid));
        combine_kernel<<<grid, kNormThreads, 0, stream.handle>>>(C, p.parts, 1, C, op, part);
        EMBER_CUDA_CHECK(cudaGetLastError());
        return;
    }
    const ChannelPlan p = plan_channels(N, C, S);
    if (p.splits > 1) partials.emplace(stream, size_t(p.blocks) * sizeof(State));
    State* part = partials ? partials->template as<State>() : nullptr;
    channel_reduce_kernel<<<unsigned(p.grid), p.threads, 0, stream.handle>>>(p, op, part);
    EMBER_CUDA_CHECK(cudaGetLastError());
    if (p.splits == 1) return;
    const unsigned grid = unsigned(norm_min(p.C, kNormMaxGrid));
    combine_kernel<<<grid, kNormThreads, 0, stream.handle>>>(C, p.splits, p.splits, 1, op, part);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::kernels::cuda::norm_detail

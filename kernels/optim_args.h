// What the fused optimizer kernels take (kernels/optim.h is the front): the
// chunk table, the slots of one fused call (each rule's hyper-parameters are
// in optim_hyper.h), and the notes on device step counts and schedule tables. No Tensor: both
// backends include this.
#pragma once

#include <cstdint>
#include <vector>

#include "../core/dtype.h"
#include "optim_hyper.h"

namespace ember::kernels {

// Note [Multi-tensor updates]
// An optimizer step touches many tensors of very different sizes. Instead of
// a loop of per-tensor ops (one pass, one launch and one set of temporaries
// each), the tensors of a group are cut into chunks of at most kUpdateChunk
// elements — a chunk never spans two tensors — and one pass walks the chunk
// table: the CPU runs its chunks in parallel with OpenMP, a CUDA kernel gives
// each block a chunk, reading the table from device memory, so one launch
// serves any number of tensors. Each element is read once and written once
// (Adam: p, g, m, v in; p, m, v out: 28 bytes per f32 parameter); nothing
// else is allocated. Elements are independent, so the result is bit-identical
// for any thread count; the per-tensor sums some rules need (the norms of
// LAMB, LARS and clipping) add each chunk's f64 partial in chunk order.

/// Elements per chunk: large enough to amortize the per-chunk bookkeeping,
/// small enough to balance threads over a few large tensors.
inline constexpr int64_t kUpdateChunk = 65536;

/// Elements [begin, begin + count) of tensor `tensor` of the list.
struct Chunk {
    int32_t tensor;
    int64_t begin;
    int64_t count;
};

/// The chunk table of tensors of `numels` elements: consecutive chunks of at
/// most `chunk` elements per tensor, tensors in order, empty tensors skipped.
std::vector<Chunk> chunk_table(const std::vector<int64_t>& numels, int64_t chunk = kUpdateChunk);

/// One tensor of a fused update, as both backends take it: dense buffers of
/// `numel` elements. Unused buffers are null.
struct UpdateSlot {
    void* param = nullptr;        ///< updated in place
    const void* grad = nullptr;   ///< read
    void* state1 = nullptr;       ///< exp_avg or the momentum buffer
    void* state2 = nullptr;       ///< exp_avg_sq
    void* state3 = nullptr;       ///< max_exp_avg_sq (AMSGrad)
    void* copy = nullptr;         ///< a low-precision copy written after the update
    int64_t numel = 0;
    const int64_t* step = nullptr;  ///< the tensor's applied steps so far (Note [Device step counts])
    int64_t* next_step = nullptr;   ///< written by the update: *step + 1, or *step when skipped
};

/// A schedule's values by step, in device memory (Note [Schedule tables]):
/// a tensor that has taken t applied steps uses entry min(t, size − 1).
struct ScheduleTables {
    const double* lr = nullptr;        ///< null: the Args' lr
    const double* momentum = nullptr;  ///< β1 (Adam, LAMB) or momentum (SGD, LARS); null: the Args'
    int64_t size = 0;
};

/// The tensors of one fused call, all of one dtype signature and device.
struct UpdateList {
    DType param = DType::f32, grad = DType::f32, state = DType::f32, copy = DType::bf16;
    std::vector<UpdateSlot> slots;
    std::vector<Chunk> chunks;
    bool stochastic_copy = false;  ///< bf16 copies by stochastic rounding
    uint64_t seed = 0, step = 0;   ///< its Philox stream (math::rounding_bits)
    const float* found_inf = nullptr;  ///< nonzero: skip the whole update (null: none)
    ScheduleTables tables;             ///< read where the slots have step counts
};

// Note [Device step counts]
// Adam's and LAMB's bias corrections need the step count t, SGD's and LARS's
// first step starts the momentum buffer differently. Given as the update
// call's `step` or `first`, the host must know t when it queues the update — but
// under loss scaling (amp::GradScaler) whether a step is applied is decided
// on the device (the found-inf flag), and reading that back would stall the
// host every step. So a tensor may carry its own step count on the
// parameters' device: the update reads it (UpdateTensors::steps, the steps
// applied so far), uses t = count + 1 (first = count == 0) in place of the
// call's step/first, computing the step's scalars itself (the CPU on the
// host, a CUDA block on the device, by the same formulas in f64), and writes
// count + 1 — or count, when the update was skipped — to a second place
// (UpdateTensors::next_steps), never to the one it read. That is what lets a
// CUDA update advance the counts in its own launch: every block of a tensor
// reads the count, and one of them (the tensor's first block) writes the
// next one; were it written in place, a block scheduled later could read the
// advanced count. The owner keeps two slots per count and swaps their roles
// after every update call that included the tensor, applied or skipped
// (optim::Optimizer: a host-side parity per parameter). Both backends write
// the next count even for a skipped update, so the parity never depends on
// the device's flag.
// With `found_inf` (a one-element f32 tensor, nonzero after an overflow) the
// update is skipped entirely when the flag is set: parameters, state and
// copies keep every bit, and the next count equals the count. The CPU reads
// the flag on the host (free); a CUDA kernel reads it in each block, so the
// host never waits.

// Note [Schedule tables]
// An LR schedule is a closed form of the applied step count (Note [Closed
// forms] in optim/schedule.cpp), so it can be written out ahead as a table:
// the LR, and the momentum or β1 where it cycles, for counts 0, 1, ..., n − 1.
// Given such tables (f64 tensors on the parameters' device) and step counts,
// an update takes lr = lr_table[min(count, n − 1)] (and β1 or momentum
// likewise) where it would take the Args' value: the LR follows the steps
// the device applied, and the host neither reads the found-inf flag nor
// writes an LR per step. The values are the schedule's own f64 numbers, so
// the update's arithmetic is the host-driven one's.

}  // namespace ember::kernels

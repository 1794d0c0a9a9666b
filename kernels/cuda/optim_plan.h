// How the CUDA multi-tensor updates (kernels/cuda/optim.cu) cut an
// UpdateList into launches: the list's chunk table (kernels::chunk_table, at
// the CUDA chunk size) split into launches of at most kMaxLaunchTensors
// tensor entries, each launch's tensors passed by value as a kernel parameter
// (Note [Chunk tables as kernel parameters]). Plain C++ with EMBER_HD lookup
// helpers, so the kernels and the CPU tests (tests/kernels/test_optim_plan.cpp)
// walk the same mapping.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../core/macros.h"

namespace ember::kernels::cuda {

// Note [Chunk tables as kernel parameters]
// A fused update needs, per block, its tensor's buffers and the range of its
// chunk. Rather than copy a table to device memory (which needs pinned
// staging memory kept alive until the copy has run, or a pageable copy that
// blocks the host), the launch carries the table itself: kernel parameters
// are copied by the launch, so nothing on the host outlives it. Since CUDA
// 12.1 a kernel on sm_70+ takes up to 32,764 bytes of parameters; a launch
// takes up to kMaxLaunchTensors tensors (88 bytes each) and any number of
// chunks, because each tensor entry stores where its chunks start and a block
// finds its entry by a binary search over those starts. A list with more
// tensors makes more launches (ceil(tensors / kMaxLaunchTensors)).
// Where the tensors carry step counts (Note [Device step counts] in
// kernels/optim.h), the block of a tensor's chunk 0 writes its next count
// (writes_count), in the update's own launch; a tensor of no elements then
// gets one block of an empty range, so that it too has that block.

/// Elements per chunk (one block each): 16 steps of 256 threads x 4 elements,
/// small enough that a 10 M-parameter model fills an H200 (610 blocks).
inline constexpr int64_t kCudaChunk = 16384;
/// Tensor entries per launch (256 x 88 bytes = 22 KiB of parameters).
inline constexpr int kMaxLaunchTensors = 256;
/// Chunks per launch: the grid's x limit, with room to spare.
inline constexpr int64_t kMaxLaunchChunks = int64_t(1) << 30;
/// Threads per block of the update kernels.
inline constexpr int kUpdateBlock = 256;

/// One tensor entry of a launch (host side; the kernels' entry adds pointers).
struct LaunchEntry {
    int32_t tensor = 0;  ///< index in the list's slots
    int64_t first = 0;   ///< the entry's first chunk, counted within the launch
    int64_t chunk0 = 0;  ///< ... which is chunk `chunk0` of its tensor
};

/// One launch: its entries (in list order) and its chunks, which are chunks
/// [chunk_offset, chunk_offset + chunks) of the whole list's table.
struct UpdateLaunch {
    std::vector<LaunchEntry> entries;
    int64_t chunk_offset = 0;
    int64_t chunks = 0;
};

/// Chunks of a tensor of `numel` elements.
EMBER_HD inline int64_t chunk_count(int64_t numel, int64_t chunk) {
    return (numel + chunk - 1) / chunk;
}

/// Blocks of a tensor of `numel` elements: one per chunk, and one (of an
/// empty range) for an empty tensor where `empty_block`.
EMBER_HD inline int64_t block_count(int64_t numel, int64_t chunk, bool empty_block) {
    return numel == 0 && empty_block ? 1 : chunk_count(numel, chunk);
}

/// The launches for tensors of `numels`: chunks in the order of
/// chunk_table(numels, chunk), empty tensors skipped (or, with
/// `empty_block`, given one block of an empty range), a new launch when
/// max_tensors entries or max_chunks chunks are reached (a tensor may then
/// continue in the next launch, as a new entry with chunk0 > 0).
inline std::vector<UpdateLaunch> update_launches(const std::vector<int64_t>& numels,
                                                 int64_t chunk = kCudaChunk,
                                                 int max_tensors = kMaxLaunchTensors,
                                                 int64_t max_chunks = kMaxLaunchChunks,
                                                 bool empty_block = false) {
    std::vector<UpdateLaunch> out;
    int64_t total = 0;  // chunks placed so far
    for (size_t t = 0; t < numels.size(); ++t) {
        int64_t c = 0;  // the tensor's next chunk
        const int64_t n = block_count(numels[t], chunk, empty_block);
        while (c < n) {
            if (out.empty() || int(out.back().entries.size()) == max_tensors ||
                out.back().chunks == max_chunks) {
                out.emplace_back();
                out.back().chunk_offset = total;
            }
            UpdateLaunch& l = out.back();
            const int64_t take = std::min(n - c, max_chunks - l.chunks);
            l.entries.push_back({int32_t(t), l.chunks, c});
            l.chunks += take;
            total += take;
            c += take;
        }
    }
    return out;
}

/// The entry of block `block` among `n` entries whose first chunks first(k)
/// increase strictly: the last k with first(k) <= block.
template <class First>
EMBER_HD inline int find_entry(int n, int64_t block, First first) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (first(mid) <= block)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/// Elements [begin, end) of block `block` of entry e (first, chunk0) of a
/// tensor of `numel` elements.
struct ChunkRange {
    int64_t begin, end;
};
EMBER_HD inline ChunkRange chunk_range(int64_t block, int64_t first, int64_t chunk0, int64_t numel,
                                       int64_t chunk) {
    const int64_t begin = (chunk0 + block - first) * chunk;
    return {begin, begin + chunk < numel ? begin + chunk : numel};
}

/// Whether block `block` of entry e (first, chunk0) is its tensor's chunk 0:
/// the one block per tensor, over all launches, that writes its next step
/// count.
EMBER_HD inline bool writes_count(int64_t block, int64_t first, int64_t chunk0) {
    return chunk0 == 0 && block == first;
}

}  // namespace ember::kernels::cuda

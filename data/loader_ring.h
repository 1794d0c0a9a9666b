// Internal to the Loader (data/loader.cpp, data/loader_ring.cpp): the staging
// ring and the epoch state that the caller's thread, the worker threads and
// the deleters of handed-out batches share under one mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "loader.h"

namespace ember::data {

using LoaderClock = std::chrono::steady_clock;

/// One staging buffer of the ring: room for a full batch, allocated once.
struct Slot {
    enum class State { free, filling, ready, out };
    Tensor input;   // f32 [batch_size, ...output sample shape]; tokens: i64 [batch_size, ...sample shape]
    Tensor target;  // i64 [batch_size]; tokens: i64 [batch_size, ...sample shape]
    State state = State::free;
    int64_t batch = -1;       // which batch it holds (filling, ready, out)
    uint64_t generation = 0;  // of the epoch it was claimed for
    int holders = 0;          // handed-out tensors still alive (out)
};

/// Per-thread buffers for one sample on its way through the transforms.
struct Scratch {
    std::vector<float> raw, a, b;
};

/// A batch a thread has taken on: where to write it and which epoch it is for.
struct Claim {
    int slot = -1;
    int64_t batch = 0;
    uint64_t generation = 0;
    int64_t epoch = 0;
    std::shared_ptr<const std::vector<int64_t>> order;
};

struct LoaderShared {
    // ---- Fixed at construction; read without the lock ----
    std::shared_ptr<const Dataset> dataset;
    Compose transforms;
    std::vector<Shape> plan;  // transforms' shapes: plan[0] the dataset's sample, back() the output
    int64_t batch_size = 0, num_samples = 0, num_batches = 0, out_numel = 0;
    int64_t total_samples = 0;  // in the dataset; num_samples: in this rank's shard
    bool tokens = false;        // SampleKind::tokens: i64 inputs and targets of the sample's shape
    uint64_t seed = 0;
    bool shuffle = true;
    int rank = 0, world_size = 1;  // this loader's shard: positions rank, rank + world_size, ...
    int threads = 0;  // worker threads (0: the caller loads)
    Scratch caller;   // the caller's buffers when it loads (threads == 0)

    // ---- Guarded by mu ----
    mutable std::mutex mu;
    std::condition_variable work_cv;   // workers wait: a slot freed, an epoch begun, stop
    std::condition_variable ready_cv;  // the caller waits: a batch is ready or has failed
    std::vector<Slot> slots;
    bool stop = false, begun = false, finished = false;
    uint64_t generation = 0;
    int64_t epoch = 0, next_claim = 0, next_consume = 0;
    std::shared_ptr<const std::vector<int64_t>> order;
    int64_t failed_batch = -1;  // lowest batch whose loading failed, and why
    std::string failure;
    // Statistics of the current epoch.
    LoaderClock::time_point start, last;
    double wait_seconds = 0, busy_seconds = 0, bytes_read = 0;
    int64_t batches = 0, samples = 0;

    /// Samples in batch b (the last one may be short).
    int64_t batch_count(int64_t b) const {
        return std::min(batch_size, num_samples - b * batch_size);
    }
    /// Index of a slot in `state` (holding batch b when b >= 0), or -1.
    int find_slot(Slot::State state, int64_t b = -1) const;
    /// True when a worker may take the next batch.
    bool can_claim() const;
    /// Takes the next batch and a free slot (requires can_claim()).
    Claim claim();
    /// Records the end of a claimed batch: ready, failed (error set) or stale.
    void finish(const Claim& c, const std::optional<std::string>& error, double seconds);
    /// A handed-out tensor of slot s died.
    void release(int s);
};

/// Scratch sized for one sample through `sh.transforms`.
Scratch make_scratch(const LoaderShared& sh);
/// Loads batch c.batch into its slot; the error message (naming the sample) on failure.
std::optional<std::string> fill_batch(const LoaderShared& sh, const Claim& c, Scratch& scratch);
/// A worker thread: claims, fills and finishes batches until sh->stop.
void worker_main(std::shared_ptr<LoaderShared> sh, Scratch scratch);
/// The batch tensors of slot s (count samples), whose deleters release the slot.
Batch make_batch(const std::shared_ptr<LoaderShared>& sh, int s, int64_t count);

}  // namespace ember::data

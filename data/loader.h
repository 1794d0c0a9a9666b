// Loader: batches from a Dataset, assembled by worker threads straight into a
// ring of (pinned) staging buffers and handed out in a fixed order that
// depends only on (seed, epoch) — never on the number of workers or thread
// timing (docs/tips.md #3). It counts the time the consumer waited, bytes read and
// how busy the workers were (docs/tips.md #14). Guide: docs/data.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "../core/device.h"
#include "../core/tensor.h"
#include "dataset.h"
#include "transforms.h"

namespace ember::data {

/// How a Loader batches, orders and delivers samples.
struct LoaderOptions {
    /// Samples per batch, >= 1. A batch never holds more than the dataset,
    /// so staging memory is sized for min(batch_size, dataset size) samples;
    /// a ring that would not fit in the machine's memory is refused with an
    /// error naming batch_size.
    int64_t batch_size = 64;
    /// A new permutation of the samples every epoch, from (seed, epoch).
    bool shuffle = true;
    /// Skip the last batch when it would be smaller than batch_size.
    bool drop_last = false;
    /// Keys the shuffle and the per-sample augmentation streams.
    uint64_t seed = 0;
    /// Worker threads: -1 means one per core (at least 1); 0 loads each batch
    /// on the thread that calls next().
    int workers = -1;
    /// Staging slots in the ring: batches loaded ahead plus batches the caller
    /// still holds. 0 means workers + 2 (2 without workers).
    int prefetch = 0;
    /// Page-locked staging memory, for asynchronous copies to a GPU. Default:
    /// on when `device` is CUDA. Ignored (ordinary memory) without a GPU.
    std::optional<bool> pin_memory = std::nullopt;
    /// Where batches are delivered.
    Device device = Device::cpu();
    /// Samples per epoch: the first samples_per_epoch positions of the
    /// epoch's order (so, shuffled, a fresh draw from the whole dataset each
    /// epoch, without repeats); 0 or more than the dataset: all of it. How an
    /// epoch of a text model is a fixed number of windows.
    int64_t samples_per_epoch = 0;
    /// Data parallelism: this loader delivers shard `rank` of `world_size`.
    /// Every rank draws the same permutation of the whole dataset (same seed
    /// and epoch) and takes positions rank, rank + world_size, ...; the
    /// last size % world_size positions are left out so that every rank has
    /// size / world_size samples and the same number of batches.
    int rank = 0;
    int world_size = 1;
};

/// One batch: inputs f32 [B, ...sample shape after transforms] and targets
/// i64 [B] (classification), or inputs and targets i64 [B, ...sample shape]
/// (tokens, SampleKind::tokens). On the CPU the tensors are views of a
/// staging slot, which is reused only once both tensors (and every view of
/// them) are gone.
struct Batch {
    Tensor input;
    Tensor target;
    int64_t index = 0;  // batch number within the epoch
    int64_t epoch = 0;
};

/// What one epoch cost (so far, when read mid-epoch).
struct LoaderStats {
    int64_t epoch = 0;
    int64_t batches = 0;         // handed out
    int64_t samples = 0;         // in those batches
    int workers = 0;             // threads that loaded (0: the caller did)
    double elapsed_seconds = 0;  // begin of the epoch to the last batch handed out
    double wait_seconds = 0;     // the caller's time inside next() waiting for data
    double wait_fraction = 0;    // wait_seconds / elapsed_seconds
    double batches_per_second = 0;
    double samples_per_second = 0;
    double bytes_read = 0;  // from the dataset's storage (Dataset::bytes_per_sample)
    double read_bytes_per_second = 0;
    double worker_busy_fraction = 0;  // loading time / (threads x elapsed)
};

struct LoaderShared;    // the ring and the epoch state, shared with workers and handed-out batches
struct DeviceTransfer;  // the copy stream and event for a CUDA target (data/loader.cpp)

/// Batches of a dataset. Use from one thread:
///     Loader loader(dataset, {.batch_size = 128, .seed = 1}, Compose{RandomHorizontalFlip()});
///     for (int64_t e = 0; e < epochs; ++e)
///         for (Batch& b : loader.epoch(e)) train_step(b.input, b.target);
/// Holding batches keeps their staging slots: a caller that keeps `prefetch`
/// batches alive stalls the workers, and its next() throws rather than wait forever.
class Loader {
  public:
    /// Batches of `dataset` (kept alive while the loader or any batch is),
    /// with `transforms` applied per sample. Allocates the staging ring and
    /// starts the workers; throws ember::Error for bad options or transforms
    /// that do not fit the samples.
    Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options = {},
           Compose transforms = {});
    /// Stops and joins the workers, also mid-epoch. Batches still held stay valid.
    ~Loader();
    Loader(const Loader&) = delete;
    Loader& operator=(const Loader&) = delete;

    /// Starts epoch `epoch` (any epoch, in any order: resuming is begin_epoch(k)),
    /// abandoning the rest of the current one. With `first_batch`, the epoch
    /// starts at that batch: it and the ones after are exactly those a full
    /// epoch would give (order and augmentation depend on the position in
    /// the epoch only), which is how a run resumes mid-epoch.
    void begin_epoch(int64_t epoch, int64_t first_batch = 0);
    /// The next batch of the epoch, in order, or nullopt after the last one.
    /// Starts epoch 0 if none was begun. A worker's error (a corrupt sample, say)
    /// is thrown here as an ember::Error naming the sample, once the batches
    /// before it were delivered; it is thrown again until begin_epoch.
    std::optional<Batch> next();

    /// Batches per epoch.
    int64_t size() const { return num_batches_; }
    /// The epoch begun last.
    int64_t current_epoch() const;
    LoaderStats stats() const;
    const LoaderOptions& options() const { return options_; }
    int workers() const { return int(threads_.size()); }
    int prefetch() const { return prefetch_; }
    /// Whether the staging memory really is page-locked.
    bool pinned() const { return pinned_; }
    /// Shape of one input sample after the transforms.
    const Shape& sample_shape() const;

    /// One epoch as a range: `for (Batch& b : loader.epoch(e))`.
    class EpochRange;
    EpochRange epoch(int64_t epoch);

  private:
    void stop_workers();

    LoaderOptions options_;
    int64_t num_batches_ = 0;
    int prefetch_ = 0;
    bool pinned_ = false;
    std::shared_ptr<LoaderShared> shared_;
    std::vector<std::thread> threads_;
    std::unique_ptr<DeviceTransfer> transfer_;  // only for a CUDA target
};

class Loader::EpochRange {
  public:
    struct End {};
    class Iterator {
      public:
        explicit Iterator(Loader* loader) : loader_(loader) { batch_ = loader_->next(); }
        Batch& operator*() { return *batch_; }
        Iterator& operator++() {
            batch_.reset();  // drop the slot before asking for the next batch
            batch_ = loader_->next();
            return *this;
        }
        bool operator!=(End) const { return batch_.has_value(); }

      private:
        Loader* loader_;
        std::optional<Batch> batch_;
    };
    EpochRange(Loader* loader, int64_t epoch) : loader_(loader), epoch_(epoch) {}
    Iterator begin() {
        loader_->begin_epoch(epoch_);
        return Iterator(loader_);
    }
    End end() { return {}; }

  private:
    Loader* loader_;
    int64_t epoch_;
};

inline Loader::EpochRange Loader::epoch(int64_t epoch) { return EpochRange(this, epoch); }

/// The order of the samples in `epoch`: a Philox-driven Fisher-Yates shuffle
/// of [0, n) keyed by (seed, epoch) when shuffle, else 0, 1, ..., n - 1.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace ember::data

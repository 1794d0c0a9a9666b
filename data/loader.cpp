// The Loader's public side: options, epochs and their order, next() (waiting
// for a worker, or loading on the caller's thread), statistics, and the move
// of a batch to its device.
#include "data/loader.h"

#include "core/cuda_context.h"
#include "core/cuda_stream.h"

#include <unistd.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "data/loader_ring.h"
#include "data/random.h"
#include "kernels/profile.h"

namespace ember::data {

namespace {

double seconds_between(LoaderClock::time_point a, LoaderClock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// Note [Moving a batch to the device]
// A batch for a CUDA target is copied from its (pinned) staging slot on the
// loader's own copy stream with cudaMemcpyAsync; an event recorded after the
// copies makes the consumer's current stream (core/cuda_context.h) — where
// its kernels on the batch run — wait for them, so next() returns without waiting for the copy and the copy
// overlaps whatever the GPU is still computing (docs/tips.md #3). The staging slot
// must not be refilled while its copy may still be reading it: the host batch
// is kept until the next call, which first waits for the previous copy's
// event (long done by then: a training step ran in between). The batch's
// device memory is allocated for the copy stream, which writes it, and then
// recorded as used on the consumer's stream (record_stream), so the cache
// does not hand it out again before the consumer's work on it is done.

// Refuses a staging ring (inputs f32 and targets i64 for `rows` samples of
// `numel` values, `slots` times; tokens: inputs and targets i64 of `numel`)
// that overflows or exceeds the machine's memory, naming the options to
// change, before anything is allocated.
void check_ring_size(int64_t rows, int64_t numel, int slots, bool tokens, const LoaderOptions& o) {
    const auto say = [&] {
        return str("Loader: batch_size ", o.batch_size, " (", rows, " samples per batch) of ",
                   numel, tokens ? " tokens" : " f32 values", " each, in ", slots,
                   " staging slots (prefetch ", o.prefetch, ")");
    };
    int64_t per_row = 0, slot = 0, ring = 0;
    EMBER_CHECK(!__builtin_mul_overflow(numel, int64_t(tokens ? 16 : 4), &per_row) &&
                    !__builtin_add_overflow(per_row, int64_t(tokens ? 0 : 8), &per_row) &&
                    !__builtin_mul_overflow(per_row, rows, &slot) &&
                    !__builtin_mul_overflow(slot, int64_t(slots), &ring),
                say(), ": the staging memory's size overflows; lower batch_size");
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    const double memory = pages > 0 && page > 0 ? double(pages) * double(page) : 0;
    EMBER_CHECK(memory == 0 || double(ring) <= memory, say(), " need ", ring,
                " bytes of staging memory, more than this machine's ", int64_t(memory),
                " bytes; lower batch_size or prefetch");
}

}  // namespace

struct DeviceTransfer {
    explicit DeviceTransfer(Device device) : stream(device), done(device) {}
    ~DeviceTransfer() {
        // The last copy may still read its staging slot: let it finish first.
        if (in_flight.input.defined()) {
            try {
                done.synchronize();
            } catch (const std::exception&) {  // destructors do not throw
            }
        }
    }
    CudaStream stream;
    CudaEvent done;
    Batch in_flight;  // host batch whose copy `done` marks the end of

    Batch move(Batch host, Device device) {
        if (in_flight.input.defined()) {
            done.synchronize();
            in_flight = Batch();  // its staging slot may now be refilled
        }
        Batch out;
        const StreamRef consumer = current_stream(device);
        {
            // Allocated for the copy stream, which writes them: memory the
            // cache hands out for the consumer's stream may still be read by
            // work queued there, which the copy stream would not wait for.
            const StreamGuard on_copy_stream(stream.ref());
            out.input = empty(host.input.shape(), {host.input.dtype(), device});
            out.target = empty(host.target.shape(), {host.target.dtype(), device});
        }
        for (auto [dst, src] : {std::pair{&out.input, &host.input}, {&out.target, &host.target}})
            stream.copy_async(dst->data_ptr(), src->data_ptr(),
                              size_t(src->numel() * src->element_size()));
        done.record(stream.ref());
        // The consumer's current stream — where its kernels on the batch
        // will queue — waits for the copies; the host does not. Its use is
        // recorded, so the blocks are not reused before that work is done.
        done.wait(consumer);
        CudaContext& ctx = CudaContext::of(device);
        ctx.record_stream(out.input.storage()->data(), consumer);
        ctx.record_stream(out.target.storage()->data(), consumer);
        out.index = host.index;
        out.epoch = host.epoch;
        in_flight = std::move(host);
        return out;
    }
};

std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch) {
    EMBER_CHECK(n >= 0, "epoch_order: n must be >= 0, got ", n);
    EMBER_CHECK(epoch >= 0 && uint64_t(epoch) <= kMaxStreamSub, "epoch_order: epoch ", epoch,
                " is not in [0, 2^56)");
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t(0));
    if (!shuffle) return order;
    EMBER_CHECK(n <= (int64_t(1) << 32), "epoch_order: cannot shuffle ", n,
                " samples (at most 2^32)");
    // Fisher-Yates from the back: step k swaps position i = n-1-k with
    // j = bounded(word k, i + 1), word k being word k % 4 of block k / 4.
    Philox4 block{};
    for (int64_t k = 0; k + 1 < n; ++k) {
        if (k % 4 == 0)
            block = philox_block(seed, uint64_t(k / 4), kShuffleStream | uint64_t(epoch));
        const int64_t i = n - 1 - k;
        const int64_t j = int64_t(bounded_u32(block.x[k % 4], uint64_t(i + 1)));
        std::swap(order[size_t(i)], order[size_t(j)]);
    }
    return order;
}

Loader::Loader(std::shared_ptr<const Dataset> dataset, LoaderOptions options, Compose transforms)
    : options_(options), shared_(std::make_shared<LoaderShared>()) {
    EMBER_CHECK(dataset != nullptr, "Loader: no dataset");
    const LoaderOptions& o = options_;
    EMBER_CHECK(o.batch_size >= 1, "Loader: batch_size must be >= 1, got ", o.batch_size);
    EMBER_CHECK(o.workers >= -1 && o.workers <= 1024,
                "Loader: workers must be -1 (one per core), 0 "
                "(load on the calling thread) or up to 1024, got ",
                o.workers);
    EMBER_CHECK(o.prefetch >= 0 && o.prefetch <= 4096,
                "Loader: prefetch must be in [0, 4096] "
                "(0: workers + 2), got ",
                o.prefetch);
    if (o.device.is_cuda()) {
        EMBER_CHECK(cuda_built(), "Loader: device ", o.device,
                    " needs the CUDA backend; ember was built without it");
        EMBER_CHECK(o.device.index >= 0 && o.device.index < cuda_device_count(), "Loader: device ",
                    o.device, " is not available (", cuda_device_count(), " CUDA device(s))");
    }
    LoaderShared& sh = *shared_;
    sh.dataset = std::move(dataset);
    sh.transforms = std::move(transforms);
    sh.tokens = sh.dataset->kind() == SampleKind::tokens;
    EMBER_CHECK(!sh.tokens || sh.transforms.empty(), "Loader: transforms apply to f32 inputs; ",
                "this dataset's samples are tokens");
    sh.plan = sh.transforms.plan(sh.dataset->sample_shape());
    sh.out_numel = shape_numel(sh.plan.back());
    EMBER_CHECK(sh.out_numel > 0 && shape_numel(sh.plan[0]) > 0, "Loader: samples of shape ",
                shape_str(sh.plan[0]), " (", shape_str(sh.plan.back()),
                " after the transforms) have no elements");
    sh.batch_size = o.batch_size;
    EMBER_CHECK(o.world_size >= 1 && o.rank >= 0 && o.rank < o.world_size, "Loader: rank ",
                o.rank, " is not a rank of world_size ", o.world_size);
    sh.total_samples = sh.dataset->size();
    EMBER_CHECK(sh.total_samples >= 0, "Loader: the dataset reports ", sh.total_samples,
                " samples");
    EMBER_CHECK(o.samples_per_epoch >= 0, "Loader: samples_per_epoch must be >= 0, got ",
                o.samples_per_epoch);
    const int64_t per_epoch = o.samples_per_epoch > 0
                                  ? std::min(o.samples_per_epoch, sh.total_samples)
                                  : sh.total_samples;
    sh.num_samples = per_epoch / o.world_size;
    sh.rank = o.rank;
    sh.world_size = o.world_size;
    EMBER_CHECK(!o.shuffle || sh.total_samples <= (int64_t(1) << 32), "Loader: cannot shuffle ",
                sh.total_samples, " samples (at most 2^32)");
    // (n + batch_size - 1) / batch_size would overflow for a batch_size near 2^63.
    sh.num_batches = sh.num_samples / o.batch_size +
                     (!o.drop_last && sh.num_samples % o.batch_size != 0 ? 1 : 0);
    num_batches_ = sh.num_batches;
    sh.seed = o.seed;
    sh.shuffle = o.shuffle;

    int threads = o.workers;
    if (threads < 0) threads = std::max(1, int(std::thread::hardware_concurrency()));
    sh.threads = threads;
    prefetch_ = o.prefetch > 0 ? o.prefetch : threads + 2;
    // Pinned memory needs the CUDA runtime and a device; without them it is
    // ordinary memory, and pinned() says so.
    pinned_ = o.pin_memory.value_or(o.device.is_cuda()) && cuda_built() && cuda_device_count() > 0;
    if (o.device.is_cuda()) {
        transfer_ = std::make_unique<DeviceTransfer>(o.device);
        if (o.prefetch <= 0) prefetch_ += 1;  // the slot whose copy may still be in flight
    }

    // A batch never holds more than the whole dataset: slots are sized for
    // that many samples, so any batch_size works for a small dataset.
    const int64_t rows = std::max<int64_t>(1, std::min(o.batch_size, sh.num_samples));
    check_ring_size(rows, sh.out_numel, prefetch_, sh.tokens, o);
    Shape in_shape = sh.plan.back();
    in_shape.insert(in_shape.begin(), rows);
    sh.slots.resize(size_t(prefetch_));
    for (Slot& s : sh.slots) {
        s.input = empty(in_shape, {.dtype = sh.tokens ? DType::i64 : DType::f32, .pinned = pinned_});
        s.target = empty(sh.tokens ? in_shape : Shape{rows}, {.dtype = DType::i64, .pinned = pinned_});
    }
    if (threads == 0) sh.caller = make_scratch(sh);
    try {
        for (int t = 0; t < threads; ++t)
            threads_.emplace_back(worker_main, shared_, make_scratch(sh));
    } catch (...) {
        stop_workers();  // a thread that could not start: join the others before throwing
        throw;
    }
}

void Loader::stop_workers() {
    {
        std::lock_guard<std::mutex> lock(shared_->mu);
        shared_->stop = true;
    }
    shared_->work_cv.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
}

Loader::~Loader() { stop_workers(); }

void Loader::begin_epoch(int64_t epoch, int64_t first_batch) {
    LoaderShared& sh = *shared_;
    EMBER_CHECK(first_batch >= 0 && first_batch <= sh.num_batches, "Loader: first batch ",
                first_batch, " is outside the epoch's ", sh.num_batches, " batches");
    std::vector<int64_t> whole = epoch_order(sh.total_samples, sh.shuffle, sh.seed, epoch);
    if (sh.world_size > 1) {  // this rank's shard (LoaderOptions::rank)
        for (int64_t k = 0; k < sh.num_samples; ++k)
            whole[size_t(k)] = whole[size_t(sh.rank + k * sh.world_size)];
        whole.resize(size_t(sh.num_samples));
    }
    auto order = std::make_shared<const std::vector<int64_t>>(std::move(whole));
    {
        std::lock_guard<std::mutex> lock(sh.mu);
        ++sh.generation;  // batches still loading for the old epoch are dropped when done
        for (Slot& s : sh.slots)
            if (s.state == Slot::State::ready) s.state = Slot::State::free;
        sh.epoch = epoch;
        sh.order = std::move(order);
        sh.next_claim = sh.next_consume = first_batch;
        sh.failed_batch = -1;
        sh.failure.clear();
        sh.begun = true;
        sh.finished = false;
        sh.start = sh.last = LoaderClock::now();
        sh.wait_seconds = sh.busy_seconds = sh.bytes_read = 0;
        sh.batches = sh.samples = 0;
    }
    sh.work_cv.notify_all();
}

std::optional<Batch> Loader::next() {
    // Waiting for a batch (or loading it here, without workers), and the
    // copy's hand-over: what the step waits on the data.
    const kernels::ProfileRange range("loader", "loader.next");
    LoaderShared& sh = *shared_;
    std::unique_lock<std::mutex> lock(sh.mu);
    if (!sh.begun) {
        lock.unlock();
        begin_epoch(0);
        lock.lock();
    }
    const auto t0 = LoaderClock::now();
    const int64_t b = sh.next_consume;
    int s = -1;
    for (;;) {
        if (sh.failed_batch >= 0 && sh.failed_batch <= b) EMBER_FAIL(sh.failure);
        if (b >= sh.num_batches) {
            if (!sh.finished) sh.last = t0;  // the epoch's time ends when its end is seen
            sh.finished = true;
            return std::nullopt;
        }
        if ((s = sh.find_slot(Slot::State::ready, b)) >= 0) break;
        // Claims go in order, so if b is not claimed every batch in the ring is
        // one the caller still holds: waiting would never end.
        EMBER_CHECK(sh.next_claim > b || sh.find_slot(Slot::State::free) >= 0 ||
                        sh.find_slot(Slot::State::filling) >= 0,
                    "Loader: all ", sh.slots.size(),
                    " staging slots are held by batches "
                    "still alive; drop old batches before asking for more, or raise "
                    "LoaderOptions::prefetch");
        if (sh.threads == 0 && sh.can_claim()) {  // no workers: load it here
            const Claim c = sh.claim();
            lock.unlock();
            const auto f0 = LoaderClock::now();
            const std::optional<std::string> error = fill_batch(sh, c, sh.caller);
            const double seconds = seconds_between(f0, LoaderClock::now());
            lock.lock();
            sh.finish(c, error, seconds);
            continue;
        }
        sh.ready_cv.wait(lock);
    }
    Slot& slot = sh.slots[size_t(s)];
    slot.state = Slot::State::out;
    slot.holders = 2;  // input and target
    ++sh.next_consume;
    const int64_t count = sh.batch_count(b);
    const auto t1 = LoaderClock::now();
    sh.wait_seconds += seconds_between(t0, t1);
    sh.last = t1;
    sh.batches += 1;
    sh.samples += count;
    const int64_t epoch = sh.epoch;
    lock.unlock();

    Batch batch = make_batch(shared_, s, count);
    batch.index = b;
    batch.epoch = epoch;
    if (transfer_) return transfer_->move(std::move(batch), options_.device);
    return batch;
}

int64_t Loader::current_epoch() const {
    std::lock_guard<std::mutex> lock(shared_->mu);
    return shared_->epoch;
}

const Shape& Loader::sample_shape() const { return shared_->plan.back(); }

LoaderStats Loader::stats() const {
    const LoaderShared& sh = *shared_;
    std::lock_guard<std::mutex> lock(sh.mu);
    LoaderStats st;
    st.epoch = sh.epoch;
    st.batches = sh.batches;
    st.samples = sh.samples;
    st.workers = sh.threads;
    st.elapsed_seconds = seconds_between(sh.start, sh.last);
    st.wait_seconds = sh.wait_seconds;
    st.bytes_read = sh.bytes_read;
    if (st.elapsed_seconds > 0) {
        const double e = st.elapsed_seconds;
        st.wait_fraction = st.wait_seconds / e;
        st.batches_per_second = double(st.batches) / e;
        st.samples_per_second = double(st.samples) / e;
        st.read_bytes_per_second = st.bytes_read / e;
        // Mid-epoch, batches loaded ahead count as busy time before their
        // hand-out extends `elapsed`: clamp so the fraction stays a fraction.
        st.worker_busy_fraction =
            std::min(1.0, sh.busy_seconds / (double(std::max(sh.threads, 1)) * e));
    }
    return st;
}

}  // namespace ember::data

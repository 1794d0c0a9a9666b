// The loader's staging ring: claiming a batch and a free slot, filling it
// (read, transform, write once into the slot), the worker loop, and the
// batch tensors whose deleters hand the slot back.
#include "data/loader_ring.h"

#include <exception>

#include "core/error.h"
#include "data/random.h"

namespace ember::data {

int LoaderShared::find_slot(Slot::State state, int64_t b) const {
    for (size_t s = 0; s < slots.size(); ++s)
        if (slots[s].state == state && (b < 0 || slots[s].batch == b)) return int(s);
    return -1;
}

bool LoaderShared::can_claim() const {
    return begun && !stop && failed_batch < 0 && next_claim < num_batches &&
           find_slot(Slot::State::free) >= 0;
}

Claim LoaderShared::claim() {
    const int s = find_slot(Slot::State::free);
    EMBER_INTERNAL_ASSERT(s >= 0 && next_claim < num_batches);
    Slot& slot = slots[size_t(s)];
    slot.state = Slot::State::filling;
    slot.batch = next_claim;
    slot.generation = generation;
    return {s, next_claim++, generation, epoch, order};
}

void LoaderShared::finish(const Claim& c, const std::optional<std::string>& error, double seconds) {
    Slot& slot = slots[size_t(c.slot)];
    if (c.generation != generation) {  // begin_epoch came while it loaded: drop it
        slot.state = Slot::State::free;
        work_cv.notify_one();
        return;
    }
    busy_seconds += seconds;
    if (error) {
        slot.state = Slot::State::free;
        if (failed_batch < 0 || c.batch < failed_batch) {
            failed_batch = c.batch;
            failure = *error;
        }
    } else {
        slot.state = Slot::State::ready;
        bytes_read += double(batch_count(c.batch)) * double(dataset->bytes_per_sample());
    }
    ready_cv.notify_all();
}

void LoaderShared::release(int s) {
    std::lock_guard<std::mutex> lock(mu);
    Slot& slot = slots[size_t(s)];
    if (--slot.holders == 0) {
        slot.state = Slot::State::free;
        work_cv.notify_one();
    }
}

Scratch make_scratch(const LoaderShared& sh) {
    Scratch s;
    if (sh.transforms.empty()) return s;  // read_batch writes straight into the slot
    const int64_t n = Compose::scratch_numel(sh.plan);
    s.raw.resize(size_t(shape_numel(sh.plan[0])));
    s.a.resize(size_t(n));
    s.b.resize(size_t(n));
    return s;
}

namespace {

std::string what_of(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const std::exception& x) {
        return x.what();
    } catch (...) {
        return "an exception that is not a std::exception";
    }
}

}  // namespace

std::optional<std::string> fill_batch(const LoaderShared& sh, const Claim& c, Scratch& scratch) {
    const Slot& slot = sh.slots[size_t(c.slot)];
    const std::vector<int64_t>& order = *c.order;
    const int64_t start = c.batch * sh.batch_size, count = sh.batch_count(c.batch);
    const int64_t in_numel = shape_numel(sh.plan[0]);
    const Dataset& ds = *sh.dataset;
    auto failed = [&](int64_t k, const std::exception_ptr& e) {
        return str("Loader: sample ", order[size_t(start + k)], " (position ", start + k,
                   ", batch ", c.batch, " of epoch ", c.epoch, ") failed: ", what_of(e));
    };
    if (sh.tokens) {  // ids and next ids, straight into the slot
        int64_t* ids = slot.input.data<int64_t>();
        int64_t* next = slot.target.data<int64_t>();
        for (int64_t k = 0; k < count; ++k) {
            try {
                ds.read_tokens(order[size_t(start + k)], ids + k * in_numel, next + k * in_numel);
            } catch (...) {
                return failed(k, std::current_exception());
            }
        }
        return std::nullopt;
    }
    float* inputs = slot.input.data<float>();
    int64_t* labels = slot.target.data<int64_t>();

    if (sh.transforms.empty()) {
        try {
            ds.read_batch(order.data() + start, count, inputs, labels);
            return std::nullopt;
        } catch (...) {
            // The batch path does not say which sample broke: find it one by one.
            const std::exception_ptr batch_error = std::current_exception();
            for (int64_t k = 0; k < count; ++k) {
                try {
                    ds.read(order[size_t(start + k)], inputs + k * in_numel);
                } catch (...) {
                    return failed(k, std::current_exception());
                }
            }
            return str("Loader: batch ", c.batch, " of epoch ", c.epoch, " (positions ", start,
                       " to ", start + count - 1, ") failed: ", what_of(batch_error));
        }
    }
    for (int64_t k = 0; k < count; ++k) {
        try {
            labels[k] = ds.read(order[size_t(start + k)], scratch.raw.data());
            // Keyed by the position in the whole epoch's order, so a shard
            // augments each sample as one loader over everything would.
            const int64_t position = sh.rank + sh.world_size * (start + k);
            SampleRng rng = augment_rng(sh.seed, uint64_t(c.epoch), uint64_t(position));
            sh.transforms.apply(scratch.raw.data(), sh.plan, inputs + k * sh.out_numel, rng,
                                scratch.a.data(), scratch.b.data());
        } catch (...) {
            return failed(k, std::current_exception());
        }
    }
    return std::nullopt;
}

void worker_main(std::shared_ptr<LoaderShared> sh, Scratch scratch) {
    std::unique_lock<std::mutex> lock(sh->mu);
    for (;;) {
        sh->work_cv.wait(lock, [&] { return sh->stop || sh->can_claim(); });
        if (sh->stop) return;
        const Claim c = sh->claim();
        lock.unlock();
        const auto t0 = LoaderClock::now();
        const std::optional<std::string> error = fill_batch(*sh, c, scratch);
        const double seconds = std::chrono::duration<double>(LoaderClock::now() - t0).count();
        lock.lock();
        sh->finish(c, error, seconds);
    }
}

Batch make_batch(const std::shared_ptr<LoaderShared>& sh, int s, int64_t count) {
    const Slot& slot = sh->slots[size_t(s)];
    // Each tensor gets its own storage over the slot's memory; its deleter
    // (run when the tensor and all its views are gone) hands the slot back.
    auto wrap = [&](const Tensor& buf, const Shape& shape) {
        const size_t nbytes = size_t(shape_numel(shape) * buf.element_size());
        auto storage = std::make_shared<StorageImpl>(
            Allocation{buf.data_ptr(), [sh, s](void*) { sh->release(s); }}, nbytes, Device::cpu(),
            buf.storage()->pinned());
        return make_tensor(std::move(storage), shape, contiguous_strides(shape), 0, buf.dtype());
    };
    Shape in_shape = sh->plan.back();
    in_shape.insert(in_shape.begin(), count);
    Batch b;
    b.input = wrap(slot.input, in_shape);
    b.target = wrap(slot.target, sh->tokens ? in_shape : Shape{count});
    return b;
}

}  // namespace ember::data

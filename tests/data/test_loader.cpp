// The Loader: epoch order against a Fisher-Yates written here from the
// documented Philox words; batch contents against the dataset and the
// transforms sample by sample; the same bits with 0, 1 and 4 workers; holding
// batches, shutdown mid-epoch, a worker's exception reaching the caller, the
// statistics' bookkeeping, and the option errors.
#include <cstring>
#include <stdexcept>
#include <thread>

#include "core/philox.h"
#include "data/loader.h"
#include "data/random.h"
#include "support/data_support.h"

using namespace ember;
using namespace ember::test;
using namespace ember::data;

namespace {

std::vector<int64_t> ref_order(int64_t n, uint64_t seed, int64_t epoch) {
    std::vector<int64_t> o(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) o[size_t(i)] = i;
    for (int64_t k = 0; k + 1 < n; ++k) {
        const uint32_t w =
            philox_block(seed, uint64_t(k / 4), kShuffleStream | uint64_t(epoch)).x[k % 4];
        const int64_t i = n - 1 - k, j = int64_t((uint64_t(w) * uint64_t(i + 1)) >> 32);
        std::swap(o[size_t(i)], o[size_t(j)]);
    }
    return o;
}

// All batches of one epoch, copied out (so no slot stays held).
struct Epoch {
    std::vector<std::vector<float>> inputs;
    std::vector<std::vector<int64_t>> targets;
};

Epoch run_epoch(Loader& loader, int64_t epoch) {
    Epoch e;
    int64_t expected_index = 0;
    for (Batch& b : loader.epoch(epoch)) {
        CHECK(b.index == expected_index++);
        CHECK(b.epoch == epoch);
        e.inputs.push_back(b.input.to_vector<float>());
        e.targets.push_back(b.target.to_vector<int64_t>());
    }
    return e;
}

// A dataset whose sample `bad` throws, like a corrupt record.
class Failing : public Dataset {
  public:
    Failing(std::shared_ptr<const Dataset> inner, int64_t bad, bool std_error = false)
        : inner_(std::move(inner)), bad_(bad), std_error_(std_error) {}
    int64_t size() const override { return inner_->size(); }
    Shape sample_shape() const override { return inner_->sample_shape(); }
    int64_t bytes_per_sample() const override { return 10; }
    int64_t read(int64_t i, float* out) const override {
        if (i == bad_) {
            if (std_error_) throw std::runtime_error("disk on fire");
            EMBER_FAIL("record ", i, " has a bad checksum");
        }
        return inner_->read(i, out);
    }

  private:
    std::shared_ptr<const Dataset> inner_;
    int64_t bad_;
    bool std_error_;
};

// Like Failing, with a batch path that fails without naming the sample.
class FailingBatch : public Failing {
  public:
    using Failing::Failing;
    void read_batch(const int64_t* idx, int64_t count, float* in, int64_t* lab) const override {
        for (int64_t k = 0; k < count; ++k) lab[k] = Failing::read(idx[k], in + k * sample_numel());
    }
};

std::shared_ptr<const Dataset> synthetic(int64_t n, Shape shape = {1, 10, 9}) {
    return std::make_shared<SyntheticDataset>(n, std::move(shape), 10, 3);
}

}  // namespace

TEST_CASE("epoch_order: a Philox Fisher-Yates keyed by (seed, epoch)", "[data][loader]") {
    for (int64_t n : {0, 1, 2, 7, 1000}) {
        const std::vector<int64_t> o = epoch_order(n, true, 42, 3);
        CHECK(o == ref_order(n, 42, 3));
        std::vector<int64_t> sorted = o;
        std::sort(sorted.begin(), sorted.end());
        for (int64_t i = 0; i < n; ++i) REQUIRE(sorted[size_t(i)] == i);
        const std::vector<int64_t> plain = epoch_order(n, false, 42, 3);
        for (int64_t i = 0; i < n; ++i) REQUIRE(plain[size_t(i)] == i);
    }
    CHECK(epoch_order(1000, true, 42, 3) != epoch_order(1000, true, 42, 4));
    CHECK(epoch_order(1000, true, 42, 3) != epoch_order(1000, true, 43, 3));
    REQUIRE_THROWS_WITH_MSG(epoch_order(5, true, 0, -1), "epoch -1 is not in [0, 2^56)");
}

TEST_CASE("Loader: batches in order hold the dataset's samples", "[data][loader]") {
    const auto ds = synthetic(100);
    for (bool drop_last : {false, true}) {
        Loader loader(ds,
                      {.batch_size = 32, .shuffle = false, .drop_last = drop_last, .workers = 2});
        CHECK(loader.size() == (drop_last ? 3 : 4));
        CHECK(loader.sample_shape() == Shape{1, 10, 9});
        int64_t seen = 0;
        while (std::optional<Batch> b = loader.next()) {
            const int64_t count = b->input.size(0);
            CHECK(count == (b->index < 3 ? 32 : 4));
            CHECK(b->input.shape() == Shape{count, 1, 10, 9});
            CHECK(b->target.shape() == Shape{count});
            CHECK(b->target.dtype() == DType::i64);
            for (int64_t k = 0; k < count; ++k) {
                const Example e = ds->get(seen + k);
                CHECK(int64_t(b->target.at({k})) == e.label);
                check_close(b->input.select(0, k), e.input, 0, 0);
            }
            seen += count;
        }
        CHECK(seen == (drop_last ? 96 : 100));
        CHECK_FALSE(loader.next().has_value());  // stays at the end until a new epoch
    }
}

TEST_CASE("Loader: shuffled, augmented batches are the samples at the epoch's order",
          "[data][loader]") {
    const auto ds = synthetic(70);
    const Compose tf{RandomCrop(8, 8, 2), RandomHorizontalFlip(), Normalize({0.5}, {0.2})};
    Loader loader(ds, {.batch_size = 16, .seed = 77, .workers = 3}, tf);
    CHECK(loader.sample_shape() == Shape{1, 8, 8});
    for (int64_t epoch : {0, 1, 5}) {
        const std::vector<int64_t> order = ref_order(70, 77, epoch);
        const Epoch got = run_epoch(loader, epoch);
        REQUIRE(got.inputs.size() == 5);
        for (int64_t p = 0; p < 70; ++p) {
            const Example e = ds->get(order[size_t(p)]);
            const Tensor want = tf(e.input, 77, uint64_t(epoch), uint64_t(p));
            const std::vector<float>& batch = got.inputs[size_t(p / 16)];
            REQUIRE(got.targets[size_t(p / 16)][size_t(p % 16)] == e.label);
            REQUIRE(std::memcmp(batch.data() + (p % 16) * 64, want.data<float>(), 64 * 4) == 0);
        }
    }
}

TEST_CASE("Loader: shards of a world are disjoint, equal, and augment as the whole epoch would",
          "[data][loader][dist]") {
    const auto ds = synthetic(71);  // 71 = 3 × 23 + 2: two positions left out
    const Compose tf{RandomCrop(8, 8, 2), RandomHorizontalFlip(), Normalize({0.5}, {0.2})};
    const int world = 3;
    for (int64_t epoch : {0, 4}) {
        const std::vector<int64_t> order = ref_order(71, 5, epoch);
        std::vector<int64_t> seen;
        for (int rank = 0; rank < world; ++rank) {
            Loader loader(ds, {.batch_size = 10, .seed = 5, .workers = 2, .rank = rank,
                               .world_size = world},
                          tf);
            CHECK(loader.size() == 3);  // 23 samples: 10 + 10 + 3, on every rank
            const Epoch got = run_epoch(loader, epoch);
            for (int64_t k = 0; k < 23; ++k) {
                const int64_t position = rank + world * k;  // in the whole epoch's order
                const Example e = ds->get(order[size_t(position)]);
                const Tensor want = tf(e.input, 5, uint64_t(epoch), uint64_t(position));
                REQUIRE(got.targets[size_t(k / 10)][size_t(k % 10)] == e.label);
                REQUIRE(std::memcmp(got.inputs[size_t(k / 10)].data() + (k % 10) * 64,
                                    want.data<float>(), 64 * 4) == 0);
                seen.push_back(order[size_t(position)]);
            }
        }
        std::sort(seen.begin(), seen.end());
        CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());  // disjoint
        CHECK(seen.size() == 69);
    }
    REQUIRE_THROWS_WITH_MSG(Loader(ds, {.rank = 2, .world_size = 2}),
                            "rank 2 is not a rank of world_size 2");
    REQUIRE_THROWS_WITH_MSG(Loader(ds, {.rank = 0, .world_size = 0}), "world_size 0");
}

TEST_CASE("Loader: the same bits with 0, 1 and 4 workers", "[data][loader][fashion]") {
    const auto fm = fashion_test();
    // The first 1000 test images, zero-copy.
    const auto ds = std::make_shared<TensorDataset>(fm->inputs().narrow(0, 0, 1000),
                                                    fm->labels().narrow(0, 0, 1000),
                                                    TensorDatasetOptions{.scale = 1.0 / 255});
    const Compose tf{RandomCrop(28, 4), RandomHorizontalFlip(), Normalize({0.286}, {0.353})};
    std::vector<Epoch> runs[2];
    for (int workers : {0, 1, 4})
        for (int prefetch : {0, 1}) {
            Loader loader(
                ds, {.batch_size = 96, .seed = 5, .workers = workers, .prefetch = prefetch}, tf);
            for (int64_t epoch : {0, 1}) runs[epoch].push_back(run_epoch(loader, epoch));
        }
    for (int epoch : {0, 1})
        for (size_t r = 1; r < runs[epoch].size(); ++r) {
            INFO("epoch " << epoch << " run " << r);
            CHECK(runs[epoch][r].inputs == runs[epoch][0].inputs);
            CHECK(runs[epoch][r].targets == runs[epoch][0].targets);
        }
    CHECK(runs[0][0].targets != runs[1][0].targets);  // a new order every epoch
}

TEST_CASE("Loader: many worker, prefetch and batch-size mixes, abandoned at random",
          "[data][loader]") {
    const auto ds = synthetic(150, {1, 4, 3});
    const Compose tf{RandomHorizontalFlip()};
    uint32_t r = 12345;  // a fixed LCG picks the mixes: the same on every run
    auto pick = [&](uint32_t n) {
        r = r * 1664525u + 1013904223u;
        return int((r >> 8) % n);
    };
    for (int64_t bs : {1, 7, 64}) {
        Loader reference(ds, {.batch_size = bs, .seed = 9, .workers = 0}, tf);
        const Epoch want[2] = {run_epoch(reference, 0), run_epoch(reference, 1)};
        for (int trial = 0; trial < 12; ++trial) {
            const int workers = pick(7), prefetch = pick(4);
            INFO("batch " << bs << " workers " << workers << " prefetch " << prefetch);
            Loader loader(
                ds, {.batch_size = bs, .seed = 9, .workers = workers, .prefetch = prefetch}, tf);
            for (int64_t epoch : {int64_t(pick(2)), int64_t(pick(2))}) {
                loader.begin_epoch(epoch);
                const int64_t stop = pick(int(loader.size()) + 1);  // may abandon the epoch
                for (int64_t k = 0; k < stop; ++k) {
                    const std::optional<Batch> b = loader.next();
                    REQUIRE(b.has_value());
                    REQUIRE(b->index == k);
                    REQUIRE(b->input.to_vector<float>() == want[epoch].inputs[size_t(k)]);
                    REQUIRE(b->target.to_vector<int64_t>() == want[epoch].targets[size_t(k)]);
                }
            }
        }  // destroyed with workers possibly mid-batch
    }
}

TEST_CASE("Loader: begin_epoch mid-epoch restarts cleanly", "[data][loader]") {
    const auto ds = synthetic(200);
    Loader fresh(ds, {.batch_size = 10, .seed = 1, .workers = 2});
    const Epoch want1 = run_epoch(fresh, 1), want0 = run_epoch(fresh, 0);
    Loader loader(ds, {.batch_size = 10, .seed = 1, .workers = 2});
    for (int i = 0; i < 3; ++i) REQUIRE(loader.next().has_value());  // epoch 0 begins itself
    CHECK(loader.current_epoch() == 0);
    const Epoch got1 = run_epoch(loader, 1);
    CHECK(got1.inputs == want1.inputs);
    CHECK(got1.targets == want1.targets);
    CHECK(loader.current_epoch() == 1);
    CHECK(run_epoch(loader, 0).targets == want0.targets);
}

TEST_CASE("Loader: an epoch begun at a later batch continues it exactly", "[data][loader]") {
    // Shuffled and augmented, with a short last batch: resuming a run mid-epoch.
    const auto ds = synthetic(95);
    const Compose tf{RandomCrop(8, 8, 2), RandomHorizontalFlip()};
    for (int workers : {0, 3}) {
        Loader full(ds, {.batch_size = 10, .seed = 4, .workers = workers}, tf);
        const Epoch want = run_epoch(full, 2);
        Loader late(ds, {.batch_size = 10, .seed = 4, .workers = workers}, tf);
        late.begin_epoch(2, 7);
        for (size_t b = 7; b < want.inputs.size(); ++b) {
            std::optional<Batch> got = late.next();
            REQUIRE(got.has_value());
            CHECK(got->index == int64_t(b));
            CHECK(got->input.to_vector<float>() == want.inputs[b]);
            CHECK(got->target.to_vector<int64_t>() == want.targets[b]);
        }
        CHECK_FALSE(late.next().has_value());
        late.begin_epoch(2, late.size());  // at the end: nothing left
        CHECK_FALSE(late.next().has_value());
        REQUIRE_THROWS_WITH_MSG(late.begin_epoch(2, 11), "first batch 11 is outside");
    }
}

TEST_CASE("Loader: held batches keep their slots; holding all of them is an error",
          "[data][loader]") {
    const auto ds = synthetic(100);
    for (int workers : {0, 2}) {
        INFO("workers " << workers);
        Loader loader(ds, {.batch_size = 10, .shuffle = false, .workers = workers, .prefetch = 3});
        CHECK(loader.prefetch() == 3);
        std::vector<Batch> held;
        for (int i = 0; i < 3; ++i) held.push_back(*loader.next());
        REQUIRE_THROWS_WITH_MSG(loader.next(),
                                "all 3 staging slots are held by batches still alive");
        // A view keeps the slot as well: drop the batch, keep a view of its input.
        Tensor view = held[0].input.select(0, 1);
        held.erase(held.begin());
        REQUIRE_THROWS_WITH_MSG(loader.next(), "staging slots are held");
        CHECK(view.at({0, 0, 0}) == ds->get(1).input.at({0, 0, 0}));
        view = Tensor();
        const std::optional<Batch> b = loader.next();
        REQUIRE(b.has_value());
        CHECK(b->index == 3);
        check_close(b->input.select(0, 0), ds->get(30).input, 0, 0);
    }
}

TEST_CASE("Loader: destroyed mid-epoch, also while batches are held", "[data][loader]") {
    const auto ds = synthetic(1000);
    {  // never started
        Loader loader(ds, {.workers = 4});
    }
    {  // right after the epoch begins: workers busy
        Loader loader(ds, {.batch_size = 8, .workers = 4});
        loader.begin_epoch(0);
    }
    {  // one batch in: workers filling the ring
        Loader loader(ds, {.batch_size = 8, .workers = 4});
        REQUIRE(loader.next().has_value());
    }
    std::vector<Batch> kept;
    {  // every slot held: workers wait for a free one when the loader dies
        Loader loader(ds, {.batch_size = 8, .shuffle = false, .workers = 4, .prefetch = 2});
        kept.push_back(*loader.next());
        kept.push_back(*loader.next());
        std::this_thread::yield();
    }
    // The batches outlive the loader and keep their data.
    for (const Batch& b : kept)
        for (int64_t k = 0; k < 8; ++k)
            check_close(b.input.select(0, k), ds->get(b.index * 8 + k).input, 0, 0);
}

TEST_CASE("Loader: a worker's exception reaches next() with the sample index", "[data][loader]") {
    const auto inner = synthetic(64);
    const std::shared_ptr<const Dataset> sets[] = {std::make_shared<Failing>(inner, 21),
                                                   std::make_shared<FailingBatch>(inner, 21),
                                                   std::make_shared<Failing>(inner, 21, true)};
    for (const auto& ds : sets)
        for (bool transforms : {false, true})
            for (int workers : {0, 1, 4}) {
                INFO("workers " << workers << " transforms " << transforms);
                const Compose tf = transforms ? Compose{RandomHorizontalFlip()} : Compose{};
                Loader loader(ds, {.batch_size = 8, .shuffle = false, .workers = workers}, tf);
                REQUIRE(loader.next()->index == 0);  // batches before the bad one arrive
                REQUIRE(loader.next()->index == 1);
                const std::string where =
                    "Loader: sample 21 (position 21, batch 2 of epoch 0) failed: ";
                REQUIRE_THROWS_WITH_MSG(loader.next(), where);
                REQUIRE_THROWS_AS(loader.next(), ember::Error);  // again, until a new epoch
                try {
                    loader.next();
                } catch (const ember::Error& e) {
                    const std::string msg = e.what();
                    CHECK((msg.find("record 21 has a bad checksum") != std::string::npos ||
                           msg.find("disk on fire") != std::string::npos));
                }
                loader.begin_epoch(1);
                REQUIRE(loader.next()->index == 0);
            }
}

TEST_CASE("Loader: a failing sample in a shuffled epoch; a batch path that fails alone",
          "[data][loader]") {
    const auto ds = std::make_shared<Failing>(synthetic(64), 21);
    const std::vector<int64_t> order = ref_order(64, 3, 2);
    const int64_t pos = std::find(order.begin(), order.end(), 21) - order.begin();
    for (int workers : {0, 3}) {
        Loader loader(ds, {.batch_size = 8, .seed = 3, .workers = workers});
        loader.begin_epoch(2);
        for (int64_t b = 0; b < pos / 8; ++b) REQUIRE(loader.next()->index == b);
        REQUIRE_THROWS_WITH_MSG(loader.next(), str("Loader: sample 21 (position ", pos, ", batch ",
                                                   pos / 8, " of epoch 2) failed: "));
    }
    // read_batch fails but every read succeeds: the batch is named instead.
    class BatchOnly : public Failing {
      public:
        using Failing::Failing;
        void read_batch(const int64_t*, int64_t, float*, int64_t*) const override {
            EMBER_FAIL("the batch reader is broken");
        }
    };
    Loader loader(std::make_shared<BatchOnly>(synthetic(20), -1),
                  {.batch_size = 8, .shuffle = false, .workers = 1});
    REQUIRE_THROWS_WITH_MSG(loader.next(),
                            "Loader: batch 0 of epoch 0 (positions 0 to 7) failed: ");
    REQUIRE_THROWS_WITH_MSG(loader.next(), "the batch reader is broken");
}

TEST_CASE("Loader: statistics add up", "[data][loader]") {
    const auto ds = std::make_shared<Failing>(synthetic(100), -1);  // 10 bytes per sample
    for (int workers : {0, 2}) {
        Loader loader(ds, {.batch_size = 16, .workers = workers});
        const Epoch e = run_epoch(loader, 4);
        const LoaderStats st = loader.stats();
        CHECK(st.epoch == 4);
        CHECK(st.batches == 7);
        CHECK(st.samples == 100);
        CHECK(st.workers == workers);
        CHECK(st.bytes_read == 1000);
        CHECK(st.wait_seconds >= 0);
        CHECK(st.wait_seconds <= st.elapsed_seconds);
        CHECK(st.wait_fraction == Approx(st.wait_seconds / st.elapsed_seconds));
        CHECK(st.samples_per_second == Approx(100 / st.elapsed_seconds));
        CHECK(st.read_bytes_per_second == Approx(1000 / st.elapsed_seconds));
        CHECK(st.worker_busy_fraction >= 0);
        CHECK(st.worker_busy_fraction <= 1);
        loader.begin_epoch(5);  // a new epoch starts from zero
        const LoaderStats fresh = loader.stats();
        CHECK(fresh.epoch == 5);
        CHECK(fresh.batches == 0);
        CHECK(fresh.samples == 0);
        CHECK(fresh.wait_seconds == 0);
        CHECK(fresh.bytes_read <= 1000);  // workers may already be reading ahead
    }
}

TEST_CASE("Loader: defaults, pinned memory without a GPU, and bad options", "[data][loader]") {
    const auto ds = synthetic(10);
    Loader loader(ds);
    const int cores = std::max(1, int(std::thread::hardware_concurrency()));
    CHECK(loader.workers() == cores);
    CHECK(loader.prefetch() == cores + 2);
    CHECK(loader.size() == 1);
    CHECK_FALSE(loader.pinned());
    // Asking for pinned memory where there is none degrades to ordinary memory.
    Loader pinned(ds, {.pin_memory = true});
    CHECK(pinned.pinned() == (cuda_built() && cuda_device_count() > 0));
    CHECK(pinned.next()->input.size(0) == 10);
    Loader empty_loader(synthetic(0), {.workers = 1});
    CHECK(empty_loader.size() == 0);
    CHECK_FALSE(empty_loader.next().has_value());

    REQUIRE_THROWS_WITH_MSG(Loader(nullptr), "Loader: no dataset");
    REQUIRE_THROWS_WITH_MSG(Loader(ds, {.batch_size = 0}), "batch_size must be >= 1, got 0");
    REQUIRE_THROWS_WITH_MSG(Loader(ds, {.workers = -2}), "workers must be -1 (one per core)");
    REQUIRE_THROWS_WITH_MSG(Loader(ds, {.prefetch = -1}), "prefetch must be in [0, 4096]");
    REQUIRE_THROWS_WITH_MSG(Loader(synthetic(3, {0, 4})), "samples of shape [0, 4]");
    REQUIRE_THROWS_WITH_MSG(Loader(ds, {}, Compose{RandomCrop(11)}),
                            "RandomCrop: a 11x11 window does not fit a 10x9 image");
    if (!cuda_built())
        REQUIRE_THROWS_WITH_MSG(Loader(ds, {.device = Device::cuda()}),
                                "Loader: device cuda:0 needs the CUDA backend");
    else if (cuda_device_count() == 0)
        REQUIRE_THROWS_WITH_MSG(Loader(ds, {.device = Device::cuda()}), "is not available");
}

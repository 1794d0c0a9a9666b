// loader family: the data pipeline on Fashion-MNIST train (test when quick)
// with the resnet8 augmentations — RandomCrop(28, padding 4),
// RandomHorizontalFlip, Normalize — in batches of 256. Rows: samples/s for 0,
// 1, 2 and 4 workers (ms per batch; GB/s of batch data written into the
// staging ring; the fraction is the speed-up over 0 workers, the loader on the
// caller's thread), then a simulated trainer whose compute per batch is twice
// the single-thread load time T: ms waited per batch and the fraction of its
// time spent waiting, with 1 and 2 workers. Target (docs/data.md): < 5 % with
// 2 workers.
#include "data/loader.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "core/error.h"
#include "data/fashion_mnist.h"
#include "data/transforms.h"

namespace ember::bench {

namespace {

using namespace ember::data;

constexpr int64_t kBatch = 256;
constexpr uint64_t kSeed = 1;

// The first batch of epoch 0 must equal the samples at the epoch's first
// positions through the same transforms, computed one by one.
void validate(const std::shared_ptr<const Dataset>& ds, const Compose& tf) {
    Loader loader(ds, {.batch_size = kBatch, .seed = kSeed, .workers = 2}, tf);
    const std::optional<Batch> b = loader.next();
    EMBER_CHECK(b.has_value(), "bench loader: no batch");
    const std::vector<int64_t> order = epoch_order(ds->size(), true, kSeed, 0);
    const int64_t numel = shape_numel(loader.sample_shape());
    for (int64_t p = 0; p < b->input.size(0); ++p) {
        const Example e = ds->get(order[size_t(p)]);
        const Tensor want = tf(e.input, kSeed, 0, uint64_t(p));
        const float* got = b->input.data<float>() + p * numel;
        if (std::memcmp(got, want.data<float>(), size_t(numel) * 4) != 0 ||
            b->target.data<int64_t>()[p] != e.label)
            EMBER_FAIL("bench loader: sample at position ", p, " of the first batch is wrong");
    }
}

// Drains one epoch; `compute` is slept after each batch (the simulated step).
void drain(Loader& loader, int64_t epoch, std::chrono::duration<double> compute) {
    for (Batch& b : loader.epoch(epoch)) {
        (void)b;
        if (compute.count() > 0) std::this_thread::sleep_for(compute);
    }
}

std::string rate_label(double samples_per_second) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1fk samples/s", samples_per_second / 1e3);
    return buf;
}

}  // namespace

void run_loader(const Options& o, Report& rep) {
    const std::shared_ptr<const Dataset> ds =
        std::make_shared<const FashionMNIST>(o.quick ? Split::test : Split::train);
    const Compose tf{RandomCrop(28, 4), RandomHorizontalFlip(), Normalize(compute_mean_std(*ds))};
    validate(ds, tf);

    const int counts[] = {0, 1, 2, 4};
    std::vector<std::unique_ptr<Loader>> loaders;
    std::vector<int64_t> epochs(4, 0);
    std::vector<std::function<void()>> runs;
    for (int i = 0; i < 4; ++i) {
        loaders.push_back(std::make_unique<Loader>(
            ds, LoaderOptions{.batch_size = kBatch, .seed = kSeed, .workers = counts[i]}, tf));
        runs.push_back([&, i] { drain(*loaders[size_t(i)], epochs[size_t(i)]++, {}); });
    }
    const std::vector<Timing> ms = interleaved_median_ms(runs, o);
    const int64_t batches = loaders[0]->size(), n = ds->size();
    const double batch_bytes = double(n) * (28 * 28 * 4 + 8);  // f32 inputs + i64 targets
    const double rate0 = double(n) / (ms[0] / 1e3);
    const std::string shape = shape_str({kBatch, 1, 28, 28});
    const std::string base = "0 workers " + rate_label(rate0);
    for (int i = 0; i < 4; ++i) {
        const double rate = double(n) / (ms[size_t(i)] / 1e3);
        Row r{"loader", str("epoch, ", counts[i], counts[i] == 1 ? " worker" : " workers"),
              shape, ms[size_t(i)] / double(batches), batch_bytes / (ms[size_t(i)] * 1e6), -1,
              rate / rate0, base, rate_label(rate)};
        rep.add(r, ms[size_t(i)]);
    }

    // The simulated trainer: compute 2T per batch, T the single-thread load
    // time of a batch measured above. Sleeping models a GPU step, which
    // leaves the host idle while the workers load.
    const double t = ms[0] / double(batches) / 1e3;
    for (int workers : {1, 2}) {
        Loader loader(ds, {.batch_size = kBatch, .seed = kSeed, .workers = workers}, tf);
        drain(loader, 0, std::chrono::duration<double>(2 * t));
        const LoaderStats st = loader.stats();
        char note[96];
        std::snprintf(note, sizeof note, "compute 2T = %.3f ms/batch; target < 5%% with 2 workers",
                      2e3 * t);
        rep.add({"loader", str("trainer, ", workers, workers == 1 ? " worker" : " workers"), shape,
                 1e3 * st.wait_seconds / double(st.batches), -1, -1, st.wait_fraction,
                 "trainer time, waiting", note});
    }
}

}  // namespace ember::bench

// `ember lr-find` (the LR range test on a run's configuration,
// docs/tips.md #15) and `ember max-batch` (the largest batch that fits, with
// a scaled LR, docs/tips.md #4).
#include "tools/train/finders.h"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "optim/lr_find.h"
#include "tools/cli_checks.h"
#include "tools/train/options.h"
#include "train/recipe.h"
#include "train/run.h"
#include "train/svg.h"

namespace ember::train {

namespace {

// The flags lr-find and max-batch share with train.
void add_model_options(CLI::App& app, TrainConfig& c) {
    app.add_option("--model", c.model, "Reference model: " + joined(recipe_names()))
        ->check(CLI::IsMember(recipe_names()))
        ->capture_default_str();
    app.add_option("--data-dir", c.data_dir, "Folder with the dataset's files");
    app.add_option("--batch-size", c.batch_size, "Samples per batch")
        ->check(cli::whole(1, int64_t(1) << 20))
        ->capture_default_str();
    app.add_option("--optimizer", c.optimizer, joined(optimizer_names()))
        ->check(CLI::IsMember(optimizer_names()))
        ->capture_default_str();
    app.add_option("--weight-decay", c.weight_decay, "Weight decay (default: the optimizer's)");
    app.add_option("--amp", c.amp, joined(amp_names()))
        ->check(CLI::IsMember(amp_names()))
        ->capture_default_str();
    app.add_option("--device", c.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
    app.add_option("--workers", c.workers, "Loader threads")->check(cli::whole(0, 256));
    app.add_option("--seed", c.seed, "Seed")->capture_default_str();
    app.add_option("--limit", c.limit, "Use the first N training samples (0: all)")
        ->check(cli::at_least(0));
    app.add_option("--threads", c.threads, "OpenMP threads (0: the default)")->check(cli::whole(0, 1024));
}

}  // namespace

CLI::App* add_lr_find_command(CLI::App& root, LrFindConfig& c) {
    CLI::App* app = root.add_subcommand(
        "lr-find", "The LR range test: sweep the LR, suggest one, draw loss against LR");
    add_model_options(*app, c.train);
    app->add_option("--start-lr", c.start_lr, "First LR of the sweep")->capture_default_str();
    app->add_option("--end-lr", c.end_lr, "Last LR of the sweep")->capture_default_str();
    app->add_option("--steps", c.steps, "LRs tried (one training step each)")
        ->check(cli::whole(3, 100000))
        ->capture_default_str();
    app->add_option("--out", c.svg, "Where the SVG of loss against LR goes")->capture_default_str();
    return app;
}

int run_lr_find(CLI::App& app, LrFindConfig c) {
    EMBER_CHECK(c.start_lr > 0 && c.end_lr > c.start_lr, "lr-find: need 0 < --start-lr < --end-lr, got ",
                c.start_lr, " and ", c.end_lr);
    apply_recipe_defaults(app, c.train);
    validate(c.train);
    if (c.train.threads > 0) omp_set_num_threads(c.train.threads);
    Run run = build_run(c.train);
    // The sweep sets the LRs itself: no schedule, on the host or the device.
    run.optimizer->clear_schedule_tables();
    int64_t epoch = 0;
    run.loader->begin_epoch(epoch);
    auto next_batch = [&] {
        std::optional<data::Batch> b = run.loader->next();
        if (!b) {
            run.loader->begin_epoch(++epoch);
            b = run.loader->next();
        }
        return *b;
    };
    std::printf("lr-find: %s, %s, batch %lld, %lld steps from %g to %g\n", c.train.model.c_str(),
                c.train.optimizer.c_str(), (long long)c.train.batch_size, (long long)c.steps,
                c.start_lr, c.end_lr);
    const optim::LrFindResult r = optim::lr_find(
        *run.optimizer, [&] { return train_step(run, next_batch()).item(); },
        {.start_lr = c.start_lr, .end_lr = c.end_lr, .steps = c.steps});

    std::printf("%12s %12s %12s\n", "lr", "loss", "smoothed");
    const size_t every = std::max<size_t>(1, r.lrs.size() / 12);
    for (size_t i = 0; i < r.lrs.size(); ++i)
        if (i % every == 0 || i + 1 == r.lrs.size())
            std::printf("%12.3g %12.4f %12.4f\n", r.lrs[i], r.losses[i], r.smoothed[i]);
    LineChart chart;
    chart.title = "LR range test: " + c.train.model + ", " + c.train.optimizer + ", batch " +
                  std::to_string(c.train.batch_size);
    chart.x = {"learning rate", Scale::log10};
    // A log axis: the blow-up's losses (thousands) would flatten the useful
    // region of a linear one.
    bool positive = true;
    for (double v : r.losses) positive = positive && (!std::isfinite(v) || v > 0);
    chart.y = {"loss", positive ? Scale::log10 : Scale::linear};
    chart.add("loss", r.lrs, r.losses).color = "#9ecae1";
    chart.add("smoothed loss", r.lrs, r.smoothed);
    if (r.suggested_lr) {
        double lo = r.smoothed.front(), hi = lo;
        for (double v : r.smoothed)
            if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
        chart.add("suggested", {*r.suggested_lr, *r.suggested_lr}, {lo, hi}).color = "#d62728";
    }
    chart.save(c.svg);
    std::printf("%zu steps%s; loss against LR drawn in %s\n", r.lrs.size(),
                r.diverged ? " (stopped: the loss diverged)" : "", c.svg.c_str());
    if (r.suggested_lr)
        std::printf("suggested LR: %.3g (steepest descent of the smoothed loss; a value a few "
                    "times lower is a safe start)\n", *r.suggested_lr);
    else
        std::printf("no suggestion: the loss never fell (try a lower --start-lr)\n");
    return 0;
}

CLI::App* add_max_batch_command(CLI::App& root, MaxBatchConfig& c) {
    CLI::App* app = root.add_subcommand(
        "max-batch", "The largest batch that fits, and a scaled LR for it (square-root rule for "
                     "Adam-type optimizers, linear for SGD and LARS)");
    add_model_options(*app, c.train);
    app->add_option("--memory-budget", c.budget_mib,
                    "CPU: the memory a training step may hold, in MiB (GPU: the device's memory)")
        ->check(cli::positive())
        ->capture_default_str();
    app->add_option("--max", c.max_batch, "The largest batch to try")
        ->check(cli::whole(1, int64_t(1) << 24))
        ->capture_default_str();
    app->add_option("--lr", c.train.lr,
                    "The LR that works at --batch-size, which the advice scales (default: the "
                    "optimizer's)")
        ->check(cli::positive());
    return app;
}

bool step_fits(const TrainConfig& config, int64_t batch, double budget_mib, size_t* peak) {
    TrainConfig t = config;
    t.batch_size = batch;
    t.limit = 0;
    t.workers = 0;
    const Device device = resolve_device(t);
    const Recipe& recipe = recipe_of(t);
    manual_seed(t.seed);
    Task task = recipe.make_task(t);
    task.model->to(device);
    auto opt = make_optimizer(t, optim::decay_groups(*task.model, effective_weight_decay(t)));
    try {
        reset_peak_memory_stats(device);
        const size_t before = memory_stats(device).allocated_bytes;
        const data::Batch b = recipe.example_batch(task, t, batch, device);
        Tensor loss;
        {
            amp::autocast ac(t.amp == "f16" ? DType::f16 : DType::bf16, t.amp != "off");
            loss = task_loss(task, task_forward(task, in_format(b.input, task.memory_format), false),
                             b.target);
        }
        loss.backward();
        opt->step();
        *peak = memory_stats(device).peak_allocated_bytes - before;
    } catch (const Error& e) {
        if (device.is_cuda() && std::string(e.what()).find("out of memory") != std::string::npos)
            return false;
        throw;
    }
    return device.is_cuda() || *peak <= size_t(budget_mib * 1024 * 1024);
}

BatchSearch largest_batch(const TrainConfig& c, double budget_mib, int64_t max_batch) {
    size_t peak = 0;
    EMBER_CHECK(step_fits(c, 1, budget_mib, &peak), "max-batch: not even a batch of 1 fits (",
                peak / 1024, " KiB for one step)");
    // Double until a batch does not fit (or the limit), then bisect.
    BatchSearch s{.batch = 1, .peak_bytes = peak};
    int64_t bad = 0;
    while (s.batch < max_batch) {
        const int64_t next = std::min(s.batch * 2, max_batch);
        if (!step_fits(c, next, budget_mib, &peak)) {
            bad = next;
            break;
        }
        s.batch = next;
        s.peak_bytes = peak;
    }
    while (bad > 0 && bad - s.batch > 1) {
        const int64_t mid = s.batch + (bad - s.batch) / 2;
        if (step_fits(c, mid, budget_mib, &peak)) {
            s.batch = mid;
            s.peak_bytes = peak;
        } else {
            bad = mid;
        }
    }
    s.limited = bad == 0;
    return s;
}

double scaled_lr(const TrainConfig& c, int64_t batch) {
    const bool linear = c.optimizer == "sgd" || c.optimizer == "lars";
    const double ratio = double(batch) / double(c.batch_size);
    return effective_lr(c) * (linear ? ratio : std::sqrt(ratio));
}

int run_max_batch(CLI::App& app, MaxBatchConfig c) {
    apply_recipe_defaults(app, c.train);
    validate(c.train);
    // CLI11's range checks let NaN through (every comparison with it is false).
    EMBER_CHECK(std::isfinite(c.budget_mib) && c.budget_mib > 0 && c.budget_mib < 1e12,
                "--memory-budget must be a positive number of MiB, got ", c.budget_mib);
    if (c.train.threads > 0) omp_set_num_threads(c.train.threads);
    // No batch larger than the training set: it would never be drawn.
    int64_t samples = 0;
    {
        manual_seed(c.train.seed);
        samples = int64_t(recipe_of(c.train).make_task(c.train).train_data->size());
    }
    const bool capped = samples < c.max_batch;
    if (capped) c.max_batch = samples;
    const Device device = resolve_device(c.train);
    std::printf("max-batch: %s on %s, %s\n", c.train.model.c_str(), device.str().c_str(),
                device.is_cpu() ? ("budget " + std::to_string(int64_t(c.budget_mib)) + " MiB").c_str()
                                : "the device's memory");
    const BatchSearch found = largest_batch(c.train, c.budget_mib, c.max_batch);
    const int64_t good = found.batch;
    const size_t good_peak = found.peak_bytes;
    const bool limited = found.limited;
    // The LR for the new batch, as a starting point: the square-root rule for
    // Adam-type optimizers (their update is normalized by the gradient's own
    // scale), the linear rule for SGD and LARS (Goyal et al.).
    const bool linear = c.train.optimizer == "sgd" || c.train.optimizer == "lars";
    const double lr = scaled_lr(c.train, good);
    std::printf("largest batch: %lld%s", (long long)good,
                limited ? (capped ? " (the whole training set)" : " (the --max limit)") : "");
    if (device.is_cpu()) std::printf(", %.1f MiB for one step", double(good_peak) / (1 << 20));
    std::printf("\n%s LR: %.3g (%g at batch %lld, times %s%lld/%lld%s) — a starting point: large "
                "batches may need a warm-up and generalize worse\n",
                linear ? "linearly scaled" : "square-root scaled", lr, effective_lr(c.train),
                (long long)c.train.batch_size, linear ? "" : "sqrt(", (long long)good,
                (long long)c.train.batch_size, linear ? "" : ")");
    return 0;
}

}  // namespace ember::train

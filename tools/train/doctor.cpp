// `ember doctor` (tools/train/doctor.h): the trials, their interleaved
// rounds, the table, the command line and doctor.json.
#include "tools/train/doctor.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>

#include "core/cpu_load.h"
#include "core/strprintf.h"
#include "tools/cli_checks.h"
#include "tools/train/doctor_steps.h"
#include "tools/train/finders.h"
#include "tools/train/options.h"
#include "train/files.h"
#include "train/recipe.h"

namespace ember::train {

namespace {

using Clock = std::chrono::steady_clock;

// The least difference a verdict names: the ranges of three rounds can stand
// apart by chance by a percent or two (a 2 % "faster" that separate runs
// did not reproduce, bench/RESULTS.md).
constexpr double kLeastEffect = 0.03;

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::string thousands(double x) {
    const std::string digits = strprintf("%.0f", x);
    std::string s;
    for (size_t i = 0; i < digits.size(); ++i) {
        if (i > 0 && (digits.size() - i) % 3 == 0) s.push_back(',');
        s.push_back(digits[i]);
    }
    return s;
}

Trial variant(const TrainConfig& base, int tip, std::string name, std::vector<std::string> flags,
              const std::function<void(TrainConfig&)>& change, std::string not_applicable = {}) {
    Trial t{tip, std::move(name), std::move(flags), base, std::move(not_applicable)};
    if (change) change(t.config);
    return t;
}

// The trials of the configuration `c` on its device (docs/doctor.md).
std::vector<Trial> trials_for(const TrainConfig& c, Device device, int threads, int64_t big_batch,
                              double big_lr) {
    const bool cpu = device.is_cpu();
    const std::string on = "n/a on " + device.str();
    std::vector<Trial> t;
    t.push_back(variant(c, 0, "the current settings", {}, nullptr));
    for (const int w : {0, 1, 2, 4})
        if (w != c.workers)
            t.push_back(variant(c, 3, "--workers " + std::to_string(w), {"--workers", std::to_string(w)},
                                [w](TrainConfig& x) { x.workers = w; }));
    t.push_back(variant(c, 3, "pinned staging", {}, nullptr,
                        cpu ? on + ": no copies to a device" : "always on: the loader stages in pinned memory"));
    // Image models: the other layout.
    const MemoryFormat fmt = effective_memory_format(c);
    const bool images = c.model != "mlp" && c.model != "gpt";
    const std::string other = fmt == MemoryFormat::channels_last ? "contiguous" : "channels_last";
    t.push_back(variant(c, 0, "--memory-format " + other, {"--memory-format", other},
                        [other](TrainConfig& x) { x.memory_format = other; },
                        images ? "" : "n/a: the " + c.model + " has no convolutions"));
    for (const char* amp : {"bf16", "f16"})
        if (c.amp != amp)
            t.push_back(variant(c, 5, std::string("--amp ") + amp, {"--amp", amp},
                                [amp](TrainConfig& x) { x.amp = amp; },
                                cpu && std::string(amp) == "f16"
                                    ? on + ": f16 is computed in f32 there, with loss scaling on top"
                                    : ""));
    if (big_batch > c.batch_size)
        t.push_back(variant(c, 4, strprintf("--batch-size %lld --lr %.3g", (long long)big_batch, big_lr),
                            {"--batch-size", std::to_string(big_batch), "--lr", strprintf("%.3g", big_lr)},
                            [&](TrainConfig& x) {
                                x.batch_size = big_batch;
                                x.lr = big_lr;
                            }));
    // cuDNN's benchmark mode is on unless --deterministic: the trial turns
    // it off (or, for a deterministic run, on).
    t.push_back(variant(c, 7, c.deterministic ? "cuDNN benchmark mode (no --deterministic)" : "--deterministic",
                        c.deterministic ? std::vector<std::string>{"--deterministic=false"}
                                        : std::vector<std::string>{"--deterministic"},
                        [](TrainConfig& x) { x.deterministic = !x.deterministic; },
                        cpu ? on + ": no cuDNN" : ""));
    t.push_back(variant(c, 5, "TF32 matmuls", {}, nullptr, cpu ? on + ": no tensor cores" : "not a flag yet"));
    t.push_back(variant(c, 6, "fused vs per-tensor optimizer", {}, nullptr,
                        "n/a: ember's optimizers are always fused (one multi-tensor update per group)"));
    t.push_back(variant(c, 16, c.checkpoint_activations ? "no activation checkpointing" : "--checkpoint-activations",
                        c.checkpoint_activations ? std::vector<std::string>{"--checkpoint-activations=false"}
                                                 : std::vector<std::string>{"--checkpoint-activations"},
                        [](TrainConfig& x) { x.checkpoint_activations = !x.checkpoint_activations; },
                        c.model == "mlp" ? "n/a: the mlp has no blocks to recompute" : ""));
    if (c.batch_size % 2 == 0)
        t.push_back(variant(c, 17,
                            strprintf("--accumulate %lld --batch-size %lld", (long long)c.accumulate * 2,
                                   (long long)c.batch_size / 2),
                            {"--accumulate", std::to_string(c.accumulate * 2), "--batch-size",
                             std::to_string(c.batch_size / 2)},
                            [](TrainConfig& x) {
                                x.accumulate *= 2;
                                x.batch_size /= 2;
                            }));
    if (cpu && threads > 1)
        t.push_back(variant(c, 22, "--threads 1", {"--threads", "1"}, [](TrainConfig& x) { x.threads = 1; }));
    if (cpu)
        t.push_back(variant(c, 22, "OpenMP wait policy", {}, nullptr,
                            "set when the process starts: compare OMP_WAIT_POLICY=active ember train ... by hand"));
    return t;
}

}  // namespace

std::string verdict(const TrialResult& trial, const TrialResult& base) {
    if (!trial.failure.empty() || trial.samples_per_s.empty()) return trial.failure;
    const auto [tlo, thi] = std::minmax_element(trial.samples_per_s.begin(), trial.samples_per_s.end());
    const auto [blo, bhi] = std::minmax_element(base.samples_per_s.begin(), base.samples_per_s.end());
    const double ratio = median(trial.samples_per_s) / median(base.samples_per_s);
    if (*tlo > *bhi && ratio >= 1 + kLeastEffect) return "faster";
    if (*thi < *blo && ratio <= 1 - kLeastEffect) return "slower";
    return "within noise";
}

CLI::App* add_doctor_command(CLI::App& root, DoctorConfig& c) {
    CLI::App* app = root.add_subcommand(
        "doctor", "Measure which training-speed tips help this configuration on this machine (docs/doctor.md)");
    add_train_options(*app, c.train);
    app->add_option("--rounds", c.rounds, "Interleaved rounds of every trial")
        ->check(cli::whole(1, 100))
        ->capture_default_str();
    app->add_option("--steps", c.steps, "Timed steps per trial and round (0: a second's worth, at least 5)")
        ->check(cli::whole(0, 1000000))
        ->capture_default_str();
    app->add_option("--warmup-steps", c.warmup, "Steps before each timed span")
        ->check(cli::whole(0, 1000))
        ->capture_default_str();
    app->add_option("--memory-budget", c.budget_mib, "CPU: MiB the larger-batch trial's step may hold")
        ->check(cli::number(1, 1e9))
        ->capture_default_str();
    app->add_option("--json", c.json, "Where to write the results as JSON")->capture_default_str();
    return app;
}

namespace {

// The flags the user gave (not the doctor's own), as a command line.
std::vector<std::string> given_flags(CLI::App& app) {
    static const char* const own[] = {"--rounds", "--steps", "--warmup-steps", "--memory-budget", "--json", "--help"};
    std::vector<std::string> out;
    for (const CLI::Option* o : app.get_options()) {
        if (o->count() == 0 || o->get_name().rfind("--", 0) != 0) continue;
        if (std::find(std::begin(own), std::end(own), o->get_name()) != std::end(own)) continue;
        out.push_back(o->get_name());
        if (o->get_expected_min() == 0) continue;  // a switch
        for (const std::string& v : o->results()) out.push_back(v);
    }
    return out;
}

// `flags` with `name`'s value replaced by (or set to) `value` (a switch: value "").
void set_flag(std::vector<std::string>& flags, const std::vector<std::string>& change) {
    for (size_t k = 0; k < change.size();) {
        const std::string& name = change[k];
        const bool has_value = k + 1 < change.size() && change[k + 1].rfind("--", 0) != 0;
        const size_t eq = name.find('=');
        const std::string bare = name.substr(0, eq);
        for (size_t i = 0; i < flags.size(); ++i)
            if (flags[i] == bare || flags[i].rfind(bare + "=", 0) == 0) {
                const bool old_value = i + 1 < flags.size() && flags[i + 1].rfind("--", 0) != 0 &&
                                       flags[i].find('=') == std::string::npos;
                flags.erase(flags.begin() + long(i), flags.begin() + long(i) + (old_value ? 2 : 1));
                break;
            }
        flags.push_back(name);
        if (has_value) flags.push_back(change[k + 1]);
        k += has_value ? 2 : 1;
    }
}

std::string quoted(const std::string& s) {
    if (!s.empty() && s.find_first_of(" \t'\"$\\") == std::string::npos) return s;
    std::string q = "'";
    for (const char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return q + "'";
}

}  // namespace

int run_doctor(CLI::App& app, DoctorConfig c) {
    apply_recipe_defaults(app, c.train);
    validate(c.train);
    recipe_of(c.train);
    EMBER_CHECK(!c.train.ddp, "ember doctor measures one process: drop --ddp");
    const Device device = resolve_device(c.train);
    // The threads `ember train` would run with.
    if (c.train.threads > 0) {
        omp_set_num_threads(c.train.threads);
    } else if (device.is_cpu() && !std::getenv("OMP_NUM_THREADS")) {
        const int n = threads_for_load(measure_cpu_load());
        if (n < omp_get_max_threads()) omp_set_num_threads(n);
    }
    const int threads = omp_get_max_threads();
    const auto start = Clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };

    // The larger batch: ember max-batch's search, up to 8 times the batch (and
    // the training set), then a margin below what fitted.
    int64_t samples = 0;
    {
        manual_seed(c.train.seed);
        samples = int64_t(recipe_of(c.train).make_task(c.train).train_data->size());
    }
    const int64_t cap = std::min(c.train.batch_size * 8, samples);
    const BatchSearch found = largest_batch(c.train, c.budget_mib, cap);
    const bool memory_bound = !found.limited;
    const int64_t big = memory_bound ? std::max<int64_t>(1, found.batch * 8 / 10) : found.batch;
    const std::string margin =
        memory_bound ? strprintf("largest that fitted %lld; 80 %% of it, as a margin for memory other steps "
                              "may need (another shape, fragmentation)",
                              (long long)found.batch)
                     : strprintf("%lld: %s; no margin needed below a limit that is not memory's", (long long)cap,
                              cap == samples ? "the whole training set" : "8 times the batch, the most tried");

    std::vector<Trial> trials = trials_for(c.train, device, threads, big, scaled_lr(c.train, big));
    // A probe of the current settings sets the length of a round: steps
    // after a warm-up, doubled until they take a quarter of a second.
    const double built_at = elapsed();
    auto base = std::make_unique<TrialRunner>(trials[0].config, threads);
    const double build_s = elapsed() - built_at;  // each trial's run is built for each round
    double step_s = 0;
    for (int64_t n = 4, warm = c.warmup + 2;; n *= 2, warm = 0) {
        const double rate = base->time(warm, n, 0, nullptr);
        step_s = double(c.train.batch_size * c.train.accumulate) / std::max(rate, 1e-9);
        if (double(n) * step_s >= 0.25 || n >= 4096) break;
    }
    // A round of a trial: --steps steps, or (by default) at least 5 steps
    // and a second's worth of them, whatever the trial's speed, so that the
    // whole doctor takes the time it announces.
    const double round_s = c.steps > 0 ? 0.0 : 1.0;
    const int64_t steps = c.steps > 0 ? c.steps : 5;
    int64_t runnable = 0;
    double estimate = 0;
    for (const Trial& t : trials) {
        if (!t.not_applicable.empty()) continue;
        ++runnable;
        // A trial may be slower per sample than the reference: its warm-up
        // and its least steps are counted at twice the reference's time.
        const double scale = 2 * double(t.config.batch_size * t.config.accumulate) /
                             double(c.train.batch_size * c.train.accumulate);
        const double timed = std::max(round_s, double(steps) * step_s * scale);
        estimate += c.rounds * (double(c.warmup) * step_s * scale + timed + build_s);
    }
    estimate += build_s + 10 * step_s;  // the profiled steps and the findings
    // Rounds end at a step's end, and building and dropping a run varies
    // (loader threads start and join): 15 % on top, measured on 2 cores.
    estimate *= 1.15;
    const std::string round = c.steps > 0 ? strprintf("%lld steps", (long long)steps)
                                          : std::string("a second of steps (at least 5)");
    std::printf("ember doctor: %s on %s, batch %lld, %d OpenMP threads; %lld trials x %d rounds of %s after %lld "
                "warm-up steps; about %.0f s (the batch search took %.1f s)\n",
                c.train.model.c_str(), device.str().c_str(), (long long)c.train.batch_size, threads,
                (long long)runnable, c.rounds, round.c_str(), (long long)c.warmup, estimate, elapsed());
    std::fflush(stdout);

    // The rounds interleave the trials. Each trial's run is built for its
    // turn and dropped after it: only one run's loader threads (and memory)
    // exist while a trial is timed, so no trial pays for another's.
    std::vector<TrialResult> results(trials.size());
    base.reset();
    for (int r = 0; r < c.rounds; ++r)
        for (size_t i = 0; i < trials.size(); ++i) {
            if (!trials[i].not_applicable.empty() || !results[i].failure.empty()) continue;
            std::unique_ptr<TrialRunner> runner;
            try {
                const int n = trials[i].config.threads > 0 ? trials[i].config.threads : threads;
                runner = std::make_unique<TrialRunner>(trials[i].config, n);
            } catch (const Error& e) {
                results[i].failure = std::string("could not start: ") + e.what();
                continue;
            }
            try {
                size_t peak = 0;
                results[i].samples_per_s.push_back(runner->time(c.warmup, steps, round_s, &peak));
                results[i].peak_bytes = std::max(results[i].peak_bytes, peak);
            } catch (const Error& e) {
                // Out of memory is a result, not the end of the doctor.
                const bool oom = std::string(e.what()).find("out of memory") != std::string::npos;
                results[i].failure = oom ? "does not fit" : std::string("failed: ") + e.what();
            }
        }
    base = std::make_unique<TrialRunner>(trials[0].config, threads);
    std::vector<Finding> findings = model_findings(*base);
    const int64_t profiled = c.steps > 0 ? std::min<int64_t>(c.steps, 10) : 10;
    for (Finding& f : profile_findings(*base, profiled)) findings.push_back(std::move(f));

    // The table.
    const TrialResult& ref = results[0];
    const double base_median = median(ref.samples_per_s);
    std::printf("\n%-4s %-36s %-28s %7s %10s  %s\n", "tip", "trial", "samples/s median [min-max]", "x",
                "step peak", "verdict");
    nlohmann::ordered_json jtrials = nlohmann::ordered_json::array();
    std::vector<std::pair<double, size_t>> faster;
    for (size_t i = 0; i < trials.size(); ++i) {
        const Trial& t = trials[i];
        const TrialResult& res = results[i];
        nlohmann::ordered_json j{{"tip", t.tip}, {"trial", t.name}, {"flags", t.flags}};
        if (!t.not_applicable.empty()) {
            j["not_applicable"] = t.not_applicable;
            jtrials.push_back(j);
            continue;
        }
        const std::string tip = t.tip > 0 ? "#" + std::to_string(t.tip) : "-";
        if (res.samples_per_s.empty()) {
            std::printf("%-4s %-36s %-28s %7s %10s  %s\n", tip.c_str(), t.name.c_str(), "", "", "",
                        res.failure.c_str());
            j["result"] = res.failure;
            jtrials.push_back(j);
            continue;
        }
        const auto [lo, hi] = std::minmax_element(res.samples_per_s.begin(), res.samples_per_s.end());
        const double med = median(res.samples_per_s);
        const std::string v = i == 0 ? "(the reference)" : verdict(res, ref);
        if (v == "faster") faster.emplace_back(med / base_median, i);
        std::printf("%-4s %-36s %-28s %6.2fx %7.1f MB  %s\n", tip.c_str(), t.name.c_str(),
                    (thousands(med) + " [" + thousands(*lo) + "-" + thousands(*hi) + "]").c_str(),
                    med / base_median, double(res.peak_bytes) / (1 << 20), v.c_str());
        j["samples_per_s"] = {{"median", med}, {"min", *lo}, {"max", *hi}, {"rounds", res.samples_per_s}};
        j["ratio"] = med / base_median;
        j["peak_bytes"] = res.peak_bytes;
        j["verdict"] = v;
        jtrials.push_back(j);
    }
    std::printf("\nnot tried here:\n");
    for (const Trial& t : trials)
        if (!t.not_applicable.empty())
            std::printf("  %-4s %s: %s\n", t.tip > 0 ? ("#" + std::to_string(t.tip)).c_str() : "-", t.name.c_str(),
                        t.not_applicable.c_str());
    std::printf("larger batch: %s. Its LR is ember max-batch's scaling; larger batches may need a "
                "warm-up and generalize worse: check the accuracy, not only the speed\n",
                margin.c_str());
    std::printf("\nfindings (the model, one batch, %lld profiled steps):\n", (long long)profiled);
    nlohmann::ordered_json jfindings = nlohmann::ordered_json::array();
    for (const Finding& f : findings) {
        std::printf("  %-4s %-4s %s\n", f.tip > 0 ? ("#" + std::to_string(f.tip)).c_str() : "-", f.level.c_str(),
                    f.text.c_str());
        jfindings.push_back({{"tip", f.tip}, {"level", f.level}, {"text", f.text}});
    }

    // The command line: the flags given, with each faster trial's (the best
    // first; a later one that sets the same flag is left out).
    std::sort(faster.begin(), faster.end(), std::greater<>());
    std::vector<std::string> flags = given_flags(app);
    std::vector<std::string> taken, applied;
    for (const auto& [ratio, i] : faster) {
        bool clash = false;
        for (const std::string& f : trials[i].flags)
            if (f.rfind("--", 0) == 0 && std::find(taken.begin(), taken.end(), f) != taken.end()) clash = true;
        if (clash) continue;
        for (const std::string& f : trials[i].flags)
            if (f.rfind("--", 0) == 0) taken.push_back(f);
        set_flag(flags, trials[i].flags);
        applied.push_back(trials[i].name);
    }
    std::string command = "ember train";
    for (const std::string& f : flags) command += " " + quoted(f);
    std::printf("\n%s\n  %s\n",
                applied.empty() ? "no trial was faster beyond the measured spread: keep the current settings"
                                : "the command line with every faster setting (each measured alone; "
                                  "together they may gain less):",
                command.c_str());
    nlohmann::ordered_json doc{{"model", c.train.model},
                               {"device", device.str()},
                               {"threads", threads},
                               {"rounds", c.rounds},
                               {"steps", steps},
                               {"round_seconds", round_s},
                               {"warmup_steps", c.warmup},
                               {"larger_batch", margin},
                               {"trials", jtrials},
                               {"findings", jfindings},
                               {"command", command},
                               {"seconds", elapsed()}};
    write_file_atomic(c.json, doc.dump(1) + "\n");
    std::printf("%s written; the doctor took %.0f s (announced: about %.0f s)\n", c.json.c_str(), elapsed(),
                estimate);
    return 0;
}

}  // namespace ember::train

// `ember doctor`'s measurements (tools/train/doctor.h): a trial's run built
// once and stepped round after round as `ember train` steps it, the timing
// of a round, and the findings of one profiled stretch of steps.
#include "tools/train/doctor_steps.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "core/host_sync.h"
#include "core/strprintf.h"
#include "kernels/profile_trace.h"
#include "nn/layers.h"
#include "optim/clip.h"

namespace ember::train {

namespace {

using Clock = std::chrono::steady_clock;

void wait_for(Device device) {
    if (device.is_cuda()) synchronize(current_stream(device));
}

}  // namespace

TrialRunner::TrialRunner(const TrainConfig& c, int threads)
    : config_(c), threads_(threads), run_(build_run(c)) {}

std::optional<data::Batch> TrialRunner::next() {
    if (!begun_) {
        run_.loader->begin_epoch(0, 0);
        begun_ = true;
    }
    std::optional<data::Batch> b = run_.loader->next();
    if (!b) {  // the epoch ended: the next one
        run_.loader->begin_epoch(++epoch_, 0);
        b = run_.loader->next();
    }
    EMBER_CHECK(b.has_value(), "ember doctor: the training data yields no batch");
    return b;
}

// One optimizer step as the training loop takes it (train/trainer.cpp):
// accumulated micro-batches under autocast, loss scaling, clipping; the
// schedule and the divergence guard aside (they do not change the speed).
int64_t TrialRunner::step() {
    const TrainConfig& c = config_;
    const bool amp_on = c.amp != "off";
    const DType low = c.amp == "f16" ? DType::f16 : DType::bf16;
    int64_t samples = 0;
    for (int64_t k = 0; k < c.accumulate; ++k) {
        std::optional<data::Batch> batch = next();
        Tensor loss;
        {
            amp::autocast ac(low, amp_on);
            loss = task_loss(run_.task,
                             task_forward(run_.task, in_format(batch->input, run_.task.memory_format),
                                          c.checkpoint_activations),
                             batch->target);
        }
        const Tensor scaled = c.accumulate > 1 ? div(loss, double(c.accumulate)) : loss;
        (run_.scaler ? run_.scaler->scale(scaled) : scaled).backward();
        samples += batch->input.size(0);
    }
    if (run_.scaler) {
        if (c.clip_grad > 0) {
            run_.scaler->unscale_(*run_.optimizer);
            optim::clip_grads(run_.optimizer->gradients(), c.clip_grad);
        }
        run_.scaler->step(*run_.optimizer);
        run_.scaler->update();
    } else {
        if (c.clip_grad > 0) optim::clip_grads(run_.optimizer->gradients(), c.clip_grad);
        run_.optimizer->step();
    }
    run_.optimizer->zero_grad();
    return samples;
}

double TrialRunner::time(int64_t warmup, int64_t steps, double seconds, size_t* peak) {
    const int before_threads = omp_get_max_threads();
    omp_set_num_threads(threads_);
    struct Restore {
        int n;
        ~Restore() { omp_set_num_threads(n); }
    } restore{before_threads};
    for (int64_t i = 0; i < warmup; ++i) step();
    wait_for(run_.device);
    reset_peak_memory_stats(run_.device);
    const size_t held = memory_stats(run_.device).allocated_bytes;
    const auto t0 = Clock::now();
    auto since = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
    int64_t samples = 0;
    for (int64_t i = 0; i < steps || (seconds > 0 && since() < seconds); ++i) {
        samples += step();
        if (seconds > 0 && i + 1 >= steps) wait_for(run_.device);  // the clock must see the GPU's work
    }
    wait_for(run_.device);
    const double secs = since();
    if (peak) *peak = memory_stats(run_.device).peak_allocated_bytes - held;
    return secs > 0 ? double(samples) / secs : 0;
}

std::vector<Finding> profile_findings(TrialRunner& base, int64_t steps) {
    const Run& run = base.run();
    std::vector<Finding> out;
    (void)host_syncs();  // start counting here
    kernels::Trace trace;
    {
        kernels::Profiler prof;
        for (int64_t i = 0; i < steps; ++i) {
            const kernels::ProfileRange range("step", "step " + std::to_string(i + 1));
            base.step();
        }
        trace = kernels::take_trace(prof, {});
    }
    const std::map<std::string, int64_t> syncs = host_syncs();
    int64_t total = 0;
    std::string by;
    for (const auto& [op, n] : syncs) {
        total += n;
        by += (by.empty() ? "" : ", ") + op + " " + std::to_string(n);
    }
    out.push_back({8, total == 0 ? "ok" : "warn",
                   total == 0 ? std::string(run.device.is_cpu()
                                                ? "host synchronizations per step: 0 (on the CPU nothing waits)"
                                                : "host synchronizations per step: 0")
                              : strprintf("host synchronizations per step: %.1f (%s): each drains the GPU's queue",
                                       double(total) / double(steps), by.c_str())});
    // Time per category inside the steps.
    double step_us = 0, loader_us = 0;
    std::map<std::string, std::pair<double, double>> op_time;  // name: (µs, FLOPs)
    for (const kernels::TraceEvent& e : trace.events) {
        if (e.track != 0 && e.category != "op") continue;
        if (e.category == "step") step_us += e.dur_us;
        if (e.category == "loader") loader_us += e.dur_us;
        if (e.category == "op") {
            op_time[e.name].first += e.dur_us;
            op_time[e.name].second += e.flops;
        }
    }
    const double wait = step_us > 0 ? loader_us / step_us : 0;
    out.push_back({14, wait > 0.1 ? "warn" : "ok",
                   strprintf("the loader's wait: %.1f %% of the step%s", 100 * wait,
                          wait > 0.1 ? ": training is input-bound; more --workers, or a faster disk"
                                     : " (not input-bound)")});
    // An op with FLOPs that takes a large share of the step at a small rate.
    for (const auto& [name, tf] : op_time) {
        const double share = step_us > 0 ? tf.first / step_us : 0;
        const double gflops = tf.first > 0 ? tf.second / (tf.first * 1e3) : 0;
        if (share > 0.1 && tf.second > 0 && gflops < 10)
            out.push_back({22, "warn",
                           strprintf("%s: %.0f %% of the step at %.1f GFLOP/s: a slow path for its "
                                  "shapes (`ember train --profile` shows which)",
                                  name.c_str(), 100 * share, gflops)});
    }
    return out;
}

std::vector<Finding> model_findings(TrialRunner& base) {
    const Run& run = base.run();
    std::vector<Finding> out;
    // A conv with a bias right before a batch norm (registration order).
    std::vector<std::string> biased;
    for (const auto& [prefix, m] : run.model().named_modules()) {
        const auto& kids = m->named_children();
        for (size_t i = 0; i + 1 < kids.size(); ++i) {
            const auto* conv = dynamic_cast<const nn::Conv2d*>(kids[i].second.get());
            if (conv && conv->bias.defined() && dynamic_cast<const nn::BatchNorm2d*>(kids[i + 1].second.get()))
                biased.push_back((prefix.empty() ? "" : prefix + ".") + kids[i].first);
        }
    }
    std::string names;
    for (const std::string& b : biased) names += (names.empty() ? "" : ", ") + b;
    out.push_back({12, biased.empty() ? "ok" : "warn",
                   biased.empty() ? std::string("no convolution with a bias feeds a batch norm")
                                  : "convolutions with a bias before a batch norm, which cancels it: " +
                                        names + " (build them with .bias = false)"});
    // The inputs' statistics, on one batch as the model sees it.
    std::optional<data::Batch> b = base.next();
    const Tensor x = b->input.to(Device::cpu()).to(DType::f64).contiguous();
    const double* v = x.data<double>();
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < x.numel(); ++i) sum += v[i];
    const double mean = x.numel() ? sum / double(x.numel()) : 0;
    for (int64_t i = 0; i < x.numel(); ++i) sq += (v[i] - mean) * (v[i] - mean);
    const double sd = x.numel() ? std::sqrt(sq / double(x.numel())) : 0;
    const bool off = std::fabs(mean) > 1 || sd < 0.25 || sd > 4;
    out.push_back({21, off ? "warn" : "ok",
                   strprintf("inputs: mean %.3f, standard deviation %.3f%s", mean, sd,
                          off ? ": far from 0 and 1; normalize them (data::Normalize with the data's "
                                "statistics)"
                              : " (normalized)")});
    out.push_back({0, "ok",
                   run.device.is_cpu()
                       ? std::string("non-deterministic algorithms: none (the CPU backend is deterministic)")
                       : std::string(run.config.deterministic
                                         ? "non-deterministic algorithms: none (--deterministic)"
                                         : "non-deterministic algorithms: cuDNN may pick some (--deterministic "
                                           "forbids them)")});
    return out;
}

}  // namespace ember::train

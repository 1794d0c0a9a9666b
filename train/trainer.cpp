// The training loop: micro-batches grouped into optimizer steps, the forward
// under autocast (and activation checkpointing), loss scaling, clipping, the
// schedule on applied steps (from device tables under loss scaling), logging
// at intervals, an evaluation and the weights and checkpoint at each epoch's
// end, and the stop on a signal.
#include "train/trainer.h"

#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>
#include <vector>

#include "ember/ember.h"
#include "kernels/optim.h"
#include "train/files.h"
#include "train/metrics.h"
#include "train/plot.h"
#include "train/step_profile.h"

namespace ember::train {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Note [Stopping on a signal]
// The first of the stop signals (--stop-signals: SIGINT, SIGTERM and SIGUSR1
// by default — Ctrl-C, and what a cluster scheduler sends before it preempts
// a job) only sets a flag: the loop finishes the step it is in, writes a
// checkpoint and returns, and the command prints how to resume and exits
// with 128 + the signal's number. A second one exits at once (_exit, nothing
// else runs); every file is written by rename, so whatever was being written
// is left as it was before. The flag and the signal's number are the
// process-wide variables a signal handler can reach.
std::atomic<int> g_signals{0};
std::atomic<int> g_signal_number{0};

extern "C" void on_signal(int number) {
    if (g_signals.fetch_add(1) >= 1) {
        static const char kMessage[] =
            "\nember train: interrupted again: exiting now, without a checkpoint of this step "
            "(the last one written is intact)\n";
        (void)!::write(STDERR_FILENO, kMessage, sizeof kMessage - 1);  // async-signal-safe
        _exit(130);
    }
    g_signal_number = number;
}

class SignalScope {
public:
    explicit SignalScope(const std::vector<int>& signals) {
        g_signals = 0;
        g_signal_number = 0;
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        for (const int sig : signals) {
            struct sigaction old {};
            if (sigaction(sig, &sa, &old) == 0) old_.emplace_back(sig, old);
        }
    }
    ~SignalScope() {
        for (const auto& [sig, old] : old_) sigaction(sig, &old, nullptr);
    }
    SignalScope(const SignalScope&) = delete;
    SignalScope& operator=(const SignalScope&) = delete;
    bool raised() const { return g_signals.load() > 0; }
    /// The signal that stopped the run (0: none).
    int number() const { return g_signal_number.load(); }

private:
    std::vector<std::pair<int, struct sigaction>> old_;
};

void save_weights(const Run& run, const std::string& path) {
    std::map<std::string, std::string> meta = run.task.metadata;
    meta["ember.model"] = run.task.name;
    // What `ember eval` needs to score the weights as the run did.
    meta["ember.data"] = run.config.data;
    meta["ember.seed"] = std::to_string(run.config.seed);
    meta["ember.memory_format"] = memory_format_name(run.task.memory_format);
    nn::save(run.model(), path, meta);
}

// This thread's host synchronizations since the last call (the host-sync
// counter, core/host_sync.h: item, at, to_vector, a blocking to(cpu) of a
// CUDA tensor), summed; resets the counter. Always 0 on the CPU.
int64_t take_host_syncs() {
    int64_t n = 0;
    for (const auto& [op, count] : host_syncs()) n += count;
    return n;
}

}  // namespace

// Whether to stop now. With --ddp every rank must stop at the same step (a
// signal reaches the ranks at different moments): the ranks' wishes are
// combined, and any rank that wants to stop stops them all.
static bool stop_agreed(const Run& run, bool here) {
    if (!run.comm) return here;
    Tensor flag = full({1}, here ? 1.0 : 0.0, {.dtype = DType::i32});
    run.comm->all_reduce(flag, dist::ReduceOp::max, "stop flag");
    return flag.data<int32_t>()[0] != 0;
}

Outcome train(Run& run, const std::string& run_dir, Position pos, const std::string& config_toml) {
    const TrainConfig& c = run.config;
    SignalScope signals(stop_signal_numbers(c.stop_signals));
    std::optional<autograd::DetectAnomalyGuard> anomaly;
    if (c.anomaly) anomaly.emplace();
    set_sync_debug(c.sync_debug);
    const bool amp_on = c.amp != "off";
    const DType low = c.amp == "f16" ? DType::f16 : DType::bf16;  // autocast's, when on
    const Task& task = run.task;
    // Only the lead rank (rank 0, or the only one) prints and writes files.
    std::optional<MetricsLog> metrics;
    std::optional<Progress> progress;
    if (run.lead()) {
        metrics.emplace(run_dir, pos.step);
        progress.emplace(c, task, run.steps_per_epoch);
    }
    const double world = run.world_size();
    // --ddp: a sum over the ranks divided by `world` (losses are per rank).
    auto rank_mean = [&](Tensor t) {
        if (run.comm) run.comm->all_reduce(t, dist::ReduceOp::average, "mean loss");
        return t;
    };
    Outcome out;
    const auto run_start = Clock::now();
    // The run's clock: earlier processes' seconds (a resume: the metrics'
    // last kept record; not the checkpoint, whose bytes the clock must not
    // change) and this one's.
    const double time_before = metrics ? metrics->time_s() : 0;
    auto run_time = [&] {
        return time_before + std::chrono::duration<double>(Clock::now() - run_start).count();
    };
    std::string pending_config = config_toml;  // written with the first checkpoint
    auto checkpoint = [&] {
        save_checkpoint(run_dir, run, pos);
        if (pending_config.empty()) return;
        write_file_atomic((fs::path(run_dir) / "config.toml").string(), pending_config);
        pending_config.clear();
    };
    DivergenceGuard guard(c, run.device, run.scaler != nullptr);
    // The run diverged (out.diverged): the last line, a metrics record, and
    // nothing else written — best.safetensors and the last checkpoint stay
    // those of a finite state.
    StepProfile profile(run, run_dir, progress ? &*progress : nullptr);
    auto diverged = [&] {
        if (progress) progress->end_line();
        profile.finish();
        if (metrics) metrics->event("diverged", out.diverged->step, out.diverged->loss,
                                    out.diverged->message());
        out.position = pos;
        return out;
    };

    for (int64_t epoch = pos.epoch; epoch < c.epochs; ++epoch) {
        const int64_t first = epoch == pos.epoch ? pos.batch : 0;
        run.loader->begin_epoch(epoch, first);
        if (progress) progress->begin_epoch(epoch, first / c.accumulate);
        const auto epoch_start = Clock::now();
        Tensor epoch_sum = zeros({}, {DType::f64, run.device});
        int64_t logged = 0, epoch_batches = 0, epoch_samples = 0, window_samples = 0;
        int64_t step_syncs = 0;  // the steps' host syncs set aside around a checkpoint
        int64_t window_first = pos.step + 1;  // the first step of the record being gathered
        auto window_start = Clock::now();
        // A step record: the mean loss since the last one (the one read of a
        // device value per record), throughput, LR, waiting for data, and the
        // host synchronizations the steps made since the last record, this
        // read included, as the host-sync counter saw them (docs/tips.md #8).
        // The window read (train/divergence.h): its summed loss, and whether
        // the run diverged in it (then `out.diverged`, and nothing is written).
        auto read_window = [&] {
            // --ddp: the ranks' means, so that every rank decides alike.
            const DivergenceGuard::Window w = guard.read(
                run.model(), run.scaler ? run.scaler->scale_tensor() : Tensor(), rank_mean);
            if (w.divergence) out.diverged = w.divergence;
            return w.loss_sum;
        };
        auto write_log = [&] {
            const double loss_avg = read_window() / double(logged);
            const int64_t host_syncs = step_syncs + take_host_syncs();
            step_syncs = 0;
            const double secs = std::chrono::duration<double>(Clock::now() - window_start).count();
            StepRecord r{pos.step,
                         epoch,
                         loss_avg,
                         run.schedule->last_lr(0),  // the LR the window ended at
                         secs > 0 ? world * double(window_samples) / secs : 0,
                         run.loader->stats().wait_fraction,
                         host_syncs,
                         run_time(),
                         window_first};
            if (metrics) metrics->step(r);
            if (progress) progress->log(r);
            if (const std::optional<Spike> sp = guard.spike(pos.step, loss_avg); sp && run.lead()) {
                progress->warn(sp->message());
                metrics->event("warning", pos.step, loss_avg, sp->message());
            }
            guard.next_window();
            window_first = pos.step + 1;
            logged = window_samples = 0;
            window_start = Clock::now();
        };
        run.model().train();
        take_host_syncs();  // the last epoch's evaluation and checkpoint are not the steps'
        profile.begin(pos.step);
        while (std::optional<data::Batch> batch = run.loader->next()) {
            const int64_t b = batch->index;
            const int64_t group_start = b / c.accumulate * c.accumulate;
            const int64_t group_end = std::min(group_start + c.accumulate, run.batches_per_epoch);
            Tensor loss;
            // --ddp: every micro-batch but a step's last accumulates locally (docs/tips.md #17).
            std::optional<dist::DistributedDataParallel::NoSync> local_only;
            if (run.ddp && b + 1 != group_end) local_only.emplace(*run.ddp);
            if (run.ddp) run.ddp->sync_buffers();
            {
                amp::autocast ac(low, amp_on);
                loss = task_loss(task,
                                 task_forward(task, in_format(batch->input, task.memory_format),
                                              c.checkpoint_activations),
                                 batch->target);
            }
            const Tensor scaled =
                group_end - group_start > 1 ? div(loss, double(group_end - group_start)) : loss;
            (run.scaler ? run.scaler->scale(scaled) : scaled).backward();
            {
                NoGradGuard no_grad;
                guard.add_loss(pos.step + 1, loss);
                epoch_sum = add(epoch_sum, loss.detach().to(DType::f64));
            }
            ++logged;
            ++epoch_batches;
            const int64_t n = batch->input.size(0);
            epoch_samples += n;
            window_samples += n;
            batch.reset();  // its staging slot may be refilled
            if (b + 1 != group_end) continue;

            // ---- One optimizer step ----
            if (run.scaler) {
                if (c.clip_grad > 0) {
                    run.scaler->unscale_(*run.optimizer);
                    optim::clip_grads(run.optimizer->gradients(), c.clip_grad);
                }
                // (the LR is not asked for: with device tables that is a host read)
                guard.observe_step(pos.step + 1, Tensor(), NAN);
                const amp::StepResult applied = run.scaler->step(*run.optimizer);
                run.scaler->update();
                // The schedule's tables follow the applied steps on the device
                // (build_run): whether this one was applied is never read here.
                if (!run.schedule->on_device()) run.schedule->step(applied);
            } else {
                Tensor norm;  // the global gradient norm, where clipping or the guard needs it
                if (c.clip_grad > 0)
                    norm = optim::clip_grads(run.optimizer->gradients(), c.clip_grad);
                else if (guard.needs_norm())
                    norm = kernels::global_norm(run.optimizer->gradients());
                const Tensor skip = guard.observe_step(pos.step + 1, norm, run.optimizer->lr(0));
                if (skip.defined())
                    run.optimizer->step_unless(skip);  // --on-nonfinite skip
                else
                    run.optimizer->step();
                run.schedule->step();
            }
            run.optimizer->zero_grad();
            ++pos.step;
            pos.epoch = epoch;
            pos.batch = group_end;
            profile.end(pos.step);
            profile.begin(pos.step);
            if (c.fingerprint_every > 0 && pos.step % c.fingerprint_every == 0) {
                // --fingerprint-every (docs/train.md, "ember diff"): one read of
                // the parameters' f64 norm; not counted as the steps' syncs.
                step_syncs += take_host_syncs();
                const double f = parameter_fingerprint(run.model());
                take_host_syncs();
                if (metrics) metrics->fingerprint(pos.step, f);
            }

            if (pos.step % c.log_every == 0) write_log();
            if (out.diverged) return diverged();
            if (progress) progress->tick(pos.step);
            const bool stop =
                stop_agreed(run, signals.raised() || (c.stop_after > 0 && pos.step == c.stop_after));
            // A checkpoint only of a state known finite: the window is read first.
            if ((stop || (c.save_every > 0 && pos.step % c.save_every == 0)) &&
                pos.step % c.log_every != 0) {
                step_syncs += take_host_syncs();
                read_window();
                take_host_syncs();
                if (out.diverged) return diverged();
            }
            if (c.save_every > 0 && pos.step % c.save_every == 0 && run.lead() && !stop) {
                step_syncs += take_host_syncs();
                checkpoint();
                take_host_syncs();  // the checkpoint's reads of the weights are not the steps'
            }
            if (stop) {
                if (progress) progress->end_line();
                profile.finish();
                if (run.lead()) checkpoint();
                out.interrupted = true;
                out.signal = signals.number();
                out.position = pos;
                return out;
            }
        }

        // ---- The epoch's end: evaluation, weights, checkpoint, curves ----
        if (logged > 0 && pos.step % c.log_every != 0) write_log();  // the epoch's last steps
        if (out.diverged) return diverged();
        const double epoch_secs = std::chrono::duration<double>(Clock::now() - epoch_start).count();
        const double train_loss =
            epoch_batches ? rank_mean(epoch_sum).item() / double(epoch_batches) : 0;
        pos.epoch = epoch + 1;
        pos.batch = 0;
        EpochRecord e{.epoch = epoch,
                      .step = pos.step,
                      .train_loss = train_loss,
                      .epoch_time_s = epoch_secs,
                      .samples_per_s = epoch_secs > 0 ? world * double(epoch_samples) / epoch_secs : 0,
                      .data_wait = run.loader->stats().wait_fraction,
                      .world_size = run.world_size()};
        if ((epoch + 1) % c.eval_every == 0 || epoch + 1 == c.epochs) {
            out.last = evaluate(task, run.device, c.amp, c.workers);
            e.eval = out.last;
            if (improves(task.metric, out.last, pos.best)) {
                pos.best = score(task.metric, out.last);
                if (run.lead()) save_weights(run, (fs::path(run_dir) / "best.safetensors").string());
            }
        }
        if (run.lead()) {
            progress->end_epoch(e);
            metrics->epoch(e);
            save_weights(run, (fs::path(run_dir) / "last.safetensors").string());
            checkpoint();
            // The chart is a convenience (`ember plot` redraws it): a failure
            // to draw it is a warning, never the end of the run.
            try {
                plot_run(run_dir);
            } catch (const Error& e) {
                progress->warn(std::string("curves.svg not updated: ") + e.what());
            }
        }
        if (stop_agreed(run, signals.raised())) {
            out.interrupted = true;
            out.signal = signals.number();
            break;
        }
    }
    profile.finish();
    out.position = pos;
    return out;
}

}  // namespace ember::train

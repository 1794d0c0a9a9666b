// metrics.jsonl and the progress display.
#include "train/metrics.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "kernels/optim.h"
#include "nn/module.h"
#include "train/files.h"

namespace ember::train {

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// A NaN prints as "nan", not as glibc's "-nan" for a NaN with its sign bit set.
double printable(double v) { return std::isnan(v) ? std::fabs(v) : v; }

std::string clock_str(double seconds) {
    const int64_t s = seconds < 0 ? 0 : int64_t(seconds + 0.5);
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600),
                      (long long)(s / 60 % 60), (long long)(s % 60));
    else
        std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
    return buf;
}
}  // namespace

MetricsLog::MetricsLog(const std::string& run_dir, int64_t keep_until)
    : path_((fs::path(run_dir) / "metrics.jsonl").string()) {
    // Keep the lines of steps up to keep_until; rewrite atomically if any goes.
    std::vector<std::string> kept;
    bool dropped = false;
    // Only a regular file is read or appended to: a named pipe would block
    // the open, a directory makes no sense.
    std::error_code ec;
    const fs::file_status st = fs::symlink_status(path_, ec);
    EMBER_CHECK(!fs::exists(st) || fs::is_regular_file(fs::status(path_, ec)), "cannot use ",
                path_, ": it is not a regular file (",
                fs::is_fifo(fs::status(path_, ec)) ? "a named pipe" : "not a file", ")");
    if (std::ifstream in(path_); in) {
        std::string line;
        while (std::getline(in, line)) {
            json j = json::parse(line, nullptr, false);
            if (!j.is_discarded() && j.is_object() && j.contains("step") &&
                j["step"].is_number_integer() && j["step"].get<int64_t>() <= keep_until) {
                kept.push_back(line);
                if (j.contains("time_s") && j["time_s"].is_number() &&
                    std::isfinite(j["time_s"].get<double>()))
                    time_s_ = std::max(time_s_, j["time_s"].get<double>());
            } else
                dropped = true;
        }
    }
    if (dropped) {
        std::string text;
        for (const std::string& l : kept) text += l + "\n";
        write_file_atomic(path_, text);
    }
    f_ = std::fopen(path_.c_str(), "a");
    EMBER_CHECK(f_ != nullptr, "cannot open ", path_, " for writing");
}

MetricsLog::~MetricsLog() {
    if (f_) std::fclose(f_);
}

void MetricsLog::write(const std::string& line) {
    // A record that cannot be written (a full disk) ends the run with the
    // reason: the checkpoint is intact, and on --resume the reader drops a
    // line cut short.
    const bool ok = std::fputs(line.c_str(), f_) >= 0 && std::fputc('\n', f_) != EOF &&
                    std::fflush(f_) == 0;
    EMBER_CHECK(ok, "cannot write ", path_, ": ", std::strerror(errno));
}

void MetricsLog::step(const StepRecord& r) {
    write(json{{"kind", "step"},
               {"step", r.step},
               {"epoch", r.epoch},
               {"loss", r.loss},
               {"loss_hex", hex_double(r.loss)},
               {"from_step", r.first_step},
               {"lr", r.lr},
               {"samples_per_s", r.samples_per_s},
               {"data_wait", r.data_wait},
               {"host_syncs", r.host_syncs},
               {"time_s", r.time_s}}
              .dump());
}

void MetricsLog::fingerprint(int64_t step, double value) {
    write(json{{"kind", "fingerprint"}, {"step", step}, {"params", value}, {"params_hex", hex_double(value)}}
              .dump());
}

std::string hex_double(double x) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%a", x);
    return buf;
}

double parameter_fingerprint(const nn::Module& model) {
    std::vector<Tensor> params;
    // In f64 throughout (global_norm of f32 tensors rounds its result to f32,
    // which would hide a one-ULP change).
    for (const Tensor& p : model.parameters()) params.push_back(p.detach().to(DType::f64));
    if (params.empty()) return 0;
    return kernels::global_norm(params).to(Device::cpu()).item();
}

void MetricsLog::epoch(const EpochRecord& r) {
    json j = {{"kind", "epoch"},
              {"epoch", r.epoch},
              {"step", r.step},
              {"train_loss", r.train_loss},
              {"epoch_time_s", r.epoch_time_s},
              {"samples_per_s", r.samples_per_s},
              {"data_wait", r.data_wait},
              {"world_size", r.world_size}};
    if (r.eval) {
        j["test_loss"] = r.eval->loss;
        if (r.eval->accuracy >= 0) {
            j["test_acc"] = r.eval->accuracy;
        } else {  // a language model: the same loss as perplexity and bits per token
            j["test_perplexity"] = std::exp(r.eval->loss);
            j["test_bits_per_token"] = r.eval->loss / std::log(2.0);
        }
    }
    write(j.dump());
}

void MetricsLog::event(const std::string& kind, int64_t step, double loss,
                       const std::string& message) {
    write(json{{"kind", kind}, {"step", step}, {"loss", loss}, {"message", message}}.dump());
}

Progress::Progress(const TrainConfig& c, const Task& task, int64_t steps_per_epoch)
    : c_(c), task_(task), steps_per_epoch_(steps_per_epoch), tty_(isatty(STDOUT_FILENO) == 1) {}

void Progress::begin_epoch(int64_t epoch, int64_t first_step_in_epoch) {
    epoch_ = epoch;
    epoch_first_step_ = first_step_in_epoch;
    base_step_ = epoch * steps_per_epoch_ + first_step_in_epoch;
    start_ = std::chrono::steady_clock::now();
}

void Progress::draw(int64_t step) {
    const int64_t in_epoch = step - epoch_ * steps_per_epoch_;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int64_t done = step - base_step_;
    const double eta = done > 0 ? elapsed / double(done) * double(steps_per_epoch_ - in_epoch) : 0;
    constexpr int kWidth = 24;
    const int filled = int(kWidth * in_epoch / std::max<int64_t>(1, steps_per_epoch_));
    std::string bar(size_t(filled), '=');
    if (filled < kWidth) bar += '>';
    bar.resize(kWidth, ' ');
    std::printf("\repoch %lld/%lld [%s] %lld/%lld", (long long)epoch_ + 1, (long long)c_.epochs,
                bar.c_str(), (long long)in_epoch, (long long)steps_per_epoch_);
    if (have_last_)
        std::printf("  %.0f samples/s  loss %.4f  lr %.2e", last_.samples_per_s, last_.loss, last_.lr);
    std::printf("  ETA %s   ", clock_str(eta).c_str());
    std::fflush(stdout);
    on_line_ = true;
}

void Progress::tick(int64_t step) {
    if (tty_) draw(step);
}

void Progress::log(const StepRecord& r) {
    last_ = r;
    have_last_ = true;
    if (tty_) return;  // the bar shows it
    const int64_t in_epoch = r.step - epoch_ * steps_per_epoch_;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int64_t done = r.step - base_step_;
    const double eta = done > 0 ? elapsed / double(done) * double(steps_per_epoch_ - in_epoch) : 0;
    std::printf("epoch %lld/%lld  step %lld/%lld  loss %.4f  lr %.2e  %.0f samples/s  data wait "
                "%.1f%%  ETA %s\n",
                (long long)epoch_ + 1, (long long)c_.epochs, (long long)in_epoch,
                (long long)steps_per_epoch_, printable(r.loss), r.lr, r.samples_per_s, 100 * r.data_wait,
                clock_str(eta).c_str());
    std::fflush(stdout);
}

void Progress::end_line() {
    if (on_line_) std::printf("\n");
    on_line_ = false;
}

void Progress::warn(const std::string& text) {
    end_line();
    std::printf("warning: %s\n", text.c_str());
    std::fflush(stdout);
}

void Progress::end_epoch(const EpochRecord& r) {
    end_line();
    std::printf("epoch %lld/%lld: train loss %.4f", (long long)r.epoch + 1, (long long)c_.epochs,
                printable(r.train_loss));
    if (r.eval) {
        std::printf(", %s loss %.4f", task_.eval_split.c_str(), printable(r.eval->loss));
        if (r.eval->accuracy >= 0)
            std::printf(", %s accuracy %.2f%%", task_.eval_split.c_str(), 100 * r.eval->accuracy);
        if (!task_.token_name.empty())
            std::printf(" (perplexity %.3f, %.3f bits/%s)", std::exp(r.eval->loss),
                        r.eval->loss / std::log(2.0), task_.token_name.c_str());
    }
    std::printf(", %.1f s, %.0f samples/s, data wait %.1f%%\n", r.epoch_time_s, r.samples_per_s,
                100 * r.data_wait);
    std::fflush(stdout);
}

}  // namespace ember::train

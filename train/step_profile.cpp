// --profile in the training loop (train/step_profile.h).
#include "train/step_profile.h"

#include <cstdio>
#include <filesystem>

#include "kernels/profile_trace.h"

namespace ember::train {

StepProfile::StepProfile(const Run& run, std::string run_dir, Progress* progress)
    : run_(run), run_dir_(std::move(run_dir)), progress_(progress) {
    if (!run.config.profile.empty() && run.lead()) window_ = parse_profile_window(run.config.profile);
}

void StepProfile::begin(int64_t done) {
    if (!window_) return;
    if (!prof_ && done == window_->after) prof_.emplace();
    if (prof_) step_start_ = prof_->now_us();
}

void StepProfile::end(int64_t step) {
    if (!prof_) return;
    prof_->add({.name = "step " + std::to_string(step),
                .category = "step",
                .start_us = step_start_,
                .dur_us = prof_->now_us() - step_start_});
    if (step >= window_->until) finish();
}

void StepProfile::finish() {
    if (!prof_) return;
    const kernels::Trace trace = kernels::take_trace(
        *prof_, {.title = "ember train --model " + run_.config.model, .limits = run_.profile_limits});
    prof_.reset();
    window_.reset();
    const std::string path = (std::filesystem::path(run_dir_) / "trace.json").string();
    kernels::write_chrome_trace(trace, path);
    if (progress_) progress_->end_line();
    std::printf("%s", kernels::summarize(trace).c_str());
    std::printf("trace of the profiled steps: %s (ui.perfetto.dev opens it; `ember profile %s` "
                "prints this again)\n",
                path.c_str(), run_dir_.c_str());
    std::fflush(stdout);
}

}  // namespace ember::train

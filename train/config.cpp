// The settings' names, their checks, and the values that depend on others
// (the optimizer's LR and weight decay, the device `auto` stands for).
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/recipe.h"

namespace ember::train {

namespace {

bool one_of(const std::string& v, const std::vector<std::string>& names) {
    return std::find(names.begin(), names.end(), v) != names.end();
}

}  // namespace

const std::vector<std::string>& optimizer_names() {
    static const std::vector<std::string> names = {"adamw", "adam", "sgd", "lamb", "lars"};
    return names;
}

const std::vector<std::string>& schedule_names() {
    static const std::vector<std::string> names = {"onecycle", "cyclic", "cosine",
                                                   "cosine-restarts", "step", "constant"};
    return names;
}

const std::vector<std::string>& amp_names() {
    static const std::vector<std::string> names = {"off", "bf16", "f16"};
    return names;
}

const std::vector<std::string>& memory_format_names() {
    static const std::vector<std::string> names = {"auto", "contiguous", "channels_last"};
    return names;
}

const std::vector<std::string>& tokenizer_names() {
    static const std::vector<std::string> names = {"char", "byte"};
    return names;
}

const std::vector<std::string>& nonfinite_names() {
    static const std::vector<std::string> names = {"stop", "skip", "continue"};
    return names;
}

std::string joined(const std::vector<std::string>& names) {
    std::string s;
    for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
    return s;
}

void validate(const TrainConfig& c) {
    EMBER_CHECK(one_of(c.optimizer, optimizer_names()), "--optimizer: '", c.optimizer,
                "' is not one of ", joined(optimizer_names()));
    EMBER_CHECK(one_of(c.schedule, schedule_names()), "--schedule: '", c.schedule,
                "' is not one of ", joined(schedule_names()));
    EMBER_CHECK(one_of(c.amp, amp_names()), "--amp: '", c.amp, "' is not one of ",
                joined(amp_names()));
    EMBER_CHECK(one_of(c.memory_format, memory_format_names()), "--memory-format: '",
                c.memory_format, "' is not one of ", joined(memory_format_names()));
    EMBER_CHECK(!c.lr || (*c.lr > 0 && std::isfinite(*c.lr)), "--lr must be positive, got ",
                c.lr.value_or(0));
    EMBER_CHECK(!c.weight_decay || (*c.weight_decay >= 0 && std::isfinite(*c.weight_decay)),
                "--weight-decay must be >= 0, got ", c.weight_decay.value_or(0));
    EMBER_CHECK(c.epochs >= 1, "--epochs must be >= 1, got ", c.epochs);
    EMBER_CHECK(c.batch_size >= 1, "--batch-size must be >= 1, got ", c.batch_size);
    EMBER_CHECK(c.accumulate >= 1, "--accumulate must be >= 1, got ", c.accumulate);
    EMBER_CHECK(one_of(c.tokenizer, tokenizer_names()), "--tokenizer: '", c.tokenizer,
                "' is not one of ", joined(tokenizer_names()));
    EMBER_CHECK(c.dropout >= 0 && c.dropout < 1, "--dropout must be in [0, 1), got ", c.dropout);
    // NaN passes CLI11's range checks (every comparison with it is false): each
    // real-valued setting is checked to be finite here.
    EMBER_CHECK(std::isfinite(c.clip_grad) && c.clip_grad >= 0,
                "--clip-grad must be a finite number >= 0 (0: off), got ", c.clip_grad);
    EMBER_CHECK(std::isfinite(c.dist_timeout) && c.dist_timeout > 0,
                "--dist-timeout must be a finite number of seconds > 0, got ", c.dist_timeout);
    EMBER_CHECK(std::isfinite(c.momentum) && c.momentum >= 0 && c.momentum < 1,
                "--momentum must be in [0, 1), got ", c.momentum);
    EMBER_CHECK(one_of(c.on_nonfinite, nonfinite_names()), "--on-nonfinite: '", c.on_nonfinite,
                "' is not one of ", joined(nonfinite_names()));
    EMBER_CHECK(c.max_skips >= 1, "--max-skips must be >= 1, got ", c.max_skips);
    EMBER_CHECK(c.keep_checkpoints >= 1 && c.keep_checkpoints <= 1000000,
                "--keep-checkpoints must be in [1, 1000000], got ", c.keep_checkpoints);
    EMBER_CHECK(!c.extend || !c.resume.empty() || c.restart,
                "--extend re-spans a resumed run's schedule: it needs --resume");
    (void)stop_signal_numbers(c.stop_signals);  // throws on a name it does not know
    if (!c.profile.empty()) (void)parse_profile_window(c.profile);
    EMBER_CHECK(c.fingerprint_every >= 0, "--fingerprint-every must be >= 0, got ", c.fingerprint_every);
    (void)Device::parse(c.device == "auto" ? "cpu" : c.device);  // throws on a bad name
}

std::string resolve_resume(const std::string& resume, const std::string& out) {
    if (resume != "auto") return resume;
    EMBER_CHECK(!out.empty(), "--resume auto needs --out DIR: the run it continues, or starts there");
    return std::filesystem::exists(checkpoint_path(out)) ? out : std::string();
}

ProfileWindow parse_profile_window(const std::string& text) {
    // Whole numbers only: digits, no sign, no more than 12 of them.
    auto whole = [&](const std::string& s) {
        EMBER_CHECK(!s.empty() && s.size() <= 12 &&
                        s.find_first_not_of("0123456789") == std::string::npos,
                    "--profile: '", text, "' is not A:B (two step counts, as 20:30: the 10 "
                    "steps after the 20th)");
        return std::stoll(s);
    };
    const size_t colon = text.find(':');
    EMBER_CHECK(colon != std::string::npos, "--profile: '", text,
                "' is not A:B (two step counts, as 20:30: the 10 steps after the 20th)");
    const ProfileWindow w{whole(text.substr(0, colon)), whole(text.substr(colon + 1))};
    EMBER_CHECK(w.after < w.until, "--profile ", text, ": the window is empty (A must be below B)");
    EMBER_CHECK(w.until - w.after <= 10000, "--profile ", text, ": ", w.until - w.after,
                " steps is more than a trace should hold (at most 10000; a few dozen show a "
                "step's time well)");
    return w;
}

std::vector<int> stop_signal_numbers(const std::string& list) {
    static const std::pair<const char*, int> known[] = {
        {"INT", SIGINT}, {"TERM", SIGTERM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
        {"HUP", SIGHUP}, {"QUIT", SIGQUIT}, {"XCPU", SIGXCPU}};
    std::vector<int> out;
    size_t at = 0;
    while (at <= list.size()) {
        const size_t comma = std::min(list.find(',', at), list.size());
        std::string name = list.substr(at, comma - at);
        if (name.rfind("SIG", 0) == 0) name = name.substr(3);
        bool found = false;
        for (const auto& [n, number] : known)
            if (name == n) {
                out.push_back(number);
                found = true;
            }
        EMBER_CHECK(found, "--stop-signals: '", list.substr(at, comma - at),
                    "' is not one of INT, TERM, USR1, USR2, HUP, QUIT, XCPU");
        at = comma + 1;
    }
    return out;
}

const Recipe& recipe_of(const TrainConfig& c) {
    EMBER_CHECK(one_of(c.model, recipe_names()), "--model: '", c.model, "' is not one of ",
                joined(recipe_names()));
    const Recipe& r = recipe(c.model);
    EMBER_CHECK(one_of(c.data, r.datasets) || (r.data_paths && !c.data.empty()), "--data: '",
                c.data, "' is not one of ", joined(r.datasets), " (the datasets of ", c.model, ")");
    return r;
}

double effective_lr(const TrainConfig& c) {
    if (c.lr) return *c.lr;
    if (c.optimizer == "sgd") return 0.1;
    if (c.optimizer == "lars") return 1.0;
    if (c.optimizer == "lamb") return 2e-3;
    if (c.optimizer == "adam") return 1e-3;
    // AdamW, the default: the peak of the one-cycle schedule, tuned per model
    // (docs/train.md, "Default learning rates"); 3e-3 for a task of one's own.
    const std::vector<std::string> names = recipe_names();
    return one_of(c.model, names) ? recipe(c.model).adamw_lr : 3e-3;
}

MemoryFormat effective_memory_format(const TrainConfig& c) {
    if (c.memory_format == "auto") {
        const std::vector<std::string> names = recipe_names();
        return one_of(c.model, names) && resolve_device(c).is_cpu() ? recipe(c.model).cpu_format
                                                                    : MemoryFormat::contiguous;
    }
    return c.memory_format == "channels_last" ? MemoryFormat::channels_last
                                              : MemoryFormat::contiguous;
}

double effective_weight_decay(const TrainConfig& c) {
    if (c.weight_decay) return *c.weight_decay;
    if (c.optimizer == "adamw") return 0.05;
    if (c.optimizer == "lamb") return 0.01;
    if (c.optimizer == "adam") return 0.0;
    return 5e-4;
}

Device resolve_device(const TrainConfig& c) {
    if (c.device == "auto") return cuda_device_count() > 0 ? Device::cuda(0) : Device::cpu();
    const Device d = Device::parse(c.device);
    EMBER_CHECK(d.is_cpu() || cuda_built(), "--device ", c.device,
                ": ember was built without CUDA");
    EMBER_CHECK(d.is_cpu() || d.index < cuda_device_count(), "--device ", c.device,
                ": no such GPU (", cuda_device_count(), " found)");
    return d;
}

}  // namespace ember::train

// A whole run around the training loop: the run directory (made, or resumed
// in place), config.toml, the restored checkpoint and the start table.
#include <fcntl.h>
#include <omp.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

#include "ember/ember.h"
#include "train/files.h"
#include "train/trainer.h"

namespace ember::train {

namespace {

namespace fs = std::filesystem;

std::string default_run_dir(const Run& run, std::time_t now) {
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    return (fs::path("runs") / (run.task.name + "-" + stamp)).string();
}

// The longest path a run writes inside its directory: a checkpoint's
// temporary (checkpoint/ + AtomicFile's name of at most 160 bytes).
constexpr size_t kLongestInside = 11 + 160 + 1;

// A run directory whose files' paths would not fit PATH_MAX fails at the
// start, not after its first epoch's training.
void check_path_room(const std::string& dir, const char* flag) {
    std::error_code ec;
    const size_t n = fs::absolute(dir, ec).string().size();
    EMBER_CHECK(n + kLongestInside < PATH_MAX, flag, " ", dir.substr(0, 60), "...: the path is ", n,
                " bytes long; the run's files inside it would pass the system's limit of ",
                PATH_MAX, " bytes");
}

// The directory a run writes: --resume's (which must hold a run), or a new
// or empty one (never one that holds another run's checkpoint).
std::string prepare_run_dir(const Run& run, std::time_t now) {
    const TrainConfig& c = run.config;
    std::error_code ec;
    if (!c.resume.empty()) {
        EMBER_CHECK(fs::is_directory(c.resume, ec), "--resume ", c.resume, ": no such run directory",
                    ec ? " (" + ec.message() + ")" : std::string());
        EMBER_CHECK(fs::exists(checkpoint_path(c.resume), ec), "--resume ", c.resume,
                    ": no checkpoint in it (", checkpoint_path(c.resume), ")");
        return c.resume;
    }
    const std::string dir = c.out.empty() ? default_run_dir(run, now) : c.out;
    check_path_room(dir, "--out");
    EMBER_CHECK(!fs::exists(checkpoint_path(dir), ec), "--out ", dir,
                " already holds a run; continue it with --resume ", dir, " or choose another --out");
    // New or empty: a run never writes over files it did not make.
    if (fs::is_directory(dir, ec)) {
        // Under --resume auto, a run that stopped before its first
        // checkpoint is started again: its own files may be replaced.
        // (What a run writes before its first checkpoint, and the
        // temporaries of a write it was killed in.)
        static const char* const kRunFiles[] = {"config.toml",      "metrics.jsonl",
                                                 "curves.svg",       "tokenizer.json",
                                                 ".lock",            "checkpoint",
                                                 "last.safetensors", "best.safetensors"};
        auto own = [&](const fs::path& p) {
            if (!c.restart) return false;
            const std::string name = p.filename().string();
            if (name[0] == '.' && name.find(".ember-tmp-") != std::string::npos) return true;
            for (const char* f : kRunFiles)
                if (name == f) return true;
            return false;
        };
        fs::directory_iterator it(dir, ec);
        EMBER_CHECK(!ec, "--out ", dir, ": cannot read it (", ec.message(), ")");
        for (; it != fs::directory_iterator(); it.increment(ec))
            EMBER_CHECK(own(it->path()), "--out ", dir, " is not empty (it holds '",
                        it->path().filename().string(),
                        "'...); a run writes into a new or empty directory: choose another --out");
        EMBER_CHECK(!ec, "--out ", dir, ": cannot read it (", ec.message(), ")");
    } else {
        EMBER_CHECK(!fs::exists(fs::symlink_status(dir, ec)), "--out ", dir,
                    " exists and is not a directory");
    }
    fs::create_directories(dir, ec);
    EMBER_CHECK(!ec && fs::is_directory(dir), "--out ", dir, ": cannot create it (",
                ec ? ec.message() : "not a directory", ")");
    return dir;
}

// A run lock: an flock on DIR/.lock held from the start of a run to its end
// (released by the kernel if the process dies), so two trainers — or two
// --resume — never write one run directory at once. The holder's pid is
// written into the file for the message of the one refused.
class RunLock {
public:
    explicit RunLock(const std::string& dir) : path_((fs::path(dir) / ".lock").string()) {
        fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        EMBER_CHECK(fd_ >= 0, "cannot lock the run directory ", dir, ": ", std::strerror(errno));
        if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
            char buf[32] = {};
            const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
            ::close(fd_);
            fd_ = -1;
            const std::string holder = n > 0 ? std::string(buf, size_t(n)) : std::string("?");
            EMBER_FAIL("the run directory ", dir, " is in use by another ember train (pid ",
                       holder.substr(0, holder.find_first_of(" \n")),
                       "); wait for it to end or stop it first");
        }
        const std::string pid = std::to_string(::getpid()) + "\n";
        if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, pid.data(), pid.size(), 0);
    }
    ~RunLock() {
        if (fd_ >= 0) ::close(fd_);  // releases the flock
    }
    RunLock(const RunLock&) = delete;
    RunLock& operator=(const RunLock&) = delete;

private:
    std::string path_;
    int fd_ = -1;
};

// The processor's name from /proc/cpuinfo ("" where there is none).
std::string cpu_model_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("model name", 0) == 0) {
            const size_t colon = line.find(':');
            if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
        }
    return "";
}

}  // namespace

void print_start(const Run& r, const std::string& dir, const Position& pos) {
    const TrainConfig& c = r.config;
    const Task& t = r.task;
    std::printf("ember train: %s on %s, %lld epochs of %lld steps (batch %lld", t.name.c_str(),
                r.device.str().c_str(), (long long)c.epochs, (long long)r.steps_per_epoch,
                (long long)c.batch_size);
    if (c.accumulate > 1) std::printf(" x %lld accumulated", (long long)c.accumulate);
    std::printf(")\n");
    std::printf("  model       %s, %lld parameters\n", t.name.c_str(),
                (long long)nn::parameter_count(r.model()));
    std::printf("  data        %s: %lld training, %lld %s %s\n", t.data_name.c_str(),
                (long long)t.train_data->size(), (long long)t.eval_data->size(),
                t.eval_split.c_str(), t.sample_noun.c_str());
    std::printf("  optimizer   %s, lr %g, weight decay %g, schedule %s%s\n", c.optimizer.c_str(),
                effective_lr(c), effective_weight_decay(c), c.schedule.c_str(),
                c.warmup > 0 ? (" after " + std::to_string(c.warmup) + " warm-up steps").c_str() : "");
    if (pos.extended.epochs > 0)
        std::printf("  schedule    re-spanned from %lld to %lld epochs (--extend): the next step's "
                    "LR is %g (on the old span: %g)\n",
                    (long long)pos.extended.epochs, (long long)c.epochs, r.schedule->lr(0),
                    pos.extended.next_lr);
    char clip[64] = "";
    if (c.clip_grad > 0) std::snprintf(clip, sizeof clip, ", gradients clipped at %g", c.clip_grad);
    std::printf("  precision   %s%s%s, %s activations%s\n", c.amp == "off" ? "f32" : c.amp.c_str(),
                clip, c.checkpoint_activations ? ", activations recomputed" : "",
                memory_format_name(t.memory_format),
                c.memory_format == "auto" ? " (--memory-format auto)" : "");
    if (r.device.is_cpu()) {
        const std::string cpu = cpu_model_name();
        std::printf("  device      cpu%s%s, %d OpenMP threads%s, %u hardware threads, %d loader "
                    "workers\n",
                    cpu.empty() ? "" : " ", cpu.c_str(), omp_get_max_threads(),
                    r.threads_note.empty() ? "" : (" (" + r.threads_note + ")").c_str(),
                    std::thread::hardware_concurrency(), c.workers);
    } else {
        const CudaDeviceProperties p = cuda_device_properties(r.device.index);
        std::printf("  device      %s, %s, %.1f GiB; %s\n", r.device.str().c_str(), p.name.c_str(),
                    double(p.total_memory) / double(1 << 30), cuda_versions().c_str());
        // The switches that change f32 results or speed (docs/cuda.md).
        std::printf("  kernels     TF32 %s, cuDNN benchmark %s, deterministic %s, %d loader workers\n",
                    allow_tf32() ? "on" : "off", cudnn_benchmark() ? "on" : "off",
                    cudnn_deterministic() ? "on" : "off", c.workers);
    }
    if (r.comm)
        std::printf("  ranks       %d (%s), batch %lld per rank, %lld in all\n", r.world_size(),
                    r.comm->backend().c_str(), (long long)c.batch_size,
                    (long long)(c.batch_size * r.world_size()));
    std::printf("  run         %s%s\n", dir.c_str(),
                pos.step > 0 ? (" (resuming after step " + std::to_string(pos.step) + ")").c_str() : "");
    std::fflush(stdout);
}

Outcome fit(Run& run, const FitOptions& options) {
    const TrainConfig& c = run.config;
    // The lead rank makes the directory; with ddp the others learn its
    // name (rank 0's clock) and whether that worked before going on.
    std::time_t now = std::time(nullptr);
    if (run.comm) {
        Tensor t = full({1}, 0.0, {.dtype = DType::i64});
        t.data<int64_t>()[0] = int64_t(now);
        run.comm->broadcast(t, 0, "run directory name");
        now = std::time_t(t.data<int64_t>()[0]);
    }
    // With ddp, a failure on the lead rank is every rank's: the others learn
    // of it here instead of waiting in the first collective.
    auto agree = [&](const std::string& failure, const char* what) {
        if (!run.comm) return;
        Tensor failed = full({1}, failure.empty() ? 0.0 : 1.0, {.dtype = DType::i32});
        run.comm->all_reduce(failed, dist::ReduceOp::max, what);
        if (failed.data<int32_t>()[0] != 0)
            EMBER_FAIL(failure.empty() ? std::string("rank 0 could not prepare the run directory")
                                       : failure);
    };
    std::string dir, failure;
    std::optional<RunLock> lock;  // the lead rank writes the directory: it holds the lock
    if (run.lead()) {
        try {
            dir = prepare_run_dir(run, now);
            lock.emplace(dir);  // before anything in it is written
        } catch (const Error& e) {
            if (!run.comm) throw;
            failure = e.what();
        }
    } else {
        dir = !c.resume.empty() ? c.resume : c.out.empty() ? default_run_dir(run, now) : c.out;
    }
    agree(failure, "run directory check");
    Position pos;
    if (!c.resume.empty()) pos = load_checkpoint(dir, run);
    EMBER_CHECK(pos.extended.epochs == 0 || pos.epoch < c.epochs, "--extend to --epochs ",
                c.epochs, " leaves nothing to train: the run has trained ", pos.epoch,
                " epoch(s); give more");
    // The configuration is written once the run is known good: a refused
    // --resume leaves the run's config.toml as it was. A new length
    // (--extend) is written with the first checkpoint of it, so that the
    // two never disagree.
    const bool defer_config = pos.extended.epochs > 0;
    if (run.lead()) {
        try {
            if (!options.config_toml.empty() && !defer_config)
                write_file_atomic((fs::path(dir) / "config.toml").string(), options.config_toml);
            for (const auto& [name, content] : run.task.files)
                write_file_atomic((fs::path(dir) / name).string(), content);
        } catch (const Error& e) {
            if (!run.comm) throw;
            failure = e.what();
        }
    }
    agree(failure, "run files check");
    if (pos.epoch >= c.epochs) {  // a finished run: nothing to train
        Outcome out;
        out.complete = true;
        out.position = pos;
        out.run_dir = dir;
        return out;
    }
    if (run.lead() && options.print) print_start(run, dir, pos);
    Outcome out = train(run, dir, pos, defer_config && run.lead() ? options.config_toml : "");
    out.run_dir = dir;
    return out;
}

}  // namespace ember::train

// `ember train` and `ember eval`: the run directory (created, or resumed in
// place), config.toml, the start-up table, the training, and the last lines.
#include "tools/train/commands.h"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tools/train/checkpoint.h"
#include "tools/train/files.h"
#include "tools/train/trainer.h"

namespace ember::train {

namespace {

namespace fs = std::filesystem;

std::string default_run_dir(const TrainConfig& c, std::time_t now) {
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    return (fs::path("runs") / (c.model + "-" + stamp)).string();
}

// The directory a run writes: --resume's (which must hold a run), or a new
// or empty one (never one that holds another run's checkpoint).
std::string prepare_run_dir(const TrainConfig& c, std::time_t now) {
    std::error_code ec;
    if (!c.resume.empty()) {
        EMBER_CHECK(fs::is_directory(c.resume), "--resume ", c.resume, ": no such run directory");
        EMBER_CHECK(fs::exists(checkpoint_path(c.resume)), "--resume ", c.resume,
                    ": no checkpoint in it (", checkpoint_path(c.resume), ")");
        return c.resume;
    }
    const std::string dir = c.out.empty() ? default_run_dir(c, now) : c.out;
    EMBER_CHECK(!fs::exists(checkpoint_path(dir)), "--out ", dir,
                " already holds a run; continue it with --resume ", dir, " or choose another --out");
    fs::create_directories(dir, ec);
    EMBER_CHECK(!ec && fs::is_directory(dir), "--out ", dir, ": cannot create it (",
                ec ? ec.message() : "not a directory", ")");
    return dir;
}

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

void print_start(const Run& r, const std::string& dir, const Position& pos) {
    const TrainConfig& c = r.config;
    std::printf("ember train: %s on %s, %lld epochs of %lld steps (batch %lld", c.model.c_str(),
                r.device.str().c_str(), (long long)c.epochs, (long long)r.steps_per_epoch,
                (long long)c.batch_size);
    if (c.accumulate > 1) std::printf(" x %lld accumulated", (long long)c.accumulate);
    std::printf(")\n");
    std::printf("  model       %s, %lld parameters\n", c.model.c_str(),
                (long long)nn::parameter_count(*r.model));
    std::printf("  data        %s: %lld training, %lld test samples\n",
                c.data == "synthetic" ? "synthetic (data::SyntheticDataset, seeded)" : "Fashion-MNIST",
                (long long)r.data.train->size(), (long long)r.data.test->size());
    std::printf("  optimizer   %s, lr %g, weight decay %g, schedule %s%s\n", c.optimizer.c_str(),
                effective_lr(c), effective_weight_decay(c), c.schedule.c_str(),
                c.warmup > 0 ? (" after " + std::to_string(c.warmup) + " warm-up steps").c_str() : "");
    std::printf("  precision   %s%s%s, %s activations\n", c.amp == "off" ? "f32" : c.amp.c_str(),
                c.clip_grad > 0 ? (", gradients clipped at " + std::to_string(c.clip_grad)).c_str() : "",
                c.checkpoint_activations ? ", activations recomputed" : "",
                memory_format_name(effective_memory_format(c)));
    if (r.device.is_cpu()) {
        const std::string cpu = cpu_model_name();
        std::printf("  device      cpu%s%s, %d OpenMP threads, %u hardware threads, %d loader workers\n",
                    cpu.empty() ? "" : " ", cpu.c_str(), omp_get_max_threads(),
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

}  // namespace

CLI::App* add_train_command(CLI::App& root, TrainConfig& c) {
    CLI::App* app = root.add_subcommand("train", "Train a reference model (docs/train.md)");
    add_train_options(*app, c);
    return app;
}

CLI::App* add_eval_command(CLI::App& root, EvalConfig& c) {
    CLI::App* app = root.add_subcommand("eval", "Test loss and accuracy of saved weights");
    app->add_option("--model", c.model, "Reference model: mlp, resnet8")->capture_default_str();
    app->add_option("--weights", c.weights,
                    "A weights file (last.safetensors, best.safetensors) or a checkpoint")
        ->required();
    app->add_option("--device", c.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
    app->add_option("--data-dir", c.data_dir, "Folder with Fashion-MNIST's files");
    app->add_option("--amp", c.amp, "off, bf16 or f16")
        ->check(CLI::IsMember({"off", "bf16", "f16"}))
        ->capture_default_str();
    app->add_option("--workers", c.workers, "Loader threads")->check(CLI::Range(0, 256));
    return app;
}

int run_train(CLI::App& app, TrainConfig c) {
    validate(c);
    if (c.dump_config) {
        std::printf("%s", app.config_to_str(true, true).c_str());
        return 0;
    }
    if (c.threads > 0) omp_set_num_threads(c.threads);
    Run run = build_run(c);  // the data and the model first: a bad start leaves no directory
    // The lead rank makes the directory; with --ddp the others learn its
    // name (rank 0's clock) and whether that worked before going on.
    std::time_t now = std::time(nullptr);
    if (run.comm) {
        Tensor t = full({1}, 0.0, {.dtype = DType::i64});
        t.data<int64_t>()[0] = int64_t(now);
        run.comm->broadcast(t, 0, "run directory name");
        now = std::time_t(t.data<int64_t>()[0]);
    }
    std::string dir, failure;
    if (run.lead()) {
        try {
            dir = prepare_run_dir(c, now);
            write_file_atomic((fs::path(dir) / "config.toml").string(),
                              app.config_to_str(true, false));
        } catch (const Error& e) {
            if (!run.comm) throw;
            failure = e.what();
        }
    } else {
        dir = !c.resume.empty() ? c.resume : c.out.empty() ? default_run_dir(c, now) : c.out;
    }
    if (run.comm) {
        Tensor failed = full({1}, failure.empty() ? 0.0 : 1.0, {.dtype = DType::i32});
        run.comm->all_reduce(failed, dist::ReduceOp::max, "run directory check");
        if (failed.data<int32_t>()[0] != 0)
            EMBER_FAIL(failure.empty() ? std::string("rank 0 could not prepare the run directory")
                                       : failure);
    }
    Position pos;
    if (!c.resume.empty()) pos = load_checkpoint(dir, run);
    if (run.lead()) print_start(run, dir, pos);
    const Outcome out = train(run, dir, pos);
    if (!run.lead()) return out.interrupted ? 130 : 0;
    if (out.interrupted) {
        std::printf("interrupted after step %lld: checkpoint written to %s\n"
                    "resume with: ember train --resume %s\n",
                    (long long)out.position.step, checkpoint_path(dir).c_str(), dir.c_str());
        return 130;
    }
    std::printf("done: %lld steps, test accuracy %.2f%% (best %.2f%%); weights, checkpoint and "
                "metrics in %s\n",
                (long long)out.position.step, 100 * out.last.accuracy,
                100 * out.position.best_accuracy, dir.c_str());
    return 0;
}

int run_eval(const EvalConfig& c) {
    TrainConfig t;
    t.model = c.model;
    t.device = c.device;
    t.data_dir = c.data_dir;
    validate(t);
    const Device device = resolve_device(t);
    auto model = nn::make_model(c.model);
    load_weights(*model, c.weights);
    model->to(device);
    data::FashionMNIST test(data::Split::test, c.data_dir);
    const Evaluation e =
        evaluate(*model, test, device, c.amp, c.workers, effective_memory_format(t));
    std::printf("%s on %s: test loss %.4f, test accuracy %.2f%% (%lld samples)\n",
                c.weights.c_str(), device.str().c_str(), e.loss, 100 * e.accuracy,
                (long long)e.samples);
    return 0;
}

}  // namespace ember::train

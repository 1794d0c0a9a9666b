// `ember train` and `ember eval`: the flags, the run (train/: fit), and the
// last lines.
#include "tools/train/commands.h"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "bench/bench.h"
#include "core/cpu_load.h"
#include "nn/safetensors.h"
#include "tools/cli_checks.h"
#include "tools/train/options.h"
#include "train/checkpoint.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace ember::train {

namespace fs = std::filesystem;

CLI::App* add_train_command(CLI::App& root, TrainConfig& c) {
    CLI::App* app = root.add_subcommand("train", "Train a reference model (docs/train.md)");
    add_train_options(*app, c);
    return app;
}

CLI::App* add_eval_command(CLI::App& root, EvalConfig& c) {
    CLI::App* app = root.add_subcommand("eval", "Evaluation loss and accuracy of saved weights");
    app->add_option("--model", c.model,
                    "Reference model: " + joined(recipe_names()) +
                        " (default: the one the weights record)");
    app->add_option("SOURCE", c.source,
                    "A run directory (its best.safetensors, else last.safetensors, evaluated as "
                    "its config.toml says) or a weights file");
    app->add_option("--weights", c.weights,
                    "A weights file (last.safetensors, best.safetensors) or a checkpoint");
    app->add_option("--data", c.data,
                    "Evaluate on this data (default: the run's; another needs --other-data)");
    app->add_flag("--other-data", c.other_data,
                  "Allow --data to differ from the data the run trained on");
    app->add_option("--device", c.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
    app->add_option("--data-dir", c.data_dir, "Folder with the dataset's files (default: the run's)");
    app->add_option("--amp", c.amp, "off, bf16 or f16")
        ->check(CLI::IsMember(amp_names()))
        ->capture_default_str();
    app->add_option("--workers", c.workers, "Loader threads")->check(cli::whole(0, 256));
    return app;
}

int run_train(CLI::App& app, TrainConfig c) {
    if (c.resume == "auto") {  // the run in --out if it has a checkpoint, else a new one there
        c.resume = resolve_resume(c.resume, c.out);
        c.restart = c.resume.empty();
    }
    apply_recipe_defaults(app, c);
    validate(c);
    recipe_of(c);
    if (c.dump_config) {
        std::printf("%s", app.config_to_str(true, true).c_str());
        return 0;
    }
    if (c.threads > 0) omp_set_num_threads(c.threads);
    Run run = build_run(c);  // the data and the model first: a bad start leaves no directory
    // On a CPU shared with other processes, fewer threads than cores (core/cpu_load.h);
    // --threads and OMP_NUM_THREADS choose for themselves.
    if (run.device.is_cpu() && c.threads == 0 && !std::getenv("OMP_NUM_THREADS")) {
        const CpuLoad load = measure_cpu_load();
        const int threads = threads_for_load(load);
        if (threads < omp_get_max_threads()) {
            omp_set_num_threads(threads);
            run.threads_note = load_str(load) + " at the start; --threads N chooses";
        }
    }
    // --profile: the summary's limits, measured as `ember bench` measures them
    // (before the run, so that its times and the trace do not hold them).
    if (!c.profile.empty() && run.lead()) run.profile_limits = bench::measure_limits(run.device, {});
    if (c.save_every > run.total_steps && run.lead())
        std::fprintf(stderr,
                     "ember train: warning: --save-every %lld is beyond the run's %lld steps: "
                     "checkpoints are written only at each epoch's end\n",
                     (long long)c.save_every, (long long)run.total_steps);
    const Outcome out = fit(run, {.config_toml = app.config_to_str(true, false)});
    // Stopped by a signal: 128 + its number, as a shell reports a process the
    // signal ended (130 for Ctrl-C, 143 SIGTERM, 138 SIGUSR1); --stop-after: 130.
    const int stopped = out.signal > 0 ? 128 + out.signal : 130;
    if (!run.lead()) return out.diverged ? 3 : out.interrupted ? stopped : 0;
    if (out.complete) {
        std::printf("the run in %s is complete: %lld epochs, %lld steps; nothing to train "
                    "(a larger --epochs with --extend trains on)\n",
                    out.run_dir.c_str(), (long long)out.position.epoch, (long long)out.position.step);
        return 0;
    }
    if (out.diverged) {
        const bool kept = std::filesystem::exists(checkpoint_path(out.run_dir));
        std::fprintf(stderr, "ember train: %s\nstopped: nothing of the diverged state was saved; %s. "
                     "Try a lower --lr, --clip-grad 1, or --anomaly to name the op that made it\n",
                     out.diverged->message().c_str(),
                     kept ? ("the weights and the checkpoint in " + out.run_dir +
                             " are from before it (--resume continues from there)")
                                .c_str()
                          : "no checkpoint was written before it");
        return 3;
    }
    if (out.interrupted) {
        // --ddp: the same launch, with the same number of ranks.
        const std::string launch =
            run.comm ? "mpirun -np " + std::to_string(run.world_size()) + " ember train --ddp"
                     : std::string("ember train");
        std::printf("interrupted after step %lld: checkpoint written to %s\n"
                    "resume with: %s --resume %s\n",
                    (long long)out.position.step, checkpoint_path(out.run_dir).c_str(),
                    launch.c_str(), out.run_dir.c_str());
        return stopped;
    }
    const std::string& split = run.task.eval_split;
    if (run.task.metric == Metric::accuracy)
        std::printf("done: %lld steps, %s accuracy %.2f%% (best %.2f%%); weights, checkpoint and "
                    "metrics in %s\n",
                    (long long)out.position.step, split.c_str(), 100 * out.last.accuracy,
                    100 * out.position.best.value_or(0), out.run_dir.c_str());
    else
        std::printf("done: %lld steps, %s loss %.4f (best %.4f); weights, checkpoint and metrics "
                    "in %s\n",
                    (long long)out.position.step, split.c_str(), out.last.loss,
                    out.position.best.value_or(out.last.loss), out.run_dir.c_str());
    return 0;
}

namespace {

// What `ember eval` evaluates: the weights file, and the configuration of
// the run that wrote it where the weights sit in a run directory (its
// config.toml; else run_eval reads what the weights' metadata records).
struct EvalSource {
    std::string weights;
    std::optional<TrainConfig> run;  // from config.toml
};

EvalSource eval_source(const EvalConfig& c) {
    EMBER_CHECK(c.source.empty() != c.weights.empty(),
                c.source.empty() ? "eval: give a run directory or a weights file (or --weights)"
                                 : "eval: give either RUN_DIR|WEIGHTS or --weights, not both");
    const fs::path path = c.source.empty() ? c.weights : c.source;
    std::error_code ec;
    EvalSource s;
    fs::path run_dir;
    if (fs::is_directory(path, ec)) {
        run_dir = path;
        for (const char* name : {"best.safetensors", "last.safetensors"})
            if (fs::exists(path / name, ec)) {
                s.weights = (path / name).string();
                break;
            }
        EMBER_CHECK(!s.weights.empty(), "eval: ", path.string(), " holds no best.safetensors or "
                    "last.safetensors (a run writes them at its first epoch's end; a checkpoint "
                    "can be given: ", (path / "checkpoint" / "state.safetensors").string(), ")");
    } else {
        s.weights = path.string();
        // A weights file of a run directory (best, last, or its checkpoint),
        // given relative to anywhere ("checkpoint/state.safetensors").
        const fs::path dir = fs::absolute(path, ec).parent_path();
        run_dir = dir.filename() == "checkpoint" ? dir.parent_path() : dir;
    }
    if (!run_dir.empty() && fs::is_regular_file(run_dir / "config.toml", ec))
        s.run = read_run_config(run_dir.string());
    return s;
}

}  // namespace

int run_eval(const EvalConfig& c) {
    const EvalSource src = eval_source(c);
    const std::string& weights = src.weights;
    const nn::TensorFile file = nn::load_safetensors(weights);
    const std::optional<std::string> recorded = recorded_model(weights);
    EMBER_CHECK(!recorded || c.model.empty() || *recorded == c.model, "eval: ", weights,
                " holds the weights of a ", *recorded, ", not of a ", c.model,
                " (leave out --model: the weights say which model they are)");
    const std::string model =
        !c.model.empty() ? c.model : recorded ? *recorded : src.run ? src.run->model : "";
    EMBER_CHECK(!model.empty(), "eval: ", weights, " does not record its model; name it with "
                "--model (", joined(recipe_names()), ")");
    const Recipe& r = recipe(model);
    // The run's settings: its config.toml, else the weights' metadata, else
    // the recipe's defaults.
    // config.toml of a run of another model (weights copied in) says nothing of these.
    const bool use_run = src.run && src.run->model == model;
    TrainConfig t = use_run ? *src.run : r.defaults;
    std::optional<std::string> run_data = use_run ? std::optional(src.run->data) : std::nullopt;
    const auto meta = [&](const char* key) -> std::optional<std::string> {
        const auto it = file.metadata.find(key);
        return it == file.metadata.end() ? std::nullopt : std::optional(it->second);
    };
    if (!use_run) {
        if (auto d = meta("ember.data")) run_data = t.data = *d;
        if (auto f = meta("ember.memory_format")) t.memory_format = *f;
        if (auto seed = meta("ember.seed")) t.seed = std::strtoull(seed->c_str(), nullptr, 10);
    }
    if (!c.data.empty() && c.data != t.data) {
        // Scores on data the model never saw are easy to misread: a
        // synthetic-data run scores ~10 % on Fashion-MNIST.
        EMBER_CHECK(!run_data || c.other_data, "eval: ", weights, " was trained on --data ",
                    *run_data, "; evaluating it on ", c.data,
                    " measures another task (give --other-data to do so)");
        t.data = c.data;
    }
    t.device = c.device;
    if (!c.data_dir.empty()) t.data_dir = c.data_dir;
    if (r.from_metadata) {
        try {
            r.from_metadata(t, file.metadata);
        } catch (const Error& e) {
            EMBER_FAIL("eval: ", weights, ": ", e.what());
        }
    }
    validate(t);
    const Device device = resolve_device(t);
    Task task = recipe_of(t).make_task(t);
    // A text model's tokens must mean what they meant in training.
    for (const auto& [key, value] : task.metadata)
        if (key == "ember.tokenizer" && file.metadata.count(key))
            EMBER_CHECK(file.metadata.at(key) == value, "eval: ", weights,
                        " was trained with another tokenizer than the data's (",
                        task.data_name, ")");
    load_weights(*task.model, weights);
    task.model->to(device);
    const Evaluation e = evaluate(task, device, c.amp, c.workers);
    std::printf("%s on %s, %s, %s layout: %s loss %.4f", weights.c_str(), device.str().c_str(),
                task.data_name.c_str(), memory_format_name(task.memory_format),
                task.eval_split.c_str(), e.loss);
    if (e.accuracy >= 0)
        std::printf(", %s accuracy %.2f%%", task.eval_split.c_str(), 100 * e.accuracy);
    std::printf(" (%lld %s)\n", (long long)e.samples, task.sample_noun.c_str());
    return 0;
}

}  // namespace ember::train

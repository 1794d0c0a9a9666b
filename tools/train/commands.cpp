// `ember train` and `ember eval`: the flags, the run (train/: fit), and the
// last lines.
#include "tools/train/commands.h"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <cstdio>
#include <filesystem>

#include "nn/safetensors.h"
#include "tools/cli_checks.h"
#include "tools/train/options.h"
#include "train/checkpoint.h"
#include "train/recipe.h"
#include "train/trainer.h"

namespace ember::train {

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
    app->add_option("--weights", c.weights,
                    "A weights file (last.safetensors, best.safetensors) or a checkpoint")
        ->required();
    app->add_option("--device", c.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
    app->add_option("--data-dir", c.data_dir, "Folder with the dataset's files");
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

int run_eval(const EvalConfig& c) {
    std::string model = c.model;
    if (model.empty()) {
        const std::optional<std::string> recorded = recorded_model(c.weights);
        EMBER_CHECK(recorded, "eval: ", c.weights, " does not record its model; name it with --model (",
                    joined(recipe_names()), ")");
        model = *recorded;
    }
    const Recipe& r = recipe(model);
    TrainConfig t = r.defaults;
    t.device = c.device;
    t.data_dir = c.data_dir;
    const nn::TensorFile file = nn::load_safetensors(c.weights);
    if (r.from_metadata) {
        try {
            r.from_metadata(t, file.metadata);
        } catch (const Error& e) {
            EMBER_FAIL("eval: ", c.weights, ": ", e.what());
        }
    }
    validate(t);
    const Device device = resolve_device(t);
    Task task = recipe_of(t).make_task(t);
    // A text model's tokens must mean what they meant in training.
    for (const auto& [key, value] : task.metadata)
        if (key == "ember.tokenizer" && file.metadata.count(key))
            EMBER_CHECK(file.metadata.at(key) == value, "eval: ", c.weights,
                        " was trained with another tokenizer than the data's (",
                        task.data_name, ")");
    load_weights(*task.model, c.weights);
    task.model->to(device);
    const Evaluation e = evaluate(task, device, c.amp, c.workers);
    std::printf("%s on %s: %s loss %.4f", c.weights.c_str(), device.str().c_str(),
                task.eval_split.c_str(), e.loss);
    if (e.accuracy >= 0)
        std::printf(", %s accuracy %.2f%%", task.eval_split.c_str(), 100 * e.accuracy);
    std::printf(" (%lld %s)\n", (long long)e.samples, task.sample_noun.c_str());
    return 0;
}

}  // namespace ember::train

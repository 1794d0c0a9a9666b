// `ember`: the command line. The only place that catches ember::Error: it
// prints one line and exits non-zero.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "bench/bench.h"
#include "core/error.h"
#include "tools/commands.h"
#include "tools/train/commands.h"
#include "tools/train/diff.h"
#include "tools/train/doctor.h"
#include "tools/train/finders.h"
#include "tools/train/options.h"

int main(int argc, char** argv) {
    CLI::App app{"ember: a deep learning training engine in C++20 and CUDA"};
    app.require_subcommand(1);
    app.add_subcommand("info", "Print version, build options, CPU features and CUDA devices");
    app.add_subcommand("demo", "Run a short tour of the tensor API");
    CLI::App* bench = app.add_subcommand("bench", "Run kernel micro-benchmarks");
    ember::bench::Options bopts;
    ember::bench::add_options(*bench, bopts);
    ember::train::TrainConfig tconf;
    CLI::App* train = ember::train::add_train_command(app, tconf);
    ember::train::EvalConfig econf;
    ember::train::add_eval_command(app, econf);
    ember::train::LrFindConfig lconf;
    CLI::App* lr_find = ember::train::add_lr_find_command(app, lconf);
    ember::train::MaxBatchConfig mconf;
    CLI::App* max_batch = ember::train::add_max_batch_command(app, mconf);
    ember::train::DoctorConfig doconf;
    CLI::App* doctor = ember::train::add_doctor_command(app, doconf);
    CLI::App* plot = app.add_subcommand(
        "plot", "Redraw a training run's curves: RUN_DIR/curves.svg from RUN_DIR/metrics.jsonl");
    std::string plot_dir;
    CLI::App* generate = app.add_subcommand(
        "generate", "Text from a trained gpt: ember generate RUN_DIR [--prompt TEXT] [--tokens N]");
    ember::cli::GenerateConfig gconf;
    ember::cli::add_generate_options(*generate, gconf);
    CLI::App* profile = app.add_subcommand(
        "profile", "Where the time of profiled steps went: ember profile RUN_DIR|trace.json");
    ember::cli::ProfileConfig pconf;
    ember::cli::add_profile_options(*profile, pconf);
    CLI::App* diff = app.add_subcommand(
        "diff", "Where two runs part, or how two weight files differ: ember diff A B");
    ember::train::DiffConfig dconf;
    diff->add_option("A", dconf.a, "A run directory or a .safetensors file")->required();
    diff->add_option("B", dconf.b, "Another of the same kind")->required();
    diff->add_option("--tolerance", dconf.tolerance,
                     "Relative difference of losses reported as the first beyond it")
        ->check(CLI::Range(0.0, 1.0))
        ->capture_default_str();
    diff->add_option("--top", dconf.top, "Tensors listed")->check(CLI::Range(1, 1000000))->capture_default_str();
    diff->add_flag("--exit-code", dconf.exit_code, "Exit 1 when they differ (as git diff --exit-code)");
    plot->add_option("RUN_DIR", plot_dir, "The run directory that `ember train` wrote")->required();
    try {
        // `ember train --config FILE` (or --resume's config.toml) read in, flags after it.
        std::vector<std::string> args = ember::train::expand_config(argc, argv);
        std::vector<char*> argp;
        for (std::string& a : args) argp.push_back(a.data());
        app.parse(int(argp.size()), argp.data());
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help, --help-all
        // A bad flag or value: one line, as every other error, and the usage
        // exit status.
        std::fprintf(stderr, "ember: error: %s (--help lists the flags)\n", e.what());
        return 2;
    } catch (const std::exception& e) {  // ember::Error, or a file system error on a path given
        std::fprintf(stderr, "ember: error: %s\n", e.what());
        return 1;
    }
    try {
        if (app.got_subcommand("info")) return ember::cli::run_info();
        if (app.got_subcommand("demo")) return ember::cli::run_demo();
        if (app.got_subcommand("bench")) return ember::bench::run(bopts);
        if (app.got_subcommand("train")) return ember::train::run_train(*train, tconf);
        if (app.got_subcommand("eval")) return ember::train::run_eval(econf);
        if (app.got_subcommand("plot")) return ember::cli::run_plot(plot_dir);
        if (app.got_subcommand("doctor")) return ember::train::run_doctor(*doctor, doconf);
        if (app.got_subcommand("diff")) return ember::train::run_diff(dconf);
        if (app.got_subcommand("profile")) return ember::cli::run_profile(pconf);
        if (app.got_subcommand("generate")) return ember::cli::run_generate(gconf);
        if (app.got_subcommand("lr-find")) return ember::train::run_lr_find(*lr_find, lconf);
        if (app.got_subcommand("max-batch")) return ember::train::run_max_batch(*max_batch, mconf);
    } catch (const ember::Error& e) {
        std::fprintf(stderr, "ember: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ember: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

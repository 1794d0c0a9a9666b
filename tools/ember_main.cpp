// `ember`: the command line. The only place that catches ember::Error: it
// prints one line and exits non-zero.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "bench/bench.h"
#include "core/error.h"
#include "tools/commands.h"

int main(int argc, char** argv) {
    CLI::App app{"ember: a deep learning training engine in C++20 and CUDA"};
    app.require_subcommand(1);
    app.add_subcommand("info", "Print version, build options, CPU features and CUDA devices");
    app.add_subcommand("demo", "Run a short tour of the tensor API");
    CLI::App* bench = app.add_subcommand("bench", "Run kernel micro-benchmarks");
    ember::bench::Options bopts;
    ember::bench::add_options(*bench, bopts);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        if (app.got_subcommand("info")) return ember::cli::run_info();
        if (app.got_subcommand("demo")) return ember::cli::run_demo();
        if (app.got_subcommand("bench")) return ember::bench::run(bopts);
    } catch (const ember::Error& e) {
        std::fprintf(stderr, "ember: error: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ember: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

// `ember train`'s config files: the lines config_args turns into flags, what
// it refuses, and the same text parsed by the train command's own options.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>

#include "core/error.h"
#include "tools/train/options.h"
#include "train/config.h"

using namespace ember;
using namespace ember::train;
using Args = std::vector<std::string>;

TEST_CASE("config_args: one whole flag per key = value line", "[train][config]") {
    const std::string text =
        "# a run\n"
        "[train]\n"
        "model = \"resnet8\"\n"
        "  epochs=3  \r\n"
        "\n"
        "anomaly = true\n"
        "deterministic = false\n"
        "lr =\n"
        "out = --resume\n";
    CHECK(config_args(text, "run.toml") == Args{"--model=resnet8", "--epochs=3", "--anomaly=true",
                                                "--deterministic=false", "--out=--resume"});
}

TEST_CASE("config_args: true on a value option, comments, quotes, a BOM; run actions refused",
          "[train][config]") {
    // `out = true` once became a bare `--out`, which took the next line's
    // flag as its value (the epochs were lost).
    TrainConfig c;
    CLI::App app{"train"};
    add_train_options(app, c);
    Args args = config_args("\xEF\xBB\xBFout = true\nepochs = 2 # two\ndata = 'synthetic' # a comment\n"
                            "checkpoint-activations = false\nmodel = \"resnet8\"\n",
                            "run.toml");
    std::reverse(args.begin(), args.end());
    app.parse(args);
    CHECK(c.out == "true");
    CHECK(c.epochs == 2);
    CHECK(c.data == "synthetic");
    CHECK(c.model == "resnet8");
    CHECK_FALSE(c.checkpoint_activations);
    for (const char* key : {"stop-after", "resume", "config", "dump-config"})
        CHECK_THROWS_WITH(config_args(std::string(key) + " = 3\n", "run.toml"),
                          Catch::Contains("run.toml:1: '" + std::string(key) +
                                          "' cannot be set from a file"));
    CHECK_THROWS_WITH(config_args("out = \"runs/x\n", "run.toml"),
                      Catch::Contains("run.toml:1: the string value of 'out' has no closing quote"));
    CHECK_THROWS_WITH(config_args("out = \"a\" b\n", "run.toml"),
                      Catch::Contains("unexpected 'b' after the value of 'out'"));
}

TEST_CASE("config_args: a line without '=' or with a bad key names the file and line",
          "[train][config]") {
    CHECK_THROWS_WITH(config_args("model = mlp\nnonsense\n", "run.toml"),
                      Catch::Contains("run.toml:2: expected key = value, got 'nonsense'"));
    CHECK_THROWS_WITH(config_args("= 3\n", "run.toml"), Catch::Contains("run.toml:1: bad key"));
    CHECK_THROWS_WITH(config_args("-epochs = 3\n", "run.toml"),
                      Catch::Contains("run.toml:1: bad key '-epochs'"));
    CHECK_THROWS_WITH(config_args("two words = 3\n", "run.toml"),
                      Catch::Contains("bad key 'two words'"));
}

TEST_CASE("config_args: a value that looks like a flag stays the option's value",
          "[train][config]") {
    // `--` as a separate token would end CLI11's options; attached, it is
    // the (bad) value of --model and is refused as such.
    TrainConfig c;
    CLI::App app{"train"};
    add_train_options(app, c);
    Args args = config_args("model = --\nepochs = 4\n", "run.toml");
    std::reverse(args.begin(), args.end());
    CHECK_THROWS_AS(app.parse(args), CLI::ValidationError);

    TrainConfig d;
    CLI::App app2{"train"};
    add_train_options(app2, d);
    Args good = config_args("out = --resume\nepochs = 4\nbatch-size = 64\n", "run.toml");
    std::reverse(good.begin(), good.end());
    app2.parse(good);
    CHECK(d.out == "--resume");
    CHECK(d.epochs == 4);
    CHECK(d.batch_size == 64);
    CHECK(d.resume.empty());
}

TEST_CASE("validate: real-valued settings must be finite; the run's safety settings checked",
          "[train][config]") {
    // A C++ program fills TrainConfig without CLI11's checks: NaN must not
    // turn clipping off or a timeout into forever.
    auto fails = [](auto change, const char* what) {
        TrainConfig c;
        change(c);
        CHECK_THROWS_WITH(validate(c), Catch::Contains(what));
    };
    fails([](TrainConfig& c) { c.clip_grad = NAN; }, "--clip-grad must be a finite number");
    fails([](TrainConfig& c) { c.dist_timeout = NAN; }, "--dist-timeout must be a finite number");
    fails([](TrainConfig& c) { c.momentum = 1.0; }, "--momentum must be in [0, 1)");
    fails([](TrainConfig& c) { c.on_nonfinite = "ignore"; }, "--on-nonfinite: 'ignore'");
    fails([](TrainConfig& c) { c.max_skips = 0; }, "--max-skips must be >= 1");
    fails([](TrainConfig& c) { c.keep_checkpoints = 0; }, "--keep-checkpoints must be in");
    fails([](TrainConfig& c) { c.stop_signals = "INT,BOGUS"; }, "--stop-signals: 'BOGUS'");
    TrainConfig ok;
    ok.stop_signals = "SIGINT,USR2";
    CHECK_NOTHROW(validate(ok));
    CHECK(stop_signal_numbers("INT,SIGTERM,USR1") == std::vector<int>{SIGINT, SIGTERM, SIGUSR1});
    // --resume auto: the run in --out only when it has a checkpoint.
    CHECK(resolve_resume("runs/a", "") == "runs/a");
    CHECK(resolve_resume("auto", "/nonexistent/ember-run") == "");
    CHECK_THROWS_WITH(resolve_resume("auto", ""), Catch::Contains("--resume auto needs --out"));
}

// `ember train`'s config files: the lines config_args turns into flags, what
// it refuses, and the same text parsed by the train command's own options.
#include <catch2/catch.hpp>

#include <CLI/CLI.hpp>

#include <algorithm>

#include "core/error.h"
#include "tools/train/options.h"

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

// Fuzz target: the two files `ember train` reads besides tensors. An even
// first byte: the rest is a config file (`--config run.toml`, a run's
// config.toml), turned into flags by config_args and parsed by the train
// command's own CLI11 options, then validated. An odd first byte: the rest is
// the JSON a checkpoint carries, checked by parse_checkpoint_meta against an
// mlp run of 100 batches per epoch (bit 1: with a loss scaler). Bad text must
// end in an ember::Error or, for flags, CLI11's own parse error; nothing else.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "support/fuzz_targets.h"
#include "tools/train/options.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace ember::fuzz {

namespace {

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz train_files: %s\n", what);
    std::abort();
}

void config_text(const std::string& text) {
    std::vector<std::string> args;
    try {
        args = train::config_args(text, "fuzz.toml");
    } catch (const Error&) {
        return;
    }
    // Each line is one flag with its value attached, so no value can pose
    // as a flag (`out = --resume`) or as the end of the options (`--`).
    for (const std::string& a : args)
        if (a.size() < 3 || a.rfind("--", 0) != 0 || a[2] == '=' || a[2] == '-')
            broken("a config line that is not one whole flag");
    train::TrainConfig c;
    CLI::App app{"train"};
    train::add_train_options(app, c);
    std::reverse(args.begin(), args.end());  // CLI11 takes them last first
    try {
        app.parse(args);
        train::apply_recipe_defaults(app, c);
        train::validate(c);
        train::recipe_of(c);
    } catch (const CLI::ParseError&) {
        return;
    } catch (const Error&) {
        return;
    }
    // What validate accepts is what the trainer builds from.
    if (c.lr && !(*c.lr > 0 && std::isfinite(*c.lr))) broken("validate passed a bad --lr");
    if (c.epochs < 1 || c.batch_size < 1) broken("CLI11 passed an out-of-range count");
}

void checkpoint_meta(const std::string& text, bool scaler) {
    try {
        const train::CheckpointMeta m = train::parse_checkpoint_meta(
            text, {.model = "mlp", .batches_per_epoch = 100, .scaler = scaler});
        if (m.position.step < 0 || m.position.epoch < 0 || m.position.batch < 0 ||
            m.position.batch > 100)
            broken("a position out of range was accepted");
        if (!scaler && !m.scaler.empty()) broken("a scaler state for a run without one");
    } catch (const Error&) {
    }
}

}  // namespace

int train_files(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] % 2 == 0)
        config_text(text);
    else
        checkpoint_meta(text, (data[0] & 2) != 0);
    return 0;
}

}  // namespace ember::fuzz

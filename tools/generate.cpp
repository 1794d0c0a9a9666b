// `ember generate RUN_DIR|--weights W`: text from a trained gpt, streamed as
// it is sampled (train/generate.h), control characters escaped; tokens/s at
// the end, on stderr.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>

#include "tools/cli_checks.h"
#include "train/config.h"
#include "train/generate.h"
#include "tools/commands.h"

namespace ember::cli {

void add_generate_options(CLI::App& app, GenerateConfig& c) {
    app.add_option("RUN_DIR", c.run_dir,
                   "A run directory of ember train --model gpt (its best.safetensors)");
    app.add_option("--weights", c.weights, "A weights file of such a run instead");
    app.add_option("--prompt", c.prompt, "Text to continue (default: a new line)");
    app.add_option("--tokens", c.options.tokens, "Tokens to generate")
        ->check(cli::whole(0, int64_t(1) << 24))
        ->capture_default_str();
    app.add_option("--temperature", c.options.temperature,
                   "Sharpens (< 1) or flattens (> 1) the distribution; 0: the most likely token")
        ->check(cli::number(0.0, 100.0))
        ->capture_default_str();
    app.add_option("--top-k", c.options.top_k, "Draw among the k most likely tokens (0: all)")
        ->check(cli::whole(0, int64_t(1) << 24))
        ->capture_default_str();
    app.add_option("--seed", c.options.seed, "Seed: the same seed and prompt give the same text")
        ->capture_default_str();
    app.add_option("--device", c.device, "cpu, cuda, cuda:N or auto")->capture_default_str();
}

int run_generate(const GenerateConfig& c) {
    EMBER_CHECK(c.run_dir.empty() != c.weights.empty(),
                "generate: give a run directory or --weights (one of them)");
    train::TrainConfig t;
    t.device = c.device;
    const Device device = train::resolve_device(t);
    const train::TextModel m = train::load_text_model(c.weights.empty() ? c.run_dir : c.weights, device);
    const std::string prompt = c.prompt.empty() ? std::string("\n") : c.prompt;
    const std::vector<int32_t> ids = m.tokenizer.encode(prompt, "--prompt");
    train::TerminalText out;
    if (!c.prompt.empty()) std::fputs(out.feed(c.prompt).c_str(), stdout);
    std::fflush(stdout);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<int32_t> drawn = train::sample(*m.model, ids, c.options, [&](int32_t token) {
        std::fputs(out.feed(m.tokenizer.decode(token)).c_str(), stdout);
        std::fflush(stdout);
    });
    std::fputs(out.flush().c_str(), stdout);
    std::fputs("\n", stdout);
    std::fflush(stdout);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "generate: %zu tokens in %.2f s (%.0f tokens/s) on %s from %s\n",
                 drawn.size(), s, s > 0 ? double(drawn.size()) / s : 0.0, device.str().c_str(),
                 m.weights.c_str());
    return 0;
}

}  // namespace ember::cli

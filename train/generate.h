// Text from a trained GPT: the model and tokenizer a run (or weights file)
// records, and sampling through the KV cache — what `ember generate` runs.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../data/tokenizer.h"
#include "../nn/transformer.h"

namespace ember::train {

/// A GPT and its tokenizer, as `ember train --model gpt` saved them.
struct TextModel {
    std::shared_ptr<nn::GPT> model;
    data::Tokenizer tokenizer;
    std::string weights;  ///< the file they came from
};

/// Loads RUN_DIR/best.safetensors (else last.safetensors) when `path` is a
/// run directory, or the weights file `path`: the model's shape and the
/// tokenizer from its metadata ("ember.gpt", "ember.tokenizer"), then the
/// weights, on `device`, in eval mode. An Error names the file and what it
/// lacks (a checkpoint, or another model's weights, say).
TextModel load_text_model(const std::string& path, Device device = Device::cpu());

struct SampleOptions {
    int64_t tokens = 500;      ///< tokens to draw
    double temperature = 0.8;  ///< logits / temperature; 0: always the most likely token
    int64_t top_k = 0;         ///< draw among the k most likely only; 0: all
    uint64_t seed = 0;         ///< the same seed and prompt give the same tokens
};

/// Continues `prompt` (at least one token) with o.tokens tokens drawn one at
/// a time through the KV cache, calling on_token as each is drawn; returns
/// them. Token t's uniform is element t of the Philox stream of o.seed
/// (docs/rng.md), so the text does not depend on the machine. When the
/// context fills (block_size tokens), the cache restarts from the last half.
std::vector<int32_t> sample(nn::GPT& model, const std::vector<int32_t>& prompt,
                            const SampleOptions& o,
                            const std::function<void(int32_t)>& on_token = {});

/// Text for a terminal: control characters (C0 but newline and tab, DEL,
/// C1) as visible escapes ("\x07"), so generated text never rings the bell
/// or moves the cursor; bytes that are not UTF-8 as "\xNN". Fed a piece at a
/// time (a byte tokenizer may split a character), it holds back an
/// unfinished sequence until the next piece or flush().
class TerminalText {
public:
    /// What can be printed of `piece` (with what was held back).
    std::string feed(std::string_view piece);
    /// What is still held back, escaped.
    std::string flush();

private:
    std::string pending_;
};

}  // namespace ember::train

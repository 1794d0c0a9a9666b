// Loading a trained GPT with its tokenizer, sampling with the KV cache, and
// terminal-safe text.
#include "train/generate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>

#include "autograd/grad_mode.h"
#include "data/utf8.h"
#include "ember/ember.h"
#include "kernels/random_math.h"
#include "nn/safetensors.h"
#include "train/checkpoint.h"

namespace ember::train {

namespace {

namespace fs = std::filesystem;

std::string weights_of(const std::string& path) {
    std::error_code ec;
    if (!fs::is_directory(path, ec)) return path;
    for (const char* name : {"best.safetensors", "last.safetensors"}) {
        const fs::path p = fs::path(path) / name;
        if (fs::exists(p, ec)) return p.string();
    }
    EMBER_FAIL("generate: ", path, " holds no best.safetensors or last.safetensors (is it a run "
               "directory of ember train --model gpt?)");
}

// The index of a draw u in [0, 1) from weights w (not normalized).
size_t draw(const std::vector<double>& w, double u) {
    const double total = std::accumulate(w.begin(), w.end(), 0.0);
    double acc = 0;
    for (size_t i = 0; i < w.size(); ++i) {
        acc += w[i];
        if (u * total < acc) return i;
    }
    return w.size() - 1;  // u·total rounded up to the total
}

}  // namespace

TextModel load_text_model(const std::string& path, Device device) {
    TextModel m;
    m.weights = weights_of(path);
    const nn::TensorFile file = nn::load_safetensors(m.weights);
    const auto& meta = file.metadata;
    EMBER_CHECK(!meta.count("ember.checkpoint"), "generate: ", m.weights,
                " is a training checkpoint; give the run directory or a weights file "
                "(best.safetensors, last.safetensors)");
    const auto model = meta.find("ember.model"), shape = meta.find("ember.gpt"),
               tok = meta.find("ember.tokenizer");
    EMBER_CHECK(model != meta.end() && model->second == "gpt" && shape != meta.end() &&
                    tok != meta.end(),
                "generate: ", m.weights, " is not the weights of a gpt (",
                model == meta.end() ? std::string("no model recorded")
                                    : "model " + model->second,
                "); generate needs a run of ember train --model gpt");
    try {
        m.tokenizer = data::Tokenizer::from_json(tok->second);
        const nn::GPTConfig config = nn::GPTConfig::from_json(shape->second);
        EMBER_CHECK(config.vocab_size == m.tokenizer.vocab_size(), "the model's vocabulary of ",
                    config.vocab_size, " tokens is not the tokenizer's ",
                    m.tokenizer.vocab_size());
        m.model = std::make_shared<nn::GPT>(config);
        m.model->load_state_dict(file.tensors);
    } catch (const Error& e) {
        EMBER_FAIL("generate: ", m.weights, ": ", e.what());
    }
    m.model->to(device);
    m.model->eval();
    return m;
}

std::vector<int32_t> sample(nn::GPT& model, const std::vector<int32_t>& prompt,
                            const SampleOptions& o, const std::function<void(int32_t)>& on_token) {
    EMBER_CHECK(!prompt.empty(), "generate: the prompt needs at least one token");
    EMBER_CHECK(o.tokens >= 0, "generate: --tokens must be >= 0, got ", o.tokens);
    EMBER_CHECK(o.temperature >= 0 && std::isfinite(o.temperature),
                "generate: --temperature must be >= 0, got ", o.temperature);
    EMBER_CHECK(o.top_k >= 0, "generate: --top-k must be >= 0, got ", o.top_k);
    NoGradGuard no_grad;
    const nn::GPTConfig& c = model.config();
    const Device device = model.wte->weight.device();
    nn::KVCache cache(c, 1, {model.wte->weight.dtype(), device});
    std::vector<int32_t> context(prompt);  // what the model sees, all of it
    std::vector<int32_t> out;
    // Feeds `tokens` (a prompt, a restart, or one new token) and returns the
    // logits of the last position.
    auto feed = [&](const std::vector<int32_t>& tokens) {
        std::vector<int64_t> ids(tokens.begin(), tokens.end());
        const Tensor x = from_vector(ids, {1, int64_t(ids.size())}).to(device);
        const Tensor logits = model.forward(x, cache);
        return logits.select(1, logits.size(1) - 1).select(0, 0).to(Device::cpu()).to_vector<double>();
    };
    auto restart = [&](size_t keep) {  // the last `keep` tokens of the context, anew
        cache.clear();
        return feed(std::vector<int32_t>(context.end() - int64_t(keep), context.end()));
    };
    std::vector<double> logits = restart(std::min<size_t>(context.size(), size_t(c.block_size)));
    for (int64_t t = 0; t < o.tokens; ++t) {
        size_t next;
        if (o.temperature == 0) {
            next = size_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
        } else {
            std::vector<double> w(logits.size());
            double cut = -INFINITY;
            if (o.top_k > 0 && size_t(o.top_k) < logits.size()) {
                std::vector<double> sorted(logits);
                std::nth_element(sorted.begin(), sorted.begin() + (o.top_k - 1), sorted.end(),
                                 std::greater<double>());
                cut = sorted[size_t(o.top_k - 1)];
            }
            const double mx = *std::max_element(logits.begin(), logits.end());
            for (size_t i = 0; i < w.size(); ++i)
                w[i] = logits[i] < cut ? 0 : std::exp((logits[i] - mx) / o.temperature);
            next = draw(w, math::uniform_at<double>(o.seed, 0, t));
        }
        const int32_t token = int32_t(next);
        out.push_back(token);
        context.push_back(token);
        if (on_token) on_token(token);
        if (t + 1 == o.tokens) break;
        logits = cache.length() < c.block_size
                     ? feed({token})
                     : restart(std::max<size_t>(1, size_t(c.block_size) / 2));
    }
    return out;
}

std::string TerminalText::feed(std::string_view piece) {
    pending_.append(piece);
    std::string out;
    size_t pos = 0;
    while (pos < pending_.size()) {
        const unsigned char b = static_cast<unsigned char>(pending_[pos]);
        size_t next = pos;
        char32_t cp;
        if (data::decode_utf8(pending_, next, cp)) {
            if ((cp < 0x20 && cp != '\n' && cp != '\t') || (cp >= 0x7F && cp <= 0x9F)) {
                char buf[16];
                std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02X" : "\\u%04X", unsigned(cp));
                out += buf;
            } else {
                out.append(pending_, pos, next - pos);
            }
            pos = next;
            continue;
        }
        // An unfinished sequence at the end waits for the next piece; a bad
        // byte is shown as its value.
        const size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
        bool unfinished = need > 0 && pending_.size() - pos < need;
        for (size_t i = pos + 1; unfinished && i < pending_.size(); ++i)
            unfinished = (static_cast<unsigned char>(pending_[i]) & 0xC0) == 0x80;
        if (unfinished) break;
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02X", unsigned(b));
        out += buf;
        ++pos;
    }
    pending_.erase(0, pos);
    return out;
}

std::string TerminalText::flush() {
    std::string out;
    for (unsigned char b : pending_) {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02X", unsigned(b));
        out += buf;
    }
    pending_.clear();
    return out;
}

}  // namespace ember::train

// The GPT: attention, blocks, the model, its initialization and KV cache.
#include "nn/transformer.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "autograd/ops.h"
#include "kernels/factories.h"
#include "nn/init.h"

namespace ember::nn {

namespace {

constexpr double kInitStd = 0.02;  // GPT-2's

}  // namespace

// ---- GPTConfig -------------------------------------------------------------------

void GPTConfig::validate() const {
    EMBER_CHECK(vocab_size >= 1 && vocab_size <= (int64_t(1) << 24), "GPT: vocab_size ",
                vocab_size, " is not in [1, 2^24]");
    EMBER_CHECK(block_size >= 1 && block_size <= (int64_t(1) << 20), "GPT: block_size ",
                block_size, " is not in [1, 2^20]");
    EMBER_CHECK(layers >= 1 && layers <= 1024, "GPT: layers ", layers, " is not in [1, 1024]");
    EMBER_CHECK(heads >= 1 && embd >= 1 && embd % heads == 0 && embd <= (int64_t(1) << 16),
                "GPT: embd ", embd, " must be a positive multiple of heads (", heads,
                ") up to 65536");
    EMBER_CHECK(dropout >= 0 && dropout < 1, "GPT: dropout must be in [0, 1), got ", dropout);
}

std::string GPTConfig::to_json() const {
    return nlohmann::json{{"vocab_size", vocab_size}, {"block_size", block_size},
                          {"layers", layers},         {"heads", heads},
                          {"embd", embd},             {"dropout", dropout}}
        .dump();
}

GPTConfig GPTConfig::from_json(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    EMBER_CHECK(!j.is_discarded() && j.is_object(), "GPT: the configuration JSON does not parse");
    GPTConfig c;
    auto integer = [&](const char* key, int64_t& field) {
        EMBER_CHECK(j.contains(key) && j[key].is_number_integer(), "GPT: the configuration's '",
                    key, "' is missing or not an integer");
        field = j[key].get<int64_t>();
    };
    integer("vocab_size", c.vocab_size);
    integer("block_size", c.block_size);
    integer("layers", c.layers);
    integer("heads", c.heads);
    integer("embd", c.embd);
    if (j.contains("dropout")) {
        EMBER_CHECK(j["dropout"].is_number(), "GPT: the configuration's 'dropout' is not a number");
        c.dropout = j["dropout"].get<double>();
    }
    c.validate();
    return c;
}

// ---- KVCache -----------------------------------------------------------------------

KVCache::KVCache(const GPTConfig& c, int64_t batch, TensorOptions options)
    : capacity_(c.block_size) {
    c.validate();
    EMBER_CHECK(batch >= 1, "KVCache: batch must be >= 1, got ", batch);
    for (int64_t i = 0; i < c.layers; ++i) {
        keys_.push_back(empty({batch, c.heads, c.block_size, c.embd / c.heads}, options));
        values_.push_back(empty({batch, c.heads, c.block_size, c.embd / c.heads}, options));
    }
}

// ---- CausalSelfAttention ----------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(int64_t embd, int64_t heads, double dropout)
    : heads_(heads), dropout_(dropout) {
    EMBER_CHECK(heads >= 1 && embd % heads == 0, "CausalSelfAttention: embd ", embd,
                " is not a multiple of heads ", heads);
    qkv = register_module("qkv", Linear(embd, 3 * embd));
    proj = register_module("proj", Linear(embd, embd));
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
    const double p = is_training() ? dropout_ : 0.0;
    const Tensor y = self_attention(qkv->forward(x), heads_, {.causal = true, .dropout_p = p});
    return dropout(proj->forward(y), dropout_, is_training());
}

Tensor CausalSelfAttention::forward(const Tensor& x, KVCache& cache, size_t layer) {
    EMBER_CHECK(x.dim() == 3, "CausalSelfAttention: expected x [B, T, C], got ",
                shape_str(x.shape()));
    const int64_t b = x.size(0), t = x.size(1), c = x.size(2), d = c / heads_;
    const int64_t start = cache.length();
    EMBER_CHECK(start + t <= cache.capacity(), "KV cache: ", start, " cached + ", t,
                " new tokens exceed its ", cache.capacity(), " positions (block_size)");
    EMBER_CHECK(start == 0 || t == 1, "KV cache: after the prompt, one token at a time (got ", t,
                " tokens at position ", start, ")");
    Tensor& keys = cache.keys(layer);
    Tensor& values = cache.values(layer);
    EMBER_CHECK(keys.size(0) == b && keys.device() == x.device(), "KV cache: made for batch ",
                keys.size(0), " on ", keys.device(), ", given ", b, " on ", x.device());
    const Tensor packed = qkv->forward(x).reshape({b, t, 3, heads_, d});
    auto part = [&](int64_t i) { return packed.select(2, i).permute({0, 2, 1, 3}); };
    keys.narrow(2, start, t).copy_(part(1));
    values.narrow(2, start, t).copy_(part(2));
    const Tensor y = scaled_dot_product_attention(part(0), keys.narrow(2, 0, start + t),
                                                  values.narrow(2, 0, start + t),
                                                  {.causal = t > 1});
    return proj->forward(y.transpose(1, 2).reshape({b, t, c}));
}

std::string CausalSelfAttention::describe() const {
    return str("CausalSelfAttention(embd=", proj->weight.size(0), ", heads=", heads_,
               ", dropout=", dropout_, ")");
}

// ---- TransformerBlock -------------------------------------------------------------

TransformerBlock::TransformerBlock(int64_t embd, int64_t heads, double dropout)
    : dropout_(dropout) {
    ln1 = register_module("ln1", LayerNorm({embd}));
    attn = register_module("attn", CausalSelfAttention(embd, heads, dropout));
    ln2 = register_module("ln2", LayerNorm({embd}));
    fc = register_module("fc", Linear(embd, 4 * embd));
    proj = register_module("proj", Linear(4 * embd, embd));
}

Tensor TransformerBlock::mlp(const Tensor& x) {
    return dropout(proj->forward(fc->forward_gelu_tanh(x)), dropout_, is_training());
}

Tensor TransformerBlock::forward(const Tensor& x) {
    const Tensor h = add(x, attn->forward(ln1->forward(x)));
    return add(h, mlp(ln2->forward(h)));
}

Tensor TransformerBlock::forward(const Tensor& x, KVCache& cache, size_t layer) {
    const Tensor h = add(x, attn->forward(ln1->forward(x), cache, layer));
    return add(h, mlp(ln2->forward(h)));
}

// ---- ModuleList --------------------------------------------------------------------

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
    EMBER_CHECK(i < size(), "ModuleList: no child ", i, " (it has ", size(), ")");
    return named_children()[i].second;
}

// ---- GPT ------------------------------------------------------------------------------

GPT::GPT(const GPTConfig& config) : config_(config) {
    config.validate();
    wte = register_module("wte", Embedding(config.vocab_size, config.embd));
    wpe = register_module("wpe", Embedding(config.block_size, config.embd));
    blocks = register_module("blocks", ModuleList());
    for (int64_t i = 0; i < config.layers; ++i)
        blocks->push_back(std::make_shared<TransformerBlock>(config.embd, config.heads, config.dropout));
    ln_f = register_module("ln_f", LayerNorm({config.embd}));
    // GPT-2's initialization; the residual projections scaled down by
    // 1/sqrt(2·layers), so the residual stream's variance does not grow with depth.
    const double residual_std = kInitStd / std::sqrt(2.0 * double(config.layers));
    init::normal_(wte->weight, 0, kInitStd);
    init::normal_(wpe->weight, 0, kInitStd);
    for (size_t i = 0; i < blocks->size(); ++i) {
        TransformerBlock& b = block(i);
        for (const auto& [linear, std] :
             {std::pair{b.attn->qkv, kInitStd}, std::pair{b.attn->proj, residual_std},
              std::pair{b.fc, kInitStd}, std::pair{b.proj, residual_std}}) {
            init::normal_(linear->weight, 0, std);
            init::zeros_(linear->bias);
        }
    }
}

TransformerBlock& GPT::block(size_t i) const {
    return static_cast<TransformerBlock&>(*(*blocks)[i]);
}

Tensor GPT::embed(const Tensor& tokens, int64_t start) {
    EMBER_CHECK(tokens.defined() && tokens.dim() == 2, "GPT: expected tokens [B, T], got ",
                tokens.defined() ? shape_str(tokens.shape()) : std::string("undefined"));
    const int64_t t = tokens.size(1);
    EMBER_CHECK(start + t <= config_.block_size, "GPT: ", start + t,
                " positions exceed block_size ", config_.block_size);
    const Tensor positions =
        arange(double(start), double(start + t), 1.0, {DType::i64, tokens.device()});
    const Tensor h = add(wte->forward(tokens), wpe->forward(positions));
    return dropout(h, config_.dropout, is_training());
}

Tensor GPT::head(const Tensor& h) { return linear(ln_f->forward(h), wte->weight); }

Tensor GPT::forward(const Tensor& tokens) {
    Tensor h = embed(tokens);
    for (size_t i = 0; i < blocks->size(); ++i) h = block(i).forward(h);
    return head(h);
}

Tensor GPT::forward(const Tensor& tokens, KVCache& cache) {
    Tensor h = embed(tokens, cache.length());
    for (size_t i = 0; i < blocks->size(); ++i) h = block(i).forward(h, cache, i);
    cache.advance(tokens.size(1));
    return head(h);
}

std::string GPT::describe() const {
    return str("GPT(vocab=", config_.vocab_size, ", block=", config_.block_size, ", layers=",
               config_.layers, ", heads=", config_.heads, ", embd=", config_.embd, ")");
}

}  // namespace ember::nn

// The gpt recipe: a character-level (or byte-level) GPT on text — Debian's
// fortunes by default, or a file or directory given as --data — scored by
// the validation loss (its perplexity and bits per token reported too); each
// transformer block a checkpoint segment. The tokenizer and the model's
// shape travel in the weights' metadata and in tokenizer.json, so `ember
// generate` needs nothing but the run.
#include <memory>

#include "autograd/checkpoint.h"
#include "data/text.h"
#include "kernels/factories.h"
#include "nn/transformer.h"
#include "train/recipes/recipes.h"

namespace ember::train {

namespace {

// An epoch: this many windows of block + 1 tokens, drawn afresh from the
// whole training text each epoch (docs/train.md, "gpt").
constexpr int64_t kWindowsPerEpoch = 8192;

// --checkpoint-activations: every block its own segment.
Tensor forward(nn::Module& model, const Tensor& tokens, bool checkpoint) {
    if (!checkpoint) return model(tokens);
    auto& gpt = dynamic_cast<nn::GPT&>(model);
    Tensor h = gpt.embed(tokens);
    for (size_t i = 0; i < gpt.blocks->size(); ++i) {
        std::shared_ptr<nn::Module> block = (*gpt.blocks)[i];
        h = autograd::checkpoint(
            [block](const std::vector<Tensor>& in) { return block->forward(in[0]); }, {h});
    }
    return gpt.head(h);
}

Task make_task(const TrainConfig& c) {
    const data::TextCorpus corpus = c.data == "fortunes" ? data::TextCorpus::fortunes(c.data_dir)
                                                         : data::TextCorpus::from_path(c.data);
    const data::Tokenizer tokenizer =
        c.tokenizer == "byte" ? data::Tokenizer::bytes() : corpus.char_tokenizer();
    auto train_tokens = std::make_shared<const std::vector<int32_t>>(
        corpus.encode(tokenizer, data::Split::train));
    auto val_tokens = std::make_shared<const std::vector<int32_t>>(
        corpus.encode(tokenizer, data::Split::validation));
    const nn::GPTConfig shape{.vocab_size = tokenizer.vocab_size(),
                              .block_size = c.block,
                              .layers = c.layers,
                              .heads = c.heads,
                              .embd = c.embd,
                              .dropout = c.dropout};
    shape.validate();
    Task t;
    t.name = "gpt";
    t.train_data = std::make_shared<data::TokenWindows>(train_tokens, c.block, 1,
                                                        "the training text of " + corpus.name());
    // Validation: consecutive windows, so every token is predicted once.
    t.eval_data = std::make_shared<data::TokenWindows>(val_tokens, c.block, c.block,
                                                       "the validation text of " + corpus.name());
    t.samples_per_epoch = c.limit > 0 ? c.limit : kWindowsPerEpoch;
    t.model = std::make_shared<nn::GPT>(shape);
    t.forward = forward;
    t.metric = Metric::loss;
    t.eval_batch_size = 64;
    t.data_name = corpus.name() + " (" + tokenizer.kind_name() + " tokenizer, " +
                  std::to_string(tokenizer.vocab_size()) + " tokens; " +
                  std::to_string(train_tokens->size()) + " training, " +
                  std::to_string(val_tokens->size()) + " validation tokens)";
    t.eval_split = "validation";
    t.sample_noun = "windows";
    t.token_name = tokenizer.kind() == data::Tokenizer::Kind::chars ? "char" : "byte";
    t.metadata = {{"ember.gpt", shape.to_json()},
                  {"ember.tokenizer", tokenizer.to_json()},
                  {"ember.data", c.data}};
    t.files = {{"tokenizer.json", tokenizer.to_json() + "\n"}};
    return t;
}

// The shape, tokenizer and data a gpt's weights record.
void from_metadata(TrainConfig& c, const std::map<std::string, std::string>& meta) {
    const auto shape = meta.find("ember.gpt"), tok = meta.find("ember.tokenizer"),
               data = meta.find("ember.data");
    EMBER_CHECK(shape != meta.end() && tok != meta.end(),
                "the weights do not record a gpt's shape and tokenizer");
    const nn::GPTConfig g = nn::GPTConfig::from_json(shape->second);
    c.layers = g.layers;
    c.heads = g.heads;
    c.embd = g.embd;
    c.block = g.block_size;
    c.tokenizer = data::Tokenizer::from_json(tok->second).kind_name();
    if (data != meta.end()) c.data = data->second;
}

data::Batch random_tokens(const Task& task, const TrainConfig& c, int64_t n, Device device) {
    const int64_t vocab = dynamic_cast<const nn::GPT&>(*task.model).config().vocab_size;
    data::Batch b;
    b.input = randint(0, vocab, {n, c.block}, {DType::i64, device});
    b.target = randint(0, vocab, {n, c.block}, {DType::i64, device});
    return b;
}

}  // namespace

Recipe gpt_recipe() {
    Recipe r;
    r.name = "gpt";
    r.summary = "a GPT (4 blocks of 4 heads, width 128, context 256) on text: Debian's "
                "fortunes, character-level";
    r.defaults.model = "gpt";
    r.defaults.data = "fortunes";
    r.defaults.epochs = 5;
    r.defaults.batch_size = 16;
    r.defaults.clip_grad = 1.0;
    r.defaults.log_every = 64;
    r.adamw_lr = 3e-3;
    r.datasets = {"fortunes"};
    r.data_paths = true;
    r.make_task = make_task;
    r.from_metadata = from_metadata;
    r.example_batch = random_tokens;
    return r;
}

}  // namespace ember::train

// The transformer reference model: a GPT (decoder-only, GPT-2's layout) —
// token and position embeddings, pre-LayerNorm blocks of causal
// self-attention and a 4× GELU(tanh) MLP, a final LayerNorm and a language-
// model head tied to the token embedding — with GPT-2's initialization and a
// KV cache for generation. docs/nn.md, "GPT".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers.h"

namespace ember::nn {

/// The shape of a GPT.
struct GPTConfig {
    int64_t vocab_size = 0;
    int64_t block_size = 128;  ///< the longest context (position embeddings)
    int64_t layers = 4;
    int64_t heads = 4;
    int64_t embd = 128;  ///< model width; a multiple of heads
    /// Dropout of the attention probabilities, after each residual branch and
    /// after the embeddings (training only).
    double dropout = 0;

    /// Throws naming the field when a size is out of range.
    void validate() const;
    /// {"vocab_size": ..., "block_size": ..., ...}: what the weights' metadata keeps.
    std::string to_json() const;
    static GPTConfig from_json(const std::string& json);
};

/// Keys and values of every layer for the tokens seen so far, so that each
/// new token costs one query row against the cache (O(T)) instead of a
/// forward over the whole context (O(T²)). Holds [B, H, block_size, D] per
/// layer for keys and for values.
class KVCache {
public:
    KVCache(const GPTConfig& config, int64_t batch, TensorOptions options);
    /// Tokens cached (the position of the next one).
    int64_t length() const { return length_; }
    /// Forget every token.
    void clear() { length_ = 0; }
    int64_t capacity() const { return capacity_; }

    /// Layer i's keys and values (the whole buffers).
    Tensor& keys(size_t i) { return keys_[i]; }
    Tensor& values(size_t i) { return values_[i]; }
    /// Marks `n` more tokens cached (GPT::forward does, after every layer wrote them).
    void advance(int64_t n) { length_ += n; }

private:
    std::vector<Tensor> keys_, values_;
    int64_t length_ = 0, capacity_ = 0;
};

/// Causal self-attention: one fused q/k/v projection (embd → 3·embd), the
/// heads attending (ember::self_attention), the output projection, and
/// dropout of the probabilities and of the result.
class CausalSelfAttention : public Module {
public:
    CausalSelfAttention(int64_t embd, int64_t heads, double dropout);
    Tensor forward(const Tensor& x) override;
    /// With a cache: x holds the tokens at positions cache.length() onward;
    /// their keys and values are written into layer `layer` of the cache. A
    /// prompt fills an empty cache; after that one token at a time.
    Tensor forward(const Tensor& x, KVCache& cache, size_t layer);
    std::string type_name() const override { return "CausalSelfAttention"; }
    std::string describe() const override;
    std::shared_ptr<Linear> qkv, proj;

private:
    int64_t heads_;
    double dropout_;
};

/// x + attn(ln1(x)), then + mlp(ln2(x)) with mlp = proj(gelu_tanh(fc(·)))
/// (fc and the GELU one fused op), 4× wide.
class TransformerBlock : public Module {
public:
    TransformerBlock(int64_t embd, int64_t heads, double dropout);
    Tensor forward(const Tensor& x) override;
    Tensor forward(const Tensor& x, KVCache& cache, size_t layer);
    std::string type_name() const override { return "TransformerBlock"; }
    std::shared_ptr<LayerNorm> ln1, ln2;
    std::shared_ptr<CausalSelfAttention> attn;
    std::shared_ptr<Linear> fc, proj;

private:
    Tensor mlp(const Tensor& x);
    double dropout_;
};

/// Children named "0", "1", ... that the owner runs itself (a GPT's blocks).
class ModuleList : public Module {
public:
    template <class M>
    std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
        return register_module(std::to_string(named_children().size()), std::move(m));
    }
    size_t size() const { return named_children().size(); }
    std::shared_ptr<Module> operator[](size_t i) const;
    std::string type_name() const override { return "ModuleList"; }
};

/// tokens [B, T] (i64, T <= block_size) → logits [B, T, vocab_size]. GPT-2's
/// initialization: every Linear weight and both embeddings N(0, 0.02), the
/// residual projections (attn.proj, proj) N(0, 0.02 / sqrt(2·layers)),
/// biases 0, LayerNorms 1 and 0. Parameter names: wte.weight, wpe.weight,
/// blocks.<i>.{ln1,attn.qkv,attn.proj,ln2,fc,proj}.{weight,bias},
/// ln_f.{weight,bias}; the head is wte.weight (tied, not a parameter of its own).
class GPT : public Module {
public:
    explicit GPT(const GPTConfig& config);
    Tensor forward(const Tensor& tokens) override;
    /// The tokens at positions cache.length() onward (all of a prompt into
    /// an empty cache, then one at a time), their keys and values cached:
    /// the logits equal those of a forward over the whole sequence.
    Tensor forward(const Tensor& tokens, KVCache& cache);
    std::string type_name() const override { return "GPT"; }
    std::string describe() const override;
    const GPTConfig& config() const { return config_; }

    /// The pieces of forward, for checkpointing each block
    /// (train/recipes/gpt.cpp): the embeddings of tokens at positions
    /// start..start+T-1 (with dropout), and the final norm and the head.
    Tensor embed(const Tensor& tokens, int64_t start = 0);
    Tensor head(const Tensor& h);
    std::shared_ptr<Embedding> wte, wpe;
    std::shared_ptr<ModuleList> blocks;
    std::shared_ptr<LayerNorm> ln_f;
    TransformerBlock& block(size_t i) const;

private:
    GPTConfig config_;
};

}  // namespace ember::nn

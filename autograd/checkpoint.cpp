// checkpoint: a node whose backward re-runs its segment with the RNG state of
// the forward, then runs a nested backward through the recomputed graph.
#include "autograd/checkpoint.h"

#include "autograd/graph.h"
#include "core/generator.h"

namespace ember::autograd {

namespace {

thread_local bool t_recomputing = false;

// Marks the recompute of a segment for its scope (is_recomputing()).
class RecomputeScope {
public:
    RecomputeScope() : prev_(t_recomputing) { t_recomputing = true; }
    ~RecomputeScope() { t_recomputing = prev_; }
    RecomputeScope(const RecomputeScope&) = delete;
    RecomputeScope& operator=(const RecomputeScope&) = delete;

private:
    bool prev_;
};

// Puts the default generator at `state` for its scope, then back.
class RngScope {
public:
    explicit RngScope(const GeneratorState& state) : saved_(default_generator().state()) {
        default_generator().set_state(state);
    }
    ~RngScope() { default_generator().set_state(saved_); }
    RngScope(const RngScope&) = delete;
    RngScope& operator=(const RngScope&) = delete;

private:
    GeneratorState saved_;
};

}  // namespace

TensorList checkpoint(const std::function<TensorList(const TensorList&)>& fn,
                      const TensorList& inputs) {
    if (!GradMode::is_enabled()) return fn(inputs);
    const GeneratorState rng = default_generator().state();
    TensorList outputs;
    {
        NoGradGuard no_grad;
        outputs = fn(inputs);
    }
    for (Tensor& out : outputs) {
        EMBER_CHECK(out.defined() && is_floating(out.dtype()),
                    "checkpoint: the segment's outputs must be floating tensors");
        // A segment may return its input itself (contiguous(), Identity, ...):
        // record a new handle, never the input's own history.
        out = out.detach();
    }

    // Always a node, even when no input requires grad: parameters inside the
    // segment may, and only the recompute can reach them.
    auto node = std::make_shared<Node>();
    node->name = "checkpoint";
    node->sequence_nr = next_sequence_nr();
    TensorList saved;
    std::vector<bool> needs;
    for (const Tensor& x : inputs) {
        const bool need = x.defined() && x.requires_grad();
        node->next.push_back(need ? gradient_edge(x) : Edge{});
        node->inputs.push_back(x.defined() ? TensorGeometry::of(x) : TensorGeometry{});
        saved.push_back(node->save(x));
        needs.push_back(need);
    }
    node->backward = [fn, saved, needs, rng](const TensorList& grads) {
        TensorList again(saved.size());
        for (size_t i = 0; i < saved.size(); ++i) {
            again[i] = saved[i].defined() ? saved[i].detach() : Tensor();
            if (needs[i]) again[i].set_requires_grad(true);
        }
        TensorList outs;
        {
            RngScope same_randomness(rng);
            RecomputeScope recompute;
            EnableGradGuard grad;
            outs = fn(again);
        }
        TensorList roots, seeds;
        for (size_t o = 0; o < outs.size(); ++o)
            if (outs[o].requires_grad()) {
                roots.push_back(outs[o]);
                seeds.push_back(grads[o]);
            }
        if (!roots.empty()) backward(roots, seeds);
        TensorList result(saved.size());
        for (size_t i = 0; i < saved.size(); ++i)
            if (needs[i]) result[i] = again[i].grad();
        return result;
    };
    set_history(node, outputs);
    return outputs;
}

bool is_recomputing() { return t_recomputing; }

Tensor checkpoint(const std::function<Tensor(const TensorList&)>& fn, const TensorList& inputs) {
    // The node outlives this call: it keeps its own copy of fn.
    auto wrapped = [fn](const TensorList& xs) { return TensorList{fn(xs)}; };
    return checkpoint(wrapped, inputs)[0];
}

}  // namespace ember::autograd

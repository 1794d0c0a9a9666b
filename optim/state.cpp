// An optimizer's state in and out: named tensors for the buffers, a small JSON
// for everything else (name, steps, step calls, each parameter's step — read
// back from the device counts, a sync on CUDA —, the groups'
// hyper-parameters), and one safetensors file holding both. Loading checks
// everything against the optimizer before it changes anything.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/copy.h"
#include "kernels/factories.h"
#include "kernels/front.h"
#include "nn/safetensors.h"
#include "optim/optimizer.h"

namespace ember::optim {

namespace {

using nlohmann::json;

constexpr const char* kMetadataKey = "ember.optimizer";

std::string buffer_key(size_t group, size_t param, const char* buffer) {
    return str("g", group, ".p", param, ".", buffer);
}

// A finite number in [lo, hi] (or a bool) named `key` of object `o`.
double number(const json& o, const char* key, double lo, double hi) {
    EMBER_CHECK(o.contains(key) && o[key].is_number(), "optimizer state: '", key,
                "' is missing or not a number");
    const double v = o[key].get<double>();
    EMBER_CHECK(std::isfinite(v) && v >= lo && v <= hi, "optimizer state: '", key, "' = ", v,
                " is outside [", lo, ", ", hi, "]");
    return v;
}
bool boolean(const json& o, const char* key) {
    EMBER_CHECK(o.contains(key) && o[key].is_boolean(), "optimizer state: '", key,
                "' is missing or not true/false");
    return o[key].get<bool>();
}

// Each hyper-parameter of a rule's struct by its name in the file, to `f`:
// f(key, number, lo, hi) or f(key, flag).
template <class F>
void each_field(kernels::AdamArgs& h, F&& f) {
    f("lr", h.lr, 0, 1e9);
    f("beta1", h.beta1, 0, 1);
    f("beta2", h.beta2, 0, 1);
    f("eps", h.eps, 0, 1);
    f("weight_decay", h.weight_decay, 0, 1e9);
    f("amsgrad", h.amsgrad);
}
template <class F>
void each_field(kernels::SgdArgs& h, F&& f) {
    f("lr", h.lr, 0, 1e9);
    f("momentum", h.momentum, 0, 1);
    f("dampening", h.dampening, 0, 1);
    f("weight_decay", h.weight_decay, 0, 1e9);
    f("nesterov", h.nesterov);
}
template <class F>
void each_field(kernels::LambArgs& h, F&& f) {
    f("lr", h.lr, 0, 1e9);
    f("beta1", h.beta1, 0, 1);
    f("beta2", h.beta2, 0, 1);
    f("eps", h.eps, 0, 1);
    f("weight_decay", h.weight_decay, 0, 1e9);
}
template <class F>
void each_field(kernels::LarsArgs& h, F&& f) {
    f("lr", h.lr, 0, 1e9);
    f("momentum", h.momentum, 0, 1);
    f("weight_decay", h.weight_decay, 0, 1e9);
    f("trust_coefficient", h.trust_coefficient, 0, 1e9);
    f("eps", h.eps, 0, 1);
    f("exclude_from_lars", h.exclude);
}

json hyper_json(Hyper h) {
    json out = json::object();
    struct Write {
        json& out;
        void operator()(const char* key, double v, double, double) const { out[key] = v; }
        void operator()(const char* key, bool v) const { out[key] = v; }
    };
    std::visit([&](auto& a) { each_field(a, Write{out}); }, h);
    return out;
}

// The fields of `like`'s optimizer from `o`, each checked.
Hyper parse_hyper(const json& o, Hyper like) {
    EMBER_CHECK(o.is_object(), "optimizer state: a group's 'hyper' must be an object");
    struct Read {
        const json& o;
        void operator()(const char* key, double& v, double lo, double hi) const {
            v = number(o, key, lo, hi);
        }
        void operator()(const char* key, bool& v) const {
            // amsgrad is absent in files saved before it existed: off.
            v = std::strcmp(key, "amsgrad") == 0 && !o.contains(key) ? false : boolean(o, key);
        }
    };
    std::visit([&](auto& a) { each_field(a, Read{o}); }, like);
    return like;
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> Optimizer::state_tensors() const {
    std::vector<std::pair<std::string, Tensor>> out;
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
        // Buffers of parameters that never took a step (made at a skipped
        // first step: zeros) are not state.
        const std::vector<int64_t> counts = param_steps(gi);
        for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
            if (counts[i] == 0) continue;
            const State& s = state_[gi][i];
            for (int k = 0; k < buffers(groups_[gi].hyper); ++k)
                if (s.buffers[k].defined())
                    out.emplace_back(buffer_key(gi, i, buffer_name(k)), s.buffers[k]);
        }
    }
    return out;
}

std::string Optimizer::state_json() const {
    json groups = json::array();
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
        json steps = json::array(), shapes = json::array();
        const std::vector<int64_t> counts = param_steps(gi);
        for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
            steps.push_back(counts[i]);
            shapes.push_back(groups_[gi].params[i].shape());
        }
        // The values in effect: a schedule table's at this step, where there is one.
        Hyper h = groups_[gi].hyper;
        lr_of(h) = lr(gi);
        momentum_of(h) = momentum(gi);
        groups.push_back({{"hyper", hyper_json(h)},
                          {"param_steps", steps},
                          {"shapes", shapes}});
    }
    return json{{"optimizer", name()},
                {"steps", steps()},
                {"step_calls", calls_},
                {"stochastic_rounding", stochastic_},
                {"seed", seed_},
                {"groups", groups}}
        .dump();
}

void Optimizer::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                           const std::string& text) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        EMBER_FAIL("optimizer state: the JSON does not parse: ", e.what());
    }
    EMBER_CHECK(j.is_object() && j.contains("optimizer") && j["optimizer"].is_string(),
                "optimizer state: not an optimizer's state (no 'optimizer' name)");
    EMBER_CHECK(j["optimizer"].get<std::string>() == name(), "optimizer state: saved by ",
                j["optimizer"].get<std::string>(), ", cannot be loaded into ", name());
    const int64_t steps = int64_t(number(j, "steps", 0, 9e15));
    // Absent in states saved before skipped steps were counted on the device.
    const int64_t calls =
        j.contains("step_calls") ? int64_t(number(j, "step_calls", 0, 9e15)) : steps;
    EMBER_CHECK(calls >= steps, "optimizer state: 'step_calls' = ", calls,
                " is below 'steps' = ", steps);
    const bool stochastic = boolean(j, "stochastic_rounding");
    EMBER_CHECK(j.contains("seed") && j["seed"].is_number_unsigned(),
                "optimizer state: 'seed' is missing or not an unsigned integer");
    const uint64_t seed = j["seed"].get<uint64_t>();
    EMBER_CHECK(
        j.contains("groups") && j["groups"].is_array() && j["groups"].size() == groups_.size(),
        "optimizer state: expected ", groups_.size(), " groups");

    std::map<std::string, const Tensor*> by_name;
    for (const auto& [key, t] : tensors) {
        EMBER_CHECK(by_name.emplace(key, &t).second, "optimizer state: tensor '", key,
                    "' appears twice");
    }
    std::vector<Hyper> hypers;
    std::vector<std::vector<State>> state(groups_.size());
    std::vector<Tensor> counts(groups_.size());
    size_t used = 0;
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
        const json& g = j["groups"][gi];
        EMBER_CHECK(g.is_object() && g.contains("hyper") && g.contains("param_steps") &&
                        g["param_steps"].is_array(),
                    "optimizer state: group ", gi, " lacks 'hyper' or 'param_steps'");
        hypers.push_back(parse_hyper(g["hyper"], groups_[gi].hyper));
        const std::vector<Tensor>& params = groups_[gi].params;
        EMBER_CHECK(g["param_steps"].size() == params.size(), "optimizer state: group ", gi,
                    " has ", g["param_steps"].size(), " parameters saved but ", params.size(),
                    " here");
        const int nbuf = buffers(hypers.back());
        std::vector<int64_t> group_steps;
        for (size_t i = 0; i < params.size(); ++i) {
            const json& st = g["param_steps"][i];
            EMBER_CHECK(st.is_number_integer() && st.get<int64_t>() >= 0 &&
                            st.get<int64_t>() <= steps,
                        "optimizer state: group ", gi, " parameter ", i, " has a bad step count");
            State s;
            group_steps.push_back(st.get<int64_t>());
            for (int k = 0; k < nbuf && group_steps.back() > 0; ++k) {
                const std::string key = buffer_key(gi, i, buffer_name(k));
                const auto it = by_name.find(key);
                EMBER_CHECK(it != by_name.end(), "optimizer state: tensor '", key, "' is missing");
                const Tensor& t = *it->second;
                const Tensor& p = params[i];
                EMBER_CHECK(t.shape() == p.shape() && is_floating(t.dtype()),
                            "optimizer state: '", key, "' is ", kernels::describe(t),
                            ", expected the shape of parameter ", kernels::describe(p));
                // Its own copy, in the state's dtype, on the parameter's device.
                Tensor b = empty(p.shape(), {kernels::acc_dtype(p.dtype()), p.device(), false});
                kernels::copy(b, t);
                s.buffers[k] = b;
                ++used;
            }
            state[gi].push_back(std::move(s));
        }
        // Both slots of each count hold it (phase 0 reads the first), on the
        // group's device; step() moves them to where the parameters are.
        std::vector<int64_t> both;
        for (int64_t c : group_steps) both.insert(both.end(), {c, c});
        if (!params.empty())
            counts[gi] = from_vector<int64_t>(both, {int64_t(both.size())}).to(params[0].device());
    }
    EMBER_CHECK(used == tensors.size(), "optimizer state: ", tensors.size() - used,
                " tensor(s) do not belong to any parameter with a step");
    // Every check passed: commit.
    for (size_t gi = 0; gi < groups_.size(); ++gi) groups_[gi].hyper = hypers[gi];
    state_ = std::move(state);
    counts_ = std::move(counts);
    for (auto& p : phase_) std::fill(p.begin(), p.end(), uint8_t(0));
    calls_ = calls;
    skipped_ = calls - steps;
    skipped_flags_ = Tensor();
    stochastic_ = stochastic;
    seed_ = seed;
}

void Optimizer::save(const std::string& path) const {
    nn::save_safetensors(path, state_tensors(), {{kMetadataKey, state_json()}});
}

void Optimizer::load(const std::string& path) {
    const nn::TensorFile file = nn::load_safetensors(path);
    const auto it = file.metadata.find(kMetadataKey);
    EMBER_CHECK(it != file.metadata.end(), "loading '", path, "': no '", kMetadataKey,
                "' metadata: not an optimizer state file");
    try {
        load_state(file.tensors, it->second);
    } catch (const Error& e) {
        EMBER_FAIL("loading '", path, "': ", e.what());
    }
}

}  // namespace ember::optim

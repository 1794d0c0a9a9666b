// The optimizer base: groups, lazily made state that follows its parameter's
// device and dtype, step() as one fused update per group (each parameter's
// step count in a device tensor the kernels advance; step_unless with the
// loss scaler's flag; a schedule's tables), zero_grad, and the
// parameter-group helpers.
#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "autograd/grad_mode.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/front.h"
#include "kernels/optim.h"
#include "kernels/profile.h"
#include "nn/module.h"

namespace ember::optim {

double& lr_of(Hyper& h) {
    return std::visit([](auto& a) -> double& { return a.lr; }, h);
}

double& weight_decay_of(Hyper& h) {
    return std::visit([](auto& a) -> double& { return a.weight_decay; }, h);
}

double& momentum_of(Hyper& h) {
    return std::visit(
        [](auto& a) -> double& {
            if constexpr (requires { a.beta1; })
                return a.beta1;
            else
                return a.momentum;
        },
        h);
}

double lr_of(const Hyper& h) { return lr_of(const_cast<Hyper&>(h)); }
double weight_decay_of(const Hyper& h) { return weight_decay_of(const_cast<Hyper&>(h)); }
double momentum_of(const Hyper& h) { return momentum_of(const_cast<Hyper&>(h)); }

const char* momentum_name(const Hyper& h) {
    return std::visit([](const auto& a) { return requires { a.beta1; } ? "beta1" : "momentum"; },
                      h);
}

Optimizer::Optimizer(std::vector<GroupSpec> specs, const Hyper& defaults) {
    for (GroupSpec& s : specs) {
        ParamGroup g{std::move(s.params), defaults, std::move(s.model)};
        if (s.lr) lr_of(g.hyper) = *s.lr;
        if (s.weight_decay) weight_decay_of(g.hyper) = *s.weight_decay;
        groups_.push_back(std::move(g));
    }
    check_groups();
    for (const ParamGroup& g : groups_) {
        state_.emplace_back(g.params.size());
        phase_.emplace_back(g.params.size(), 0);
    }
    counts_.resize(groups_.size());
    count_slots_.resize(groups_.size());
    slots_of_.resize(groups_.size());
    tables_.resize(groups_.size());
}

void Optimizer::check_groups() const {
    std::set<const void*> seen;
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
        const ParamGroup& g = groups_[gi];
        EMBER_CHECK(g.model.empty() || g.model.size() == g.params.size(), "optimizer: group ", gi,
                    " has ", g.params.size(), " parameters but ", g.model.size(), " model tensors");
        EMBER_CHECK(lr_of(g.hyper) >= 0 && weight_decay_of(g.hyper) >= 0, "optimizer: group ", gi,
                    " needs lr >= 0 and weight_decay >= 0, got ", lr_of(g.hyper), " and ",
                    weight_decay_of(g.hyper));
        for (size_t i = 0; i < g.params.size(); ++i) {
            const Tensor& p = g.params[i];
            EMBER_CHECK(p.defined() && is_floating(p.dtype()), "optimizer: parameter ", i,
                        " of group ", gi, " must be a floating tensor, got ", kernels::describe(p));
            EMBER_CHECK(seen.insert(p.unsafe_impl()).second, "optimizer: parameter ", i,
                        " of group ", gi, " (", kernels::describe(p),
                        ") appears twice; give each parameter to one group once");
            if (!g.model.empty())
                EMBER_CHECK(g.model[i].defined() && g.model[i].shape() == p.shape(),
                            "optimizer: model tensor ", i, " of group ", gi, " ",
                            kernels::describe(g.model[i]), " does not match its master ",
                            kernels::describe(p));
        }
    }
}

bool Optimizer::step() {
    run_step(Tensor());
    return true;
}

void Optimizer::step_unless(const Tensor& found_inf) {
    EMBER_CHECK(found_inf.defined() && found_inf.numel() == 1 && found_inf.dtype() == DType::f32,
                name(), "::step_unless: found_inf must be a one-element f32 tensor, got ",
                found_inf.defined() ? kernels::describe(found_inf) : std::string("undefined"));
    run_step(found_inf);
}

void Optimizer::run_step(const Tensor& found_inf) {
    NoGradGuard no_grad;
    const kernels::ProfileRange range("optimizer", name(), "optimizer.step: ");
    for (size_t gi = 0; gi < groups_.size(); ++gi) {
        const ParamGroup& g = groups_[gi];
        const int nbuf = buffers(g.hyper);
        kernels::UpdateTensors fused;  // one fused call's tensors (kernels/optim.h)
        fused.found_inf = found_inf;
        fused.stochastic_copy = stochastic_;
        fused.seed = seed_;
        fused.step = uint64_t(calls_);  // this call's Philox stream
        Tensor& counts = counts_[gi];
        std::vector<size_t> included;
        for (size_t i = 0; i < g.params.size(); ++i) {
            const Tensor& p = g.params[i];
            const Tensor grad = g.model.empty() ? p.grad() : g.model[i].grad();
            if (!grad.defined()) continue;
            State& st = state_[gi][i];
            // State follows its parameter (Module::to moves parameters, not state).
            const TensorOptions like{kernels::acc_dtype(p.dtype()), p.device(), false};
            for (int k = 0; k < nbuf; ++k) {
                Tensor& b = st.buffers[k];
                if (!b.defined())
                    b = zeros(p.shape(), like);
                else if (b.device() != p.device() || b.dtype() != like.dtype)
                    b = b.to(p.device()).to(like.dtype);
            }
            if (!counts.defined())
                counts = zeros({2 * int64_t(g.params.size())}, {DType::i64, p.device()});
            else if (counts.device() != p.device())
                counts = counts.to(p.device());
            fused.params.push_back(p);
            fused.grads.push_back(kernels::contiguous(grad));
            std::vector<Tensor>* lists[] = {&fused.state1, &fused.state2, &fused.state3};
            for (int k = 0; k < nbuf; ++k) lists[k]->push_back(st.buffers[k]);
            if (!g.model.empty()) fused.copies.push_back(g.model[i]);
            included.push_back(i);
        }
        if (fused.params.empty()) continue;
        std::vector<Tensor>& slots = count_slots_[gi];
        if (!slots_of_[gi].defined() || slots_of_[gi].data_ptr() != counts.data_ptr()) {
            slots.clear();
            for (int64_t k = 0; k < counts.numel(); ++k) slots.push_back(counts.narrow(0, k, 1));
            slots_of_[gi] = counts;
        }
        for (size_t i : included) {
            const size_t at = 2 * i + phase_[gi][i];
            fused.steps.push_back(slots[at]);
            fused.next_steps.push_back(slots[at ^ 1]);
        }
        Tables& tb = tables_[gi];
        if (!tb.lr.empty()) {  // copied to the parameters' device once
            const Device d = fused.params[0].device();
            const int64_t n = int64_t(tb.lr.size());
            if (!tb.lr_on.defined() || tb.lr_on.device() != d)
                tb.lr_on = from_vector<double>(tb.lr, {n}).to(d);
            if (!tb.momentum.empty() && (!tb.momentum_on.defined() || tb.momentum_on.device() != d))
                tb.momentum_on = from_vector<double>(tb.momentum, {n}).to(d);
            fused.lr_table = tb.lr_on;
            fused.momentum_table = tb.momentum.empty() ? Tensor() : tb.momentum_on;
        }
        update(g.hyper, fused);
        // The kernels wrote every included count's other slot, applied or not.
        for (size_t i : included) phase_[gi][i] ^= 1;
    }
    ++calls_;
    if (found_inf.defined()) {  // the count of skipped steps, on the flag's device
        if (!skipped_flags_.defined())
            skipped_flags_ = zeros({1}, {DType::f32, found_inf.device()});
        else if (skipped_flags_.device() != found_inf.device())
            skipped_flags_ = skipped_flags_.to(found_inf.device());
        kernels::add_(skipped_flags_, found_inf.reshape({1}));
    }
}

int64_t Optimizer::steps() const {
    const int64_t flagged = skipped_flags_.defined() ? int64_t(skipped_flags_.item()) : 0;
    return calls_ - skipped_ - flagged;
}

std::vector<int64_t> Optimizer::param_steps(size_t group) const {
    const Tensor& c = counts_[group];
    const size_t n = groups_[group].params.size();
    if (!c.defined()) return std::vector<int64_t>(n, 0);
    const std::vector<int64_t> both = c.to(Device::cpu()).to_vector<int64_t>();
    std::vector<int64_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = both[2 * i + phase_[group][i]];
    return out;
}

std::vector<Tensor> Optimizer::gradients() const {
    std::vector<Tensor> out;
    for (const ParamGroup& g : groups_)
        for (const Tensor& t : g.model.empty() ? g.params : g.model)
            if (Tensor grad = t.grad(); grad.defined()) out.push_back(grad);
    return out;
}

void Optimizer::zero_grad(bool set_to_none) {
    NoGradGuard no_grad;
    for (const ParamGroup& g : groups_)
        for (const Tensor& t : g.model.empty() ? g.params : g.model) {
            if (set_to_none || !t.grad().defined())
                t.set_grad({});
            else
                t.grad().fill_(0);
        }
}

void Optimizer::check_group(size_t group) const {
    EMBER_CHECK(group < groups_.size(), name(), ": no group ", group, " (", groups_.size(),
                " groups)");
}

double Optimizer::table_now(const std::vector<double>& values) const {
    const int64_t t = steps();
    return values[size_t(std::min<int64_t>(t, int64_t(values.size()) - 1))];
}

double Optimizer::lr(size_t group) const {
    check_group(group);
    const Tables& tb = tables_[group];
    return tb.lr.empty() ? lr_of(groups_[group].hyper) : table_now(tb.lr);
}

void Optimizer::set_lr(size_t group, double lr) {
    check_group(group);
    EMBER_CHECK(tables_[group].lr.empty(), name(), ": group ", group,
                " takes its LR from a schedule's table (set_schedule_tables); "
                "clear_schedule_tables() first to set it by hand");
    EMBER_CHECK(lr >= 0, name(), ": learning rate must be >= 0, got ", lr);
    lr_of(groups_[group].hyper) = lr;
}

double Optimizer::momentum(size_t group) const {
    check_group(group);
    const Tables& tb = tables_[group];
    return tb.momentum.empty() ? momentum_of(groups_[group].hyper) : table_now(tb.momentum);
}

void Optimizer::set_momentum(size_t group, double momentum) {
    check_group(group);
    const char* what = momentum_name(groups_[group].hyper);
    EMBER_CHECK(tables_[group].momentum.empty(), name(), ": group ", group, " takes its ", what,
                " from a schedule's table (set_schedule_tables); clear_schedule_tables() first");
    EMBER_CHECK(momentum >= 0 && momentum < 1, name(), ": ", what, " must be in [0, 1), got ",
                momentum);
    momentum_of(groups_[group].hyper) = momentum;
}

void Optimizer::set_schedule_tables(size_t group, std::vector<double> lr,
                                    std::vector<double> momentum) {
    check_group(group);
    EMBER_CHECK(!lr.empty() && (momentum.empty() || momentum.size() == lr.size()), name(),
                ": schedule tables need an LR table of >= 1 entries and a momentum table of "
                "the same size or none; got ", lr.size(), " and ", momentum.size());
    for (size_t t = 0; t < lr.size(); ++t) {
        EMBER_CHECK(std::isfinite(lr[t]) && lr[t] >= 0, name(), ": LR table entry ", t,
                    " must be finite and >= 0, got ", lr[t]);
        if (!momentum.empty())
            EMBER_CHECK(momentum[t] >= 0 && momentum[t] < 1, name(), ": momentum table entry ",
                        t, " must be in [0, 1), got ", momentum[t]);
    }
    tables_[group] = Tables{std::move(lr), std::move(momentum), Tensor(), Tensor()};
}

void Optimizer::clear_schedule_tables() {
    for (Tables& tb : tables_) tb = Tables{};
}

bool Optimizer::has_schedule_tables(size_t group) const {
    check_group(group);
    return !tables_[group].lr.empty();
}

void Optimizer::set_stochastic_rounding(bool on, uint64_t seed) {
    stochastic_ = on;
    seed_ = seed;
}

std::vector<GroupSpec> decay_groups(const nn::Module& m, double weight_decay) {
    GroupSpec decay{{}, std::nullopt, weight_decay, {}}, none{{}, std::nullopt, 0.0, {}};
    for (const Tensor& p : m.parameters())
        if (p.requires_grad()) (p.dim() >= 2 ? decay : none).params.push_back(p);
    std::vector<GroupSpec> out;
    for (GroupSpec* g : {&decay, &none})
        if (!g->params.empty()) out.push_back(std::move(*g));
    return out;
}

std::vector<GroupSpec> master_weights(nn::Module& m, DType low, std::vector<GroupSpec> groups) {
    EMBER_CHECK(low == DType::f16 || low == DType::bf16,
                "master_weights: the model's dtype must be f16 or bf16, got ", dtype_name(low));
    if (groups.empty()) {
        GroupSpec all;
        for (const Tensor& p : m.parameters())
            if (p.requires_grad()) all.params.push_back(p);
        groups.push_back(std::move(all));
    }
    std::vector<std::vector<Tensor>> masters;
    for (const GroupSpec& g : groups) {
        EMBER_CHECK(g.model.empty(), "master_weights: a group already has model tensors");
        std::vector<Tensor> copies;
        for (const Tensor& p : g.params) {
            EMBER_CHECK(p.defined() && p.dtype() == DType::f32, "master_weights: parameter ",
                        kernels::describe(p), " must be f32");
            copies.push_back(kernels::clone(p));
        }
        masters.push_back(std::move(copies));
    }
    m.to(low);  // the handles in `groups` follow: Module::to keeps tensor identity
    for (size_t gi = 0; gi < groups.size(); ++gi) {
        groups[gi].model = std::move(groups[gi].params);
        groups[gi].params = std::move(masters[gi]);
    }
    return groups;
}

}  // namespace ember::optim

// The schedule base (stepping only on applied steps, writing every group,
// the state as JSON), and the simple schedules: Constant, StepLR and the
// Warmup that goes in front of any other. The cyclic ones live in
// schedule_cyclic.cpp.
#include "optim/schedule.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace ember::optim {

// Note [Closed forms]
// PyTorch's schedulers have two forms: a "chainable" one that multiplies the
// group's current LR (StepLR: lr *= gamma every step_size steps; ConstantLR
// and LinearLR: ratios of consecutive factors), and a closed form of
// last_epoch. They agree while nothing else touches the LR, and drift apart
// when something does (a set_lr, another schedule, rounding over many
// steps). ember uses the closed forms only: the LR after t applied steps is a
// function of t and of the base LRs read at construction, so a resumed run or
// a skipped step can never shift it, and lr_at(t) is the schedule to plot.
// CosineWarmRestarts' recursion (T_cur += 1, restart at T_i) is exact for
// whole steps and equals its closed form.

using nlohmann::json;

Schedule::Schedule(Optimizer& opt) : opt_(opt) {
    for (size_t g = 0; g < opt.groups().size(); ++g) {
        base_lrs_.push_back(opt.lr(g));
        base_momenta_.push_back(opt.momentum(g));
    }
    EMBER_CHECK(!base_lrs_.empty(), "schedule: the optimizer ", opt.name(), " has no groups");
}

std::optional<double> Schedule::momentum_at(int64_t t, size_t group) const {
    check_args(t, group);
    return std::nullopt;
}

void Schedule::check_args(int64_t t, size_t group) const {
    EMBER_CHECK(group < groups(), name(), ": no group ", group, " (", groups(), " groups)");
    EMBER_CHECK(t >= 0, name(), ": step ", t, " is negative");
}

std::vector<double> Schedule::per_group(const PerGroup& v, const char* what) const {
    const size_t n = v.values.size();
    EMBER_CHECK(n == 1 || n == groups(), name(), ": ", what, " has ", n,
                " values but the optimizer has ", groups(), " groups; give one, or one per group");
    return n == 1 ? std::vector<double>(groups(), v.values[0]) : v.values;
}

void Schedule::step(bool applied) {
    if (on_device() || !applied) return;
    write(steps_ + 1);
    ++steps_;
}

int64_t Schedule::steps() const { return on_device() ? opt_.steps() - origin_ : steps_; }

double Schedule::lr(size_t group) const {
    const int64_t t = steps();
    return lr_at(on_device() ? std::min(t, table_length_ - 1) : t, group);
}

double Schedule::last_lr(size_t group) const {
    const int64_t t = std::max<int64_t>(0, steps() - 1);
    return lr_at(on_device() ? std::min(t, table_length_ - 1) : t, group);
}

// --- Device tables (Note [Schedule tables] in kernels/optim.h) ---------------

void Schedule::use_device_tables(int64_t length) {
    EMBER_CHECK(length >= 1, name(), ": use_device_tables needs length >= 1, got ", length);
    const int64_t old_length = table_length_, old_origin = origin_;
    origin_ = opt_.steps() - steps_;
    table_length_ = length;
    try {
        write_tables();
    } catch (const Error&) {
        table_length_ = old_length;
        origin_ = old_origin;
        throw;
    }
}

void Schedule::write_tables() {
    EMBER_CHECK(opt_.groups().size() == groups(), name(), ": the optimizer has ",
                opt_.groups().size(), " groups, the schedule was made for ", groups());
    // Entry c is for a tensor with c applied steps: schedule step c − origin_.
    const int64_t size = std::max<int64_t>(1, origin_ + table_length_);
    std::vector<std::vector<double>> lrs(groups()), ms(groups());
    for (size_t g = 0; g < groups(); ++g)
        for (int64_t c = 0; c < size; ++c) {
            const int64_t t = std::clamp<int64_t>(c - origin_, 0, table_length_ - 1);
            lrs[g].push_back(lr_at(t, g));
            if (const std::optional<double> m = momentum_at(t, g)) ms[g].push_back(*m);
        }
    for (size_t g = 0; g < groups(); ++g)
        opt_.set_schedule_tables(g, std::move(lrs[g]), std::move(ms[g]));
}

void Schedule::write(int64_t t) {
    EMBER_CHECK(opt_.groups().size() == groups(), name(), ": the optimizer has ",
                opt_.groups().size(), " groups, the schedule was made for ", groups());
    // Everything computed before anything is written: an Error changes nothing.
    std::vector<double> lrs;
    std::vector<std::optional<double>> momenta;
    for (size_t g = 0; g < groups(); ++g) {
        lrs.push_back(lr_at(t, g));
        momenta.push_back(momentum_at(t, g));
    }
    for (size_t g = 0; g < groups(); ++g) {
        opt_.set_lr(g, lrs[g]);
        if (momenta[g]) opt_.set_momentum(g, *momenta[g]);
    }
}

// --- State --------------------------------------------------------------------

namespace {

json state_of(const Schedule& s, const std::vector<double>& lrs, const std::vector<double>& ms) {
    return {{"schedule", s.name()}, {"steps", s.steps()}, {"base_lrs", lrs}, {"base_momenta", ms}};
}

// A JSON array of `n` finite numbers in [lo, hi) (hi = inf: no upper bound).
std::vector<double> numbers(const json& o, const char* key, size_t n, double lo, double hi) {
    EMBER_CHECK(o.contains(key) && o[key].is_array(), "schedule state: '", key,
                "' is missing or not an array");
    EMBER_CHECK(o[key].size() == n, "schedule state: '", key, "' has ", o[key].size(),
                " values, the optimizer has ", n, " groups");
    std::vector<double> out;
    for (const json& v : o[key]) {
        EMBER_CHECK(v.is_number(), "schedule state: '", key, "' holds a non-number: ", v.dump());
        const double x = v.get<double>();
        EMBER_CHECK(std::isfinite(x) && x >= lo && x < hi,
                    "schedule state: '", key, "' holds ", x, ", outside [", lo, ", ", hi, ")");
        out.push_back(x);
    }
    return out;
}

}  // namespace

std::string Schedule::state_json() const {
    // Warmup nests its inner schedule's state under "inner".
    std::vector<const Schedule*> chain{this};
    while (Schedule* in = chain.back()->inner()) chain.push_back(in);
    json j;
    for (size_t k = chain.size(); k-- > 0;) {
        json s = state_of(*chain[k], chain[k]->base_lrs_, chain[k]->base_momenta_);
        if (k + 1 < chain.size()) s["inner"] = j;
        j = std::move(s);
    }
    return j.dump();
}

void Schedule::load_state(const std::string& text) {
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        EMBER_FAIL("schedule state: the JSON does not parse: ", e.what());
    }
    // Parse and check every level first.
    struct Level {
        Schedule* s;
        int64_t steps;
        std::vector<double> lrs, ms;
    };
    std::vector<Level> levels;
    const json* node = &j;
    for (Schedule* s = this; s; s = s->inner()) {
        const json& o = *node;
        EMBER_CHECK(o.is_object() && o.contains("schedule") && o["schedule"].is_string(),
                    "schedule state: not a schedule's state (no 'schedule' name)");
        EMBER_CHECK(o["schedule"].get<std::string>() == s->name(), "schedule state: saved by ",
                    o["schedule"].get<std::string>(), ", cannot be loaded into ", s->name());
        EMBER_CHECK(o.contains("steps") && o["steps"].is_number_integer() &&
                        o["steps"].get<int64_t>() >= 0,
                    "schedule state: 'steps' must be an integer >= 0, got ",
                    o.contains("steps") ? o["steps"].dump() : "nothing");
        levels.push_back({s, o["steps"].get<int64_t>(), numbers(o, "base_lrs", s->groups(), 0, INFINITY),
                          numbers(o, "base_momenta", s->groups(), 0, 1)});
        if (s->inner()) {
            EMBER_CHECK(o.contains("inner"), "schedule state: ", s->name(),
                        " lacks its inner schedule's state ('inner')");
            node = &o["inner"];
        }
    }
    // Commit, then check that the saved step lies within the schedule (an
    // Error from lr_at): on failure, put everything back.
    std::vector<Level> old;
    for (const Level& l : levels) old.push_back({l.s, l.s->steps_, l.s->base_lrs_, l.s->base_momenta_});
    auto set = [](const std::vector<Level>& ls) {
        for (const Level& l : ls) {
            l.s->steps_ = l.steps;
            l.s->base_lrs_ = l.lrs;
            l.s->base_momenta_ = l.ms;
        }
    };
    set(levels);
    const int64_t old_origin = origin_;
    try {
        if (on_device()) {
            for (size_t g = 0; g < groups(); ++g) lr_at(steps_, g);  // within the schedule
            origin_ = opt_.steps() - steps_;
            write_tables();
        } else {
            write(steps_);
        }
    } catch (const Error&) {
        set(old);
        origin_ = old_origin;
        throw;
    }
}

// --- Constant, StepLR, Warmup -------------------------------------------------

Constant::Constant(Optimizer& opt, const ConstantOptions& o) : Schedule(opt), o_(o) {
    EMBER_CHECK(o.factor >= 0 && o.factor <= 1, "Constant: factor must be in [0, 1], got ",
                o.factor);
    EMBER_CHECK(o.total_steps >= 0, "Constant: total_steps must be >= 0, got ", o.total_steps);
    apply();
}

double Constant::lr_at(int64_t t, size_t group) const {
    check_args(t, group);
    // PyTorch's closed form: base · (factor + [t >= total] · (1 − factor)).
    return base_lrs_[group] * (o_.factor + double(t >= o_.total_steps) * (1 - o_.factor));
}

StepLR::StepLR(Optimizer& opt, const StepLROptions& o) : Schedule(opt), o_(o) {
    EMBER_CHECK(o.step_size >= 1, "StepLR: step_size must be >= 1, got ", o.step_size);
    EMBER_CHECK(std::isfinite(o.gamma) && o.gamma >= 0, "StepLR: gamma must be finite and >= 0, got ",
                o.gamma);
    apply();
}

double StepLR::lr_at(int64_t t, size_t group) const {
    check_args(t, group);
    return base_lrs_[group] * std::pow(o_.gamma, double(t / o_.step_size));
}

namespace {
Optimizer& optimizer_of(const std::unique_ptr<Schedule>& inner) {
    EMBER_CHECK(inner != nullptr, "Warmup: the inner schedule is null");
    return inner->optimizer();
}
}  // namespace

Warmup::Warmup(std::unique_ptr<Schedule> inner, const WarmupOptions& o)
    : Schedule(optimizer_of(inner)), inner_(std::move(inner)), o_(o) {
    EMBER_CHECK(o.steps >= 1, "Warmup: steps must be >= 1, got ", o.steps);
    EMBER_CHECK(o.start_factor >= 0 && o.start_factor <= 1,
                "Warmup: start_factor must be in [0, 1], got ", o.start_factor);
    apply();
}

double Warmup::lr_at(int64_t t, size_t group) const {
    check_args(t, group);
    if (t >= o_.steps) return inner_->lr_at(t - o_.steps, group);
    // LinearLR's closed form with end_factor 1, towards the inner step 0.
    const double target = inner_->lr_at(0, group);
    return target * (o_.start_factor + (1 - o_.start_factor) * double(t) / double(o_.steps));
}

std::optional<double> Warmup::momentum_at(int64_t t, size_t group) const {
    check_args(t, group);
    return inner_->momentum_at(t >= o_.steps ? t - o_.steps : 0, group);
}

}  // namespace ember::optim

// The schedules that cycle or anneal: OneCycle, Cyclic, cosine annealing and
// cosine annealing with warm restarts, each PyTorch's closed form
// (torch.optim.lr_scheduler: OneCycleLR, CyclicLR, CosineAnnealingLR,
// CosineAnnealingWarmRestarts) with PyTorch's argument order in the
// arithmetic, so the values agree to the last bits or nearly.
#include <algorithm>
#include <cmath>

#include "optim/schedule.h"

namespace ember::optim {

namespace {

constexpr double kPi = 3.14159265358979323846;

// Finite values >= 0 (lr) or in [0, 1) (momentum), one per group.
void check_values(const char* who, const char* what, const std::vector<double>& v, bool momentum) {
    for (size_t g = 0; g < v.size(); ++g) {
        const bool ok = std::isfinite(v[g]) && v[g] >= 0 && (!momentum || v[g] < 1);
        EMBER_CHECK(ok, who, ": ", what, " of group ", g, " must be ",
                    momentum ? "in [0, 1)" : "finite and >= 0", ", got ", v[g]);
    }
}

}  // namespace

// --- OneCycle -----------------------------------------------------------------

OneCycle::OneCycle(Optimizer& opt, const OneCycleOptions& o) : Schedule(opt), o_(o) {
    EMBER_CHECK(o.total_steps >= 1, "OneCycle: total_steps must be >= 1, got ", o.total_steps);
    EMBER_CHECK(o.pct_start >= 0 && o.pct_start <= 1, "OneCycle: pct_start must be in [0, 1], got ",
                o.pct_start);
    EMBER_CHECK(std::isfinite(o.div_factor) && o.div_factor > 0 &&
                    std::isfinite(o.final_div_factor) && o.final_div_factor > 0,
                "OneCycle: div_factor and final_div_factor must be finite and > 0, got ",
                o.div_factor, " and ", o.final_div_factor);
    const std::vector<double> max_lr = per_group(o.max_lr, "max_lr");
    check_values("OneCycle", "max_lr", max_lr, false);
    for (size_t g = 0; g < groups(); ++g) {
        EMBER_CHECK(max_lr[g] > 0, "OneCycle: max_lr of group ", g, " must be > 0 (it is required)");
        const double initial = max_lr[g] / o.div_factor;
        lrs_.push_back({initial, max_lr[g], initial / o.final_div_factor});
    }
    if (o.cycle_momentum) {
        const std::vector<double> base = per_group(o.base_momentum, "base_momentum");
        const std::vector<double> max = per_group(o.max_momentum, "max_momentum");
        check_values("OneCycle", "base_momentum", base, true);
        check_values("OneCycle", "max_momentum", max, true);
        for (size_t g = 0; g < groups(); ++g) ms_.push_back({base[g], max[g]});
    }
    const double T = double(o.total_steps), pct = o.pct_start;
    if (o.three_phase)
        phases_ = {{pct * T - 1, 0, 1, 1, 0}, {2 * pct * T - 2, 1, 0, 0, 1}, {T - 1, 0, 2, 1, 1}};
    else
        phases_ = {{pct * T - 1, 0, 1, 1, 0}, {T - 1, 1, 2, 0, 1}};
    // pct_start·total_steps = 1 ends the first phase at step 0: PyTorch
    // divides by its zero length there. (Compared as the rounded product,
    // which fused multiply-adds in the phase ends cannot move.)
    EMBER_CHECK(pct * T != 1, "OneCycle: pct_start·total_steps = 1 (pct_start ", pct,
                ", total_steps ", o.total_steps,
                ") leaves the rising phase no length; change pct_start or total_steps");
    apply();
}

OneCycle::Position OneCycle::position(int64_t t) const {
    EMBER_CHECK(t <= o_.total_steps, "OneCycle: step ", t, " is past total_steps = ",
                o_.total_steps, "; make the schedule longer or stop stepping it");
    // After the last step (t = total_steps) the LR stays at the final value,
    // where PyTorch extrapolates the last phase (below zero when linear).
    const double x = double(std::min(t, o_.total_steps - 1));
    double start = 0;
    for (size_t i = 0;; ++i) {
        const double end = phases_[i].end_step;
        if (x <= end || i + 1 == phases_.size()) return {i, (x - start) / (end - start)};
        start = end;
    }
}

double OneCycle::anneal(double from, double to, double pct) const {
    if (o_.anneal == Anneal::cos) return to + (from - to) / 2.0 * (std::cos(kPi * pct) + 1);
    return (to - from) * pct + from;
}

double OneCycle::lr_at(int64_t t, size_t group) const {
    check_args(t, group);
    const Position p = position(t);
    const Phase& ph = phases_[p.phase];
    return anneal(lrs_[group][ph.lr_from], lrs_[group][ph.lr_to], p.pct);
}

std::optional<double> OneCycle::momentum_at(int64_t t, size_t group) const {
    check_args(t, group);
    if (!o_.cycle_momentum) return std::nullopt;
    const Position p = position(t);
    const Phase& ph = phases_[p.phase];
    return anneal(ms_[group][ph.m_from], ms_[group][ph.m_to], p.pct);
}

// --- Cyclic -------------------------------------------------------------------

Cyclic::Cyclic(Optimizer& opt, const CyclicOptions& o) : Schedule(opt), o_(o) {
    base_ = per_group(o.base_lr, "base_lr");
    max_ = per_group(o.max_lr, "max_lr");
    check_values("Cyclic", "base_lr", base_, false);
    check_values("Cyclic", "max_lr", max_, false);
    for (size_t g = 0; g < groups(); ++g)
        EMBER_CHECK(max_[g] > 0, "Cyclic: max_lr of group ", g, " must be > 0 (it is required)");
    const int64_t down = o.step_size_down.value_or(o.step_size_up);
    EMBER_CHECK(o.step_size_up >= 1 && down >= 0, "Cyclic: step_size_up must be >= 1 and ",
                "step_size_down >= 0, got ", o.step_size_up, " and ", down);
    up_ = double(o.step_size_up);
    down_ = double(down);
    EMBER_CHECK(std::isfinite(o.gamma) && o.gamma > 0, "Cyclic: gamma must be finite and > 0, got ",
                o.gamma);
    if (o.cycle_momentum) {
        base_m_ = per_group(o.base_momentum, "base_momentum");
        max_m_ = per_group(o.max_momentum, "max_momentum");
        check_values("Cyclic", "base_momentum", base_m_, true);
        check_values("Cyclic", "max_momentum", max_m_, true);
    }
    apply();
}

Cyclic::Height Cyclic::height(int64_t t) const {
    const double total = up_ + down_, ratio = up_ / total;
    const double cycle = std::floor(1 + double(t) / total);
    const double x = 1.0 + double(t) / total - cycle;
    const double scale = x <= ratio ? x / ratio : (x - 1) / (ratio - 1);
    switch (o_.mode) {
        case CyclicMode::triangular: return {scale, 1.0};
        case CyclicMode::triangular2: return {scale, 1 / std::pow(2.0, cycle - 1)};
        case CyclicMode::exp_range: return {scale, std::pow(o_.gamma, double(t))};
    }
    EMBER_INTERNAL_CHECK(false, "Cyclic: mode ", int(o_.mode));
}

double Cyclic::lr_at(int64_t t, size_t group) const {
    check_args(t, group);
    const Height h = height(t);
    return base_[group] + (max_[group] - base_[group]) * h.scale * h.f;
}

std::optional<double> Cyclic::momentum_at(int64_t t, size_t group) const {
    check_args(t, group);
    if (!o_.cycle_momentum) return std::nullopt;
    const Height h = height(t);
    return max_m_[group] - (max_m_[group] - base_m_[group]) * h.scale * h.f;
}

// --- Cosine and CosineWarmRestarts ---------------------------------------------

namespace {

// From `base` at cur = 0 down to `eta_min` at cur = len, on half a cosine.
double cosine_anneal(double base, double eta_min, double cur, double len) {
    return eta_min + (base - eta_min) * (1 + std::cos(kPi * cur / len)) / 2;
}

void check_eta_min(const char* schedule, double eta_min) {
    EMBER_CHECK(std::isfinite(eta_min) && eta_min >= 0, schedule,
                ": eta_min must be finite and >= 0, got ", eta_min);
}

}  // namespace

Cosine::Cosine(Optimizer& opt, const CosineOptions& o) : Schedule(opt), o_(o) {
    EMBER_CHECK(o.t_max >= 1, "Cosine: t_max must be >= 1, got ", o.t_max);
    check_eta_min("Cosine", o.eta_min);
    apply();
}

double Cosine::lr_at(int64_t t, size_t group) const {
    check_args(t, group);
    if (t >= o_.t_max) return o_.eta_min;
    return cosine_anneal(base_lrs_[group], o_.eta_min, double(t), double(o_.t_max));
}

// --- CosineWarmRestarts -------------------------------------------------------

CosineWarmRestarts::CosineWarmRestarts(Optimizer& opt, const CosineWarmRestartsOptions& o)
    : Schedule(opt), o_(o) {
    EMBER_CHECK(o.t_0 >= 1, "CosineWarmRestarts: t_0 must be >= 1, got ", o.t_0);
    EMBER_CHECK(o.t_mult >= 1, "CosineWarmRestarts: t_mult must be >= 1, got ", o.t_mult);
    check_eta_min("CosineWarmRestarts", o.eta_min);
    apply();
}

double CosineWarmRestarts::lr_at(int64_t t, size_t group) const {
    check_args(t, group);
    // T_cur and T_i after t steps of PyTorch's recursion, in whole steps.
    int64_t t_i = o_.t_0, t_cur = t;
    if (o_.t_mult == 1)
        t_cur = t % o_.t_0;
    else
        while (t_cur >= t_i) {
            t_cur -= t_i;
            t_i *= o_.t_mult;
        }
    return cosine_anneal(base_lrs_[group], o_.eta_min, double(t_cur), double(t_i));
}

}  // namespace ember::optim

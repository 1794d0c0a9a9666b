// The LR range test: the exponential sweep with its smoothed loss and
// divergence stop, the steepest-descent suggestion, and the Snapshot that
// undoes the sweep's training.
#include "optim/lr_find.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "kernels/copy.h"

namespace ember::optim {

namespace {

void check_options(const LrFindOptions& o) {
    EMBER_CHECK(std::isfinite(o.start_lr) && std::isfinite(o.end_lr) && o.start_lr > 0 &&
                    o.end_lr > o.start_lr,
                "lr_find: needs 0 < start_lr < end_lr (finite), got ", o.start_lr, " and ", o.end_lr);
    EMBER_CHECK(o.steps >= 2, "lr_find: steps must be >= 2, got ", o.steps);
    EMBER_CHECK(o.smoothing >= 0 && o.smoothing < 1, "lr_find: smoothing must be in [0, 1), got ",
                o.smoothing);
    EMBER_CHECK(o.diverge_factor > 1, "lr_find: diverge_factor must be > 1, got ",
                o.diverge_factor);
    EMBER_CHECK(o.skip_start >= 0 && o.skip_end >= 0,
                "lr_find: skip_start and skip_end must be >= 0, got ", o.skip_start, " and ",
                o.skip_end);
}

// The LR at the most negative slope of the smoothed loss against log10(lr),
// over the finite points left after skipping, cut at the smoothed loss's
// minimum (fastai's rule: past it the loss is rising, and a steep drop there
// is a recovery from a blow-up, not a good LR), and never at a point whose
// smoothed loss is above the first kept one's. Slopes by central
// differences inside and one-sided ones at the two ends (numpy.gradient's
// rule).
std::optional<double> steepest(const LrFindResult& r, const LrFindOptions& o) {
    int64_t n = 0;
    while (n < int64_t(r.smoothed.size()) && std::isfinite(r.smoothed[size_t(n)])) ++n;
    const int64_t lo = o.skip_start;
    int64_t hi = n - o.skip_end;
    if (hi - lo < 3) return std::nullopt;
    auto x = [&](int64_t i) { return std::log10(r.lrs[size_t(i)]); };
    auto y = [&](int64_t i) { return r.smoothed[size_t(i)]; };
    int64_t lowest = lo;
    for (int64_t i = lo; i < hi; ++i)
        if (y(i) < y(lowest)) lowest = i;
    hi = lowest + 1;
    if (hi - lo < 3) return std::nullopt;
    std::optional<double> best;
    double best_slope = 0;
    for (int64_t i = lo; i < hi; ++i) {
        if (y(i) > y(lo)) continue;
        const int64_t a = i == lo ? i : i - 1, b = i == hi - 1 ? i : i + 1;
        const double slope = (y(b) - y(a)) / (x(b) - x(a));
        if (slope < best_slope) {
            best_slope = slope;
            best = r.lrs[size_t(i)];
        }
    }
    return best;
}

}  // namespace

LrFindResult lr_find(Optimizer& opt, const std::function<double()>& train_step,
                     const LrFindOptions& o) {
    check_options(o);
    EMBER_CHECK(train_step != nullptr, "lr_find: train_step is empty");
    std::vector<double> saved;
    for (size_t g = 0; g < opt.groups().size(); ++g) saved.push_back(opt.lr(g));
    auto put_back = [&] {
        for (size_t g = 0; g < saved.size(); ++g) opt.set_lr(g, saved[g]);
    };

    LrFindResult r;
    const double ratio = o.end_lr / o.start_lr;
    double avg = 0, best = INFINITY;
    try {
        for (int64_t i = 0; i < o.steps; ++i) {
            const double lr = o.start_lr * std::pow(ratio, double(i) / double(o.steps - 1));
            for (size_t g = 0; g < saved.size(); ++g) opt.set_lr(g, lr);
            const double loss = train_step();
            avg = o.smoothing * avg + (1 - o.smoothing) * loss;
            const double smooth = avg / (1 - std::pow(o.smoothing, double(i + 1)));
            r.lrs.push_back(lr);
            r.losses.push_back(loss);
            r.smoothed.push_back(smooth);
            if (!std::isfinite(smooth) || (i > 0 && smooth > o.diverge_factor * best)) {
                r.diverged = true;
                break;
            }
            best = std::min(best, smooth);
        }
    } catch (...) {
        put_back();
        throw;
    }
    put_back();
    r.suggested_lr = steepest(r, o);
    return r;
}

Snapshot::Snapshot(Optimizer& opt) : opt_(opt), json_(opt.state_json()) {
    NoGradGuard no_grad;
    for (const ParamGroup& g : opt.groups()) {
        for (const Tensor& p : g.params) values_.emplace_back(p, kernels::clone(p));
        for (const Tensor& m : g.model) values_.emplace_back(m, kernels::clone(m));
    }
    // state_tensors() hands out the live buffers: copy them.
    for (const auto& [key, t] : opt.state_tensors()) state_.emplace_back(key, kernels::clone(t));
}

void Snapshot::restore() const {
    NoGradGuard no_grad;
    opt_.load_state(state_, json_);  // checks first: an Error here changes nothing
    for (const auto& [live, copy] : values_) kernels::copy(live, copy);
}

}  // namespace ember::optim

// The divergence guard: the window's sums of losses and of norm·0, the skip
// flag and its counter as device tensors (Note [Divergence without a sync]
// in train/divergence.h), one stacked read per window, the search for the
// first bad step only once a window is bad, and the loss-spike test.
#include "train/divergence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "autograd/grad_mode.h"
#include "autograd/graph.h"
#include "autograd/ops/elementwise.h"
#include "autograd/ops/index.h"
#include "kernels/factories.h"
#include "nn/module.h"

namespace ember::train {

namespace {

std::string number(double v) {
    if (std::isnan(v)) return "nan";  // not printf's "-nan"
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v);
    return buf;
}

Tensor scalar_zero(Device d) { return zeros({}, {DType::f64, d}); }

}  // namespace

std::string Divergence::message() const {
    std::string m = "training diverged at step " + std::to_string(step) + ": " + reason + " (loss " +
                    number(loss);
    if (!std::isnan(grad_norm)) m += ", gradient norm " + number(grad_norm);
    if (!std::isnan(lr)) m += ", lr " + number(lr);
    m += ")";
    if (!parameter.empty()) m += "; first non-finite parameter: " + parameter;
    return m;
}

std::string Spike::message() const {
    return "step " + std::to_string(step) + ": the loss " + number(loss) + " is " +
           number(loss / median) + "x the median of the last logged losses (" + number(median) +
           ")";
}

DivergenceGuard::DivergenceGuard(const TrainConfig& c, Device device, bool scaled)
    : policy_(c.on_nonfinite), max_skips_(c.max_skips), scaled_(scaled), device_(device) {
    next_window();
    consecutive_ = scalar_zero(device_);
}

bool DivergenceGuard::needs_norm() const { return policy_ == "skip" && !scaled_; }

void DivergenceGuard::add_loss(int64_t step, const Tensor& loss) {
    NoGradGuard no_grad;
    const Tensor l = loss.detach().to(DType::f64);
    loss_sum_ = add(loss_sum_, l);
    if (steps_.empty() || steps_.back().step != step) steps_.push_back({step, scalar_zero(device_)});
    StepValues& s = steps_.back();
    s.loss_sum = add(s.loss_sum, l);
    ++s.micro;
}

Tensor DivergenceGuard::observe_step(int64_t step, const Tensor& grad_norm, double lr) {
    NoGradGuard no_grad;
    if (steps_.empty() || steps_.back().step != step) steps_.push_back({step, scalar_zero(device_)});
    StepValues& s = steps_.back();
    s.lr = lr;
    if (!grad_norm.defined() || scaled_ || policy_ == "continue") return Tensor();
    s.norm = grad_norm;
    const Tensor zeroed = mul(grad_norm.to(DType::f64), 0.0);  // 0, or NaN when not finite
    bad_ = add(bad_, zeroed);
    if (policy_ != "skip") return Tensor();
    const Tensor flag = ne(zeroed, 0.0).to(DType::f64);  // NaN != 0: 1 when not finite
    consecutive_ = mul(add(consecutive_, 1.0), flag);     // 0 after an applied step
    return flag.to(DType::f32).reshape({1});
}

DivergenceGuard::Window DivergenceGuard::read(const nn::Module& model, const Tensor& scale,
                                              const std::function<Tensor(Tensor)>& mean) const {
    NoGradGuard no_grad;
    const Tensor s = scale.defined() ? scale.reshape({}).to(DType::f64) : full({}, 1.0, {DType::f64, device_});
    const std::vector<double> v = mean(stack({loss_sum_, bad_, consecutive_, s})).to_vector<double>();
    Window w{v[0], std::nullopt};
    const double scale_now = v[3];
    if (policy_ == "continue") return w;
    if (scaled_) {
        if (scale_now < 1)
            w.divergence = locate(model, "the loss scale fell to " + number(scale_now) +
                                             ": gradients overflow f16 even unscaled");
        return w;
    }
    if (policy_ == "skip") {
        if (v[2] >= double(max_skips_))
            w.divergence = locate(model, std::to_string(int64_t(v[2])) +
                                             " steps in a row had a non-finite gradient norm and "
                                             "were skipped (--max-skips " +
                                             std::to_string(max_skips_) + ")");
        return w;
    }
    if (!std::isfinite(v[0]) || !std::isfinite(v[1]))
        w.divergence = locate(model, "the loss or the gradient norm is not finite");
    return w;
}

Divergence DivergenceGuard::locate(const nn::Module& model, const std::string& reason) const {
    Divergence d;
    d.reason = reason;
    d.grad_norm = NAN;
    // The first step whose loss or norm is not finite; else (skips, the
    // scale) the window's last step.
    const StepValues* at = steps_.empty() ? nullptr : &steps_.back();
    for (const StepValues& s : steps_) {
        const double loss = s.loss_sum.item();
        const double norm = s.norm.defined() ? s.norm.item() : 0.0;
        if (!std::isfinite(loss) || !std::isfinite(norm)) {
            at = &s;
            break;
        }
    }
    if (at) {
        d.step = at->step;
        d.loss = at->loss_sum.item() / double(std::max<int64_t>(at->micro, 1));
        d.grad_norm = at->norm.defined() ? at->norm.item() : NAN;
        d.lr = at->lr;
        if (policy_ == "stop" && !scaled_) {  // which of the two it was
            if (!std::isfinite(d.loss))
                d.reason = "the loss is not finite";
            else if (at->norm.defined() && !std::isfinite(d.grad_norm))
                d.reason = "the gradient norm is not finite";
        }
    }
    for (const auto& [name, p] : model.named_parameters())
        if (!autograd::all_finite(p)) {
            d.parameter = name;
            break;
        }
    return d;
}

void DivergenceGuard::next_window() {
    loss_sum_ = scalar_zero(device_);
    bad_ = scalar_zero(device_);
    steps_.clear();
}

std::optional<Spike> DivergenceGuard::spike(int64_t step, double loss) {
    std::optional<Spike> out;
    if (logged_.size() >= 3 && std::isfinite(loss)) {
        std::vector<double> recent(logged_.end() - std::min<ptrdiff_t>(ptrdiff_t(logged_.size()), 20),
                                   logged_.end());
        std::nth_element(recent.begin(), recent.begin() + ptrdiff_t(recent.size() / 2), recent.end());
        const double median = recent[recent.size() / 2];
        if (median > 0 && loss > 10 * median) out = Spike{step, loss, median};
    }
    logged_.push_back(loss);
    return out;
}

}  // namespace ember::train

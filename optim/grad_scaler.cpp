// The dynamic loss scaler: its scale and found-inf flag as one-element device
// tensors, the fused unscale pass (kernels::unscale_), the skip and the
// growth/backoff rule.
#include "optim/grad_scaler.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/optim.h"

namespace ember::amp {

GradScaler::GradScaler(const GradScalerOptions& o) : o_(o), host_scale_(o.init_scale) {
    EMBER_CHECK(o.init_scale > 0 && std::isfinite(o.init_scale) && o.growth_factor > 1 &&
                    o.backoff_factor > 0 && o.backoff_factor < 1 && o.growth_interval >= 1,
                "GradScaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
                "growth_interval >= 1; got ", o.init_scale, ", ", o.growth_factor, ", ",
                o.backoff_factor, ", ", o.growth_interval);
}

void GradScaler::ensure_on(Device d) {
    if (scale_.defined() && scale_.device() == d) return;
    const double s = get_scale();
    scale_ = full({1}, s, {DType::f32, d});
    found_inf_ = zeros({1}, {DType::f32, d});
}

double GradScaler::get_scale() const {
    return scale_.defined() ? scale_.item() : host_scale_;
}

Tensor GradScaler::scale(const Tensor& loss) {
    if (!o_.enabled) return loss;
    EMBER_CHECK(loss.defined() && is_floating(loss.dtype()),
                "GradScaler::scale: expected a floating loss, got an undefined or integer tensor");
    ensure_on(loss.device());
    return mul(loss, scale_.to(loss.dtype()));
}

void GradScaler::unscale_(optim::Optimizer& opt) {
    if (!o_.enabled) return;
    EMBER_CHECK(!unscaled_, "GradScaler::unscale_: already called since the last update()");
    const std::vector<Tensor> grads = opt.gradients();
    unscaled_ = true;
    if (grads.empty()) return;
    ensure_on(grads[0].device());
    NoGradGuard no_grad;
    const Tensor inv = kernels::div(ones({1}, {DType::f32, scale_.device()}), scale_);
    kernels::unscale_(grads, inv, found_inf_);
}

bool GradScaler::step(optim::Optimizer& opt) {
    if (!o_.enabled) return opt.step();
    if (!unscaled_) unscale_(opt);
    const bool overflow = found_inf_.defined() && found_inf_.item() != 0;
    if (overflow) {
        ++skipped_;
        return false;  // parameters and optimizer state untouched
    }
    return opt.step();
}

void GradScaler::update() {
    if (!o_.enabled) return;
    unscaled_ = false;
    if (!scale_.defined()) return;  // nothing was scaled yet
    const bool overflow = found_inf_.item() != 0;
    double s = scale_.item();
    if (overflow) {
        s *= o_.backoff_factor;
        growth_tracker_ = 0;
    } else if (++growth_tracker_ == o_.growth_interval) {
        s *= o_.growth_factor;
        growth_tracker_ = 0;
    }
    kernels::fill(scale_, s);
    kernels::fill(found_inf_, 0);
}

std::string GradScaler::state_json() const {
    return nlohmann::json{{"scale", get_scale()},
                          {"growth_tracker", growth_tracker_},
                          {"skipped", skipped_},
                          {"enabled", o_.enabled}}
        .dump();
}

void GradScaler::load_state(const std::string& text) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        EMBER_FAIL("GradScaler state: the JSON does not parse: ", e.what());
    }
    EMBER_CHECK(j.is_object() && j.contains("scale") && j["scale"].is_number() &&
                    j.contains("growth_tracker") && j["growth_tracker"].is_number_integer() &&
                    j.contains("skipped") && j["skipped"].is_number_integer(),
                "GradScaler state: expected scale, growth_tracker and skipped");
    const double scale = j["scale"].get<double>();
    const int64_t tracker = j["growth_tracker"].get<int64_t>(), skipped = j["skipped"].get<int64_t>();
    EMBER_CHECK(scale > 0 && std::isfinite(scale) && tracker >= 0 &&
                    tracker < o_.growth_interval && skipped >= 0,
                "GradScaler state: scale ", scale, ", growth_tracker ", tracker, " or skipped ",
                skipped, " out of range");
    host_scale_ = scale;
    if (scale_.defined()) kernels::fill(scale_, scale);
    growth_tracker_ = tracker;
    skipped_ = skipped;
    unscaled_ = false;
}

}  // namespace ember::amp

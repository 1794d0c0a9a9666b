// The dynamic loss scaler: its scale, found-inf flag and counters as device
// tensors, the fused unscale pass (kernels::unscale_), the skip inside the
// optimizer's kernels (Optimizer::step_unless) and the growth/backoff rule as
// one kernel (kernels::update_scale_): nothing is read on the host per step.
#include "optim/grad_scaler.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/ops/elementwise.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/optim.h"

namespace ember::amp {

GradScaler::GradScaler(const GradScalerOptions& o) : o_(o), host_scale_(o.init_scale) {
    // The scale lives in f32: init_scale must be a finite f32.
    EMBER_CHECK(o.init_scale > 0 && o.init_scale <= std::numeric_limits<float>::max() &&
                    std::isfinite(o.growth_factor) && o.growth_factor > 1 &&
                    o.backoff_factor > 0 && o.backoff_factor < 1 && o.growth_interval >= 1,
                "GradScaler: need 0 < init_scale <= 3.4e38 (f32), finite growth_factor > 1, "
                "0 < backoff_factor < 1 and growth_interval >= 1; got ", o.init_scale, ", ", o.growth_factor, ", ",
                o.backoff_factor, ", ", o.growth_interval);
}

StepResult::operator bool() const {
    if (!flag_.defined()) return applied_;
    if (state_ < 0) state_ = flag_.item() == 0 ? 1 : 0;
    return state_ == 1;
}

void GradScaler::ensure_on(Device d) {
    if (scale_.defined() && scale_.device() == d) return;
    // First use, or the gradients moved: the values follow (read once).
    const double s = get_scale();
    const int64_t tracker = growth_tracker(), skipped = this->skipped();
    const float flag = found_inf_.defined() ? float(found_inf_.item()) : 0.0f;
    scale_ = full({1}, s, {DType::f32, d});
    found_inf_ = full({1}, double(flag), {DType::f32, d});
    counters_ = from_vector<int64_t>({tracker, skipped}, {2}).to(d);
}

double GradScaler::get_scale() const {
    return scale_.defined() ? scale_.item() : host_scale_;
}

int64_t GradScaler::growth_tracker() const {
    return counters_.defined() ? counters_.to_vector<int64_t>()[0] : host_tracker_;
}

int64_t GradScaler::skipped() const {
    return counters_.defined() ? counters_.to_vector<int64_t>()[1] : host_skipped_;
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

StepResult GradScaler::step(optim::Optimizer& opt) {
    if (!o_.enabled) return opt.step();
    if (!unscaled_) unscale_(opt);
    if (!found_inf_.defined()) return opt.step();  // nothing was ever scaled or unscaled
    opt.step_unless(found_inf_);  // the kernels skip on overflow: no host read
    // update() clears the flag: the result keeps its own copy.
    return StepResult(kernels::clone(found_inf_));
}

void GradScaler::update() {
    if (!o_.enabled) return;
    unscaled_ = false;
    if (!scale_.defined()) return;  // nothing was scaled yet
    kernels::update_scale_(scale_, found_inf_, counters_, o_.growth_factor, o_.backoff_factor,
                           o_.growth_interval);
}

std::string GradScaler::state_json() const {
    return nlohmann::json{{"scale", get_scale()},
                          {"growth_tracker", growth_tracker()},
                          {"skipped", skipped()},
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
    EMBER_CHECK(scale > 0 && scale <= std::numeric_limits<float>::max() && tracker >= 0 &&
                    tracker < o_.growth_interval && skipped >= 0,
                "GradScaler state: scale ", scale, ", growth_tracker ", tracker, " or skipped ",
                skipped, " out of range");
    host_scale_ = scale;
    host_tracker_ = tracker;
    host_skipped_ = skipped;
    if (scale_.defined()) {
        kernels::fill(scale_, scale);
        kernels::fill(found_inf_, 0);
        kernels::copy(counters_, from_vector<int64_t>({tracker, skipped}, {2}));
    }
    unscaled_ = false;
}

}  // namespace ember::amp

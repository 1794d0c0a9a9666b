// Nice ticks: a step of 1, 2 or 5 × 10^e, kept as (m, e) so that every tick
// k·m·10^e is computed in one rounding (0.6, not 3 × 0.2 = 0.6000000000000001).
#include "train/ticks.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ember::train {

namespace {

// Slack for floor/ceil of ratios that should be integers but carry rounding.
constexpr double kSlack = 1e-9;

struct Step {
    int m = 1;  // 1, 2 or 5
    int e = 0;
    double at(double k) const {
        const double p = std::pow(10.0, std::abs(e));  // exact for |e| <= 22
        return e >= 0 ? k * m * p : k * m / p;
    }
    double value() const { return at(1); }
};

Step nice(double raw) {
    Step s;
    s.e = int(std::floor(std::log10(raw)));
    const double f = raw / std::pow(10.0, s.e);
    if (f <= 1 + kSlack)
        s.m = 1;
    else if (f <= 2 + kSlack)
        s.m = 2;
    else if (f <= 5 + kSlack)
        s.m = 5;
    else
        s = {1, s.e + 1};
    return s;
}

// "2e-05" -> "2e-5", "1.5e+06" -> "1.5e6".
std::string tidy_exponent(const std::string& s) {
    const size_t e = s.find('e');
    if (e == std::string::npos) return s;
    std::string out = s.substr(0, e + 1);
    size_t i = e + 1;
    if (s[i] == '-') out += '-';
    if (s[i] == '-' || s[i] == '+') ++i;
    while (i + 1 < s.size() && s[i] == '0') ++i;
    return out + s.substr(i);
}

std::string decade_label(int k) {
    if (k >= 0 && k <= 4) return tick_label(std::pow(10.0, k), 1);
    if (k < 0 && k >= -3) return tick_label(std::pow(10.0, k), std::pow(10.0, k));
    return "1e" + std::to_string(k);
}

}  // namespace

double nice_step(double raw) { return nice(raw).value(); }

Ticks linear_ticks(double lo, double hi, bool widen, int target) {
    if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
    if (lo > hi) std::swap(lo, hi);
    const double magnitude = std::max(std::abs(lo), std::abs(hi));
    if (hi - lo <= 1e-9 * magnitude || hi == lo) {
        const double d = magnitude > 0 ? 0.1 * magnitude : 1;
        lo -= d, hi += d;
    }
    // hi/target - lo/target, not (hi - lo)/target: the span may overflow.
    const Step s = nice(hi / target - lo / target);
    const double step = s.value();
    const double k0 = widen ? std::floor(lo / step + kSlack) : std::ceil(lo / step - kSlack);
    const double k1 = widen ? std::ceil(hi / step - kSlack) : std::floor(hi / step + kSlack);
    Ticks t;
    t.step = step;
    t.lo = widen ? s.at(k0) : lo;
    t.hi = widen ? s.at(k1) : hi;
    for (double k = k0; k <= k1; ++k) {
        t.major.push_back(s.at(k));
        t.labels.push_back(tick_label(t.major.back(), step));
    }
    return t;
}

Ticks log_ticks(double lo, double hi, bool widen) {
    const auto positive = [](double v) { return v > 0 && std::isfinite(v); };
    if (!positive(lo) || !positive(hi)) lo = 1, hi = 10;
    if (lo > hi) std::swap(lo, hi);
    double a = std::log10(lo), b = std::log10(hi);
    if (b - a < kSlack) a -= 0.5, b += 0.5, lo = std::pow(10.0, a), hi = std::pow(10.0, b);
    const int k0 = int(widen ? std::floor(a + kSlack) : std::ceil(a - kSlack));
    const int k1 = int(widen ? std::ceil(b - kSlack) : std::floor(b + kSlack));
    Ticks t;
    t.lo = widen ? std::pow(10.0, k0) : lo;
    t.hi = widen ? std::pow(10.0, k1) : hi;
    const int decades = k1 - k0;
    const int stride = std::max(1, (decades + 7) / 8);
    t.step = stride;
    for (int k = k0; k <= k1; k += stride) {
        t.major.push_back(std::pow(10.0, k));
        t.labels.push_back(decade_label(k));
    }
    if (decades <= 6) {
        for (int k = k0 - 1; k <= k1; ++k)
            for (int m = 2; m <= 9; ++m) {
                const double v = m * std::pow(10.0, k);
                if (v >= t.lo && v <= t.hi) t.minor.push_back(v);
            }
    }
    if (t.major.empty()) {  // a fixed range inside one decade: label it linearly
        const Ticks inside = linear_ticks(t.lo, t.hi, false);
        t.major = inside.major;
        t.labels = inside.labels;
    }
    return t;
}

std::string tick_label(double v, double step) {
    char buf[64];
    step = std::abs(step) > 0 && std::isfinite(step) ? std::abs(step) : 1;
    const int e = int(std::floor(std::log10(step) + kSlack));
    if (e >= -4 && e <= 4) {
        std::snprintf(buf, sizeof buf, "%.*f", std::max(0, -e), v == 0 ? 0.0 : v);  // no "-0"
        return buf;
    }
    if (v == 0) return "0";
    const int ev = int(std::floor(std::log10(std::abs(v)) + kSlack));
    std::snprintf(buf, sizeof buf, "%.*e", std::clamp(ev - e, 0, 16), v);
    return tidy_exponent(buf);
}

bool AxisMap::placeable(double v) const {
    return std::isfinite(v) && (scale == Scale::linear || v > 0);
}

double AxisMap::operator()(double v) const {
    const double t = scale == Scale::linear
                         ? (v - lo) / (hi - lo)
                         : (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo));
    return p_lo + t * (p_hi - p_lo);
}

}  // namespace ember::train

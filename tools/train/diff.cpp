// `ember diff` (tools/train/diff.h).
#include "tools/train/diff.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "core/error.h"
#include "core/file.h"
#include "core/strprintf.h"
#include "nn/safetensors.h"
#include "tools/train/options.h"
#include "train/metrics.h"

namespace ember::train {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr uint64_t kMaxMetricsBytes = uint64_t(1) << 30;

std::string describe(const Tensor& t) { return std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()); }

bool same_bits(double x, double y) { return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y); }

// A number written exactly: the hex field when the record has it (C's %a,
// read back by strtod, NaN and infinities included), else the JSON number.
std::optional<double> exact(const json& r, const char* hex_key, const char* key) {
    if (const auto h = r.find(hex_key); h != r.end() && h->is_string()) {
        const std::string s = h->get<std::string>();
        char* end = nullptr;
        const double v = std::strtod(s.c_str(), &end);
        if (end != s.c_str() && *end == '\0') return v;
    }
    if (const auto v = r.find(key); v != r.end() && v->is_number()) return v->get<double>();
    return std::nullopt;
}

struct LossRecord {
    int64_t from = -1;  // -1: the record does not say (an older run)
    double loss = 0;
};

struct Metrics {
    std::map<int64_t, LossRecord> losses;
    std::map<int64_t, double> fingerprints;
};

Metrics read_metrics(const std::string& run_dir) {
    const std::string path = (fs::path(run_dir) / "metrics.jsonl").string();
    const std::string where = "ember diff: '" + path + "'";
    const RegularFile f = open_regular_file(path, where);
    EMBER_CHECK(f.size <= kMaxMetricsBytes, where, ": ", f.size, " bytes is more than a run writes");
    std::string text(f.size, '\0');
    read_exact(f.fd.get(), text.data(), f.size, 0, where);
    Metrics m;
    size_t at = 0;
    for (int64_t line = 1; at < text.size(); ++line) {
        const size_t nl = std::min(text.find('\n', at), text.size());
        const std::string_view l(text.data() + at, nl - at);
        const json r = json::parse(l, nullptr, false);
        at = nl + 1;
        if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank
        EMBER_CHECK(!r.is_discarded() && r.is_object(), where, ":", line, ": not a JSON object");
        const auto kind = r.find("kind");
        const auto step = r.find("step");
        if (kind == r.end() || !kind->is_string() || step == r.end() || !step->is_number_integer())
            continue;
        const int64_t s = step->get<int64_t>();
        if (*kind == "step") {
            LossRecord l;
            if (const auto from = r.find("from_step"); from != r.end() && from->is_number_integer())
                l.from = from->get<int64_t>();
            // A NaN loss is JSON null: its hex field still says it.
            if (const std::optional<double> v = exact(r, "loss_hex", "loss")) {
                l.loss = *v;
                m.losses[s] = l;
            }
        } else if (*kind == "fingerprint") {
            if (const std::optional<double> v = exact(r, "params_hex", "params")) m.fingerprints[s] = *v;
        }
    }
    return m;
}

// config.toml's settings, key → value.
std::map<std::string, std::string> read_settings(const std::string& run_dir) {
    const std::string path = (fs::path(run_dir) / "config.toml").string();
    std::map<std::string, std::string> out;
    if (!fs::exists(path)) return out;
    for (const std::string& arg : config_args(read_config_file(path), path)) {
        const size_t eq = arg.find('=');  // "--key=value"
        out[arg.substr(2, eq - 2)] = eq == std::string::npos ? "true" : arg.substr(eq + 1);
    }
    return out;
}

double relative(double a, double b) {
    const double scale = std::max(std::fabs(a), std::fabs(b));
    return scale > 0 ? std::fabs(a - b) / scale : 0;
}

// Whether two values are further apart than `tolerance` (relative); a NaN
// against anything but the same NaN is.
bool beyond(double a, double b, double tolerance) {
    if (std::isnan(a) || std::isnan(b)) return !(std::isnan(a) && std::isnan(b));
    if (std::isinf(a) || std::isinf(b)) return a != b;
    return relative(a, b) > tolerance;
}

TensorDiff compare(const std::string& name, const Tensor& a, const Tensor& b) {
    TensorDiff d{.name = name, .a = describe(a), .b = describe(b), .numel = a.numel()};
    if (a.dtype() != b.dtype() || a.shape() != b.shape()) {
        d.kind = TensorDiff::Kind::mismatch;
        return d;
    }
    const size_t es = size_t(a.element_size());
    const auto* pa = static_cast<const unsigned char*>(a.data_ptr());
    const auto* pb = static_cast<const unsigned char*>(b.data_ptr());
    if (std::memcmp(pa, pb, es * size_t(a.numel())) == 0) return d;  // equal
    d.kind = TensorDiff::Kind::differs;
    const Tensor fa = a.to(DType::f64), fb = b.to(DType::f64);
    const double* x = fa.data<double>();
    const double* y = fb.data<double>();
    for (int64_t i = 0; i < a.numel(); ++i) {
        if (std::memcmp(pa + size_t(i) * es, pb + size_t(i) * es, es) == 0) continue;
        ++d.differing;
        const double diff = std::isnan(x[i]) || std::isnan(y[i]) ? INFINITY : std::fabs(x[i] - y[i]);
        d.max_abs = std::max(d.max_abs, diff);
        d.max_rel = std::max(d.max_rel, std::isinf(diff) ? INFINITY : relative(x[i], y[i]));
    }
    return d;
}

}  // namespace

std::vector<TensorDiff> diff_weights(const std::string& a, const std::string& b) {
    const nn::TensorFile fa = nn::load_safetensors(a), fb = nn::load_safetensors(b);
    std::vector<TensorDiff> out;
    for (const auto& [name, t] : fa.tensors) {
        if (const Tensor* u = fb.find(name))
            out.push_back(compare(name, t, *u));
        else
            out.push_back({.name = name, .kind = TensorDiff::Kind::only_a, .a = describe(t), .numel = t.numel()});
    }
    for (const auto& [name, t] : fb.tensors)
        if (!fa.find(name))
            out.push_back({.name = name, .kind = TensorDiff::Kind::only_b, .b = describe(t), .numel = t.numel()});
    auto rank = [](const TensorDiff& d) {
        switch (d.kind) {
            case TensorDiff::Kind::mismatch: return 0;
            case TensorDiff::Kind::only_a:
            case TensorDiff::Kind::only_b: return 1;
            case TensorDiff::Kind::differs: return 2;
            case TensorDiff::Kind::equal: return 3;
        }
        return 3;
    };
    std::stable_sort(out.begin(), out.end(), [&](const TensorDiff& x, const TensorDiff& y) {
        if (rank(x) != rank(y)) return rank(x) < rank(y);
        if (x.max_rel != y.max_rel) return x.max_rel > y.max_rel;
        return x.max_abs > y.max_abs;
    });
    return out;
}

bool RunsDiff::identical() const {
    const bool weights_equal = std::all_of(weights.begin(), weights.end(), [](const TensorDiff& d) {
        return d.kind == TensorDiff::Kind::equal;
    });
    return !first_bitwise && !first_fingerprint && weights_equal;
}

RunsDiff diff_runs(const std::string& a, const std::string& b, double tolerance) {
    for (const std::string& dir : {a, b})
        EMBER_CHECK(fs::is_directory(dir), "ember diff: '", dir,
                    "' is not a run directory (give two run directories or two .safetensors files)");
    RunsDiff d;
    d.tolerance = tolerance;
    const std::map<std::string, std::string> ca = read_settings(a), cb = read_settings(b);
    std::map<std::string, int> keys;
    for (const auto& [k, v] : ca) keys[k] = 1;
    for (const auto& [k, v] : cb) keys[k] = 1;
    keys.erase("out");  // the run directories: different by construction
    for (const auto& [k, unused] : keys) {
        const auto x = ca.find(k), y = cb.find(k);
        const std::string va = x == ca.end() ? "" : x->second, vb = y == cb.end() ? "" : y->second;
        if (va != vb) d.config.push_back({k, va, vb});
    }
    const Metrics ma = read_metrics(a), mb = read_metrics(b);
    for (const auto& [step, la] : ma.losses) {
        const auto it = mb.losses.find(step);
        if (it == mb.losses.end()) continue;
        const LossRecord& lb = it->second;
        if (la.from >= 0 && lb.from >= 0 && la.from != lb.from) {
            ++d.losses_skipped;
            continue;
        }
        if (d.losses_compared++ == 0) d.first_step = step;
        d.last_step = step;
        if (!d.first_bitwise && !same_bits(la.loss, lb.loss)) d.first_bitwise = StepValues{step, la.loss, lb.loss};
        if (!d.first_beyond && beyond(la.loss, lb.loss, tolerance))
            d.first_beyond = StepValues{step, la.loss, lb.loss};
    }
    for (const auto& [step, fa] : ma.fingerprints) {
        const auto it = mb.fingerprints.find(step);
        if (it == mb.fingerprints.end()) continue;
        ++d.fingerprints_compared;
        if (!d.first_fingerprint && !same_bits(fa, it->second))
            d.first_fingerprint = StepValues{step, fa, it->second};
    }
    const fs::path wa = fs::path(a) / "last.safetensors", wb = fs::path(b) / "last.safetensors";
    if (fs::exists(wa) && fs::exists(wb)) {
        d.weights_file = "last.safetensors";
        d.weights = diff_weights(wa.string(), wb.string());
    }
    return d;
}

std::string format_weights_diff(const std::vector<TensorDiff>& w, int top) {
    int64_t equal = 0;
    for (const TensorDiff& t : w) equal += t.kind == TensorDiff::Kind::equal;
    if (equal == int64_t(w.size()))
        return strprintf("  identical: all %zu tensors bitwise equal\n", w.size());
    std::string s = strprintf("  %lld of %zu tensors differ, the worst first:\n",
                           (long long)(int64_t(w.size()) - equal), w.size());
    size_t width = 6;
    for (const TensorDiff& t : w) width = std::max(width, t.name.size());
    width = std::min<size_t>(width, 60);
    s += strprintf("  %-*s %-22s %12s %12s %s\n", int(width), "tensor", "dtype and shape", "max abs",
                "max rel", "elements differing");
    int shown = 0;
    for (const TensorDiff& t : w) {
        if (t.kind == TensorDiff::Kind::equal) continue;
        if (shown++ == top) {
            s += strprintf("  ... and %lld more\n", (long long)(int64_t(w.size()) - equal - top));
            break;
        }
        switch (t.kind) {
            case TensorDiff::Kind::mismatch:
                s += strprintf("  %-*s %s in A, %s in B\n", int(width), t.name.c_str(), t.a.c_str(), t.b.c_str());
                break;
            case TensorDiff::Kind::only_a:
                s += strprintf("  %-*s %-22s only in A\n", int(width), t.name.c_str(), t.a.c_str());
                break;
            case TensorDiff::Kind::only_b:
                s += strprintf("  %-*s %-22s only in B\n", int(width), t.name.c_str(), t.b.c_str());
                break;
            default:
                s += strprintf("  %-*s %-22s %12.4g %12.4g %lld of %lld\n", int(width), t.name.c_str(),
                            t.a.c_str(), t.max_abs, t.max_rel, (long long)t.differing, (long long)t.numel);
        }
    }
    return s;
}

std::string format_runs_diff(const RunsDiff& d, const std::string& a, const std::string& b) {
    std::string s = strprintf("A: %s\nB: %s\n", a.c_str(), b.c_str());
    if (d.config.empty()) {
        s += "configuration: the same (config.toml)\n";
    } else {
        s += strprintf("configuration: %zu setting(s) differ (config.toml):\n", d.config.size());
        for (const auto& row : d.config)
            s += strprintf("  %-22s A: %-16s B: %s\n", row[0].c_str(), row[1].empty() ? "(unset)" : row[1].c_str(),
                        row[2].empty() ? "(unset)" : row[2].c_str());
    }
    auto values = [](const StepValues& v) {
        return strprintf("A %.17g (%s), B %.17g (%s)", v.a, hex_double(v.a).c_str(), v.b,
                      hex_double(v.b).c_str());
    };
    if (d.losses_compared == 0) {
        s += "losses: no step record covers the same steps in both runs\n";
    } else {
        s += strprintf("losses: %lld step records compared (steps %lld to %lld)", (long long)d.losses_compared,
                    (long long)d.first_step, (long long)d.last_step);
        if (d.losses_skipped > 0)
            s += strprintf("; %lld more at the same step average other steps in each run (another "
                        "--log-every, or a window a resume split): not compared",
                        (long long)d.losses_skipped);
        s += "\n";
        if (!d.first_bitwise)
            s += "  bitwise equal in every one\n";
        else
            s += strprintf("  first bitwise difference: step %lld: %s\n", (long long)d.first_bitwise->step,
                        values(*d.first_bitwise).c_str());
        if (d.first_bitwise && !d.first_beyond)
            s += strprintf("  none beyond the tolerance (%g relative)\n", d.tolerance);
        else if (d.first_beyond)
            s += strprintf("  first beyond %g relative: step %lld: %s\n", d.tolerance, (long long)d.first_beyond->step,
                        values(*d.first_beyond).c_str());
    }
    if (d.fingerprints_compared == 0)
        s += "parameter fingerprints: none in both runs (--fingerprint-every N records them)\n";
    else if (!d.first_fingerprint)
        s += strprintf("parameter fingerprints: %lld compared, bitwise equal in every one\n",
                    (long long)d.fingerprints_compared);
    else
        s += strprintf("parameter fingerprints: %lld compared; the first that differs: step %lld: %s\n",
                    (long long)d.fingerprints_compared, (long long)d.first_fingerprint->step,
                    values(*d.first_fingerprint).c_str());
    if (d.weights_file.empty())
        s += "weights: not compared (last.safetensors is missing in one run)\n";
    else
        s += "weights (" + d.weights_file + "):\n" + format_weights_diff(d.weights, 10);
    if (d.identical()) {
        s += "identical: every compared loss, fingerprint and weight is bitwise equal\n";
    } else {
        int64_t first = INT64_MAX;
        if (d.first_bitwise) first = std::min(first, d.first_bitwise->step);
        if (d.first_fingerprint) first = std::min(first, d.first_fingerprint->step);
        s += first == INT64_MAX ? std::string("different: the weights differ\n")
                                : strprintf("different: the runs part by step %lld\n", (long long)first);
    }
    return s;
}

int run_diff(const DiffConfig& c) {
    for (const std::string& p : {c.a, c.b})
        EMBER_CHECK(fs::exists(p), "ember diff: '", p, "' does not exist");
    const bool dirs = fs::is_directory(c.a) && fs::is_directory(c.b);
    const bool files = !fs::is_directory(c.a) && !fs::is_directory(c.b);
    EMBER_CHECK(dirs || files, "ember diff: give two run directories or two .safetensors files, not one of each ('",
                c.a, "', '", c.b, "')");
    bool same = false;
    if (dirs) {
        const RunsDiff d = diff_runs(c.a, c.b, c.tolerance);
        std::printf("%s", format_runs_diff(d, c.a, c.b).c_str());
        same = d.identical();
    } else {
        const std::vector<TensorDiff> w = diff_weights(c.a, c.b);
        std::printf("A: %s\nB: %s\n%s", c.a.c_str(), c.b.c_str(), format_weights_diff(w, c.top).c_str());
        same = std::all_of(w.begin(), w.end(), [](const TensorDiff& t) { return t.kind == TensorDiff::Kind::equal; });
    }
    return c.exit_code && !same ? 1 : 0;
}

}  // namespace ember::train

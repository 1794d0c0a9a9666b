// The text summary of a trace (kernels/profile_trace.h): self times on the
// host thread, grouped per op (or named range), against the step time.
#include <algorithm>
#include <cstdio>
#include <map>

#include "core/strprintf.h"
#include "kernels/profile_trace.h"

namespace ember::kernels {

namespace {

struct Row {
    std::string name, kind;
    int64_t calls = 0;
    double self_us = 0;
    double dur_us = 0;  // ops: their whole time, which rates are computed from
    double flops = 0, bytes = 0;
};

// A span's place in the nesting: its own time (less its children's) and the
// step it lies in (-1: none).
struct Nested {
    double self_us;
    int step;
};

// Self times of the events on the host track (track 0), and which step
// (an event of category "step") each lies in. Spans measured by one clock
// on one thread nest exactly: a span that starts before another ends lies
// inside it.
std::vector<Nested> nest(const std::vector<TraceEvent>& ev, const std::vector<size_t>& host) {
    std::vector<size_t> order = host;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        if (ev[a].start_us != ev[b].start_us) return ev[a].start_us < ev[b].start_us;
        return ev[a].dur_us > ev[b].dur_us;  // the parent first
    });
    std::vector<Nested> out(ev.size(), Nested{0, -1});
    std::vector<size_t> stack;
    for (const size_t i : order) {
        const TraceEvent& e = ev[i];
        while (!stack.empty() && ev[stack.back()].start_us + ev[stack.back()].dur_us <= e.start_us)
            stack.pop_back();
        out[i].self_us = e.dur_us;
        if (!stack.empty()) {
            out[stack.back()].self_us -= e.dur_us;
            out[i].step = out[stack.back()].step;
        }
        if (e.category == "step") out[i].step = int(i);
        stack.push_back(i);
    }
    return out;
}

std::string rate(double value, double limit) {
    if (value <= 0) return strprintf("%8s %6s", "", "");
    if (limit <= 0) return strprintf("%8.1f %6s", value, "");
    return strprintf("%8.1f %5.1f%%", value, 100.0 * value / limit);
}

}  // namespace

std::string summarize(const Trace& t, const SummaryOptions& options) {
    const std::vector<TraceEvent>& ev = t.events;
    std::vector<size_t> host, steps;
    double first_us = 0, last_us = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
        if (ev[i].track != 0) continue;
        if (host.empty() || ev[i].start_us < first_us) first_us = ev[i].start_us;
        last_us = std::max(last_us, ev[i].start_us + ev[i].dur_us);
        host.push_back(i);
        if (ev[i].category == "step") steps.push_back(i);
    }
    if (host.empty()) return "profile: no events recorded\n";
    const std::vector<Nested> nested = nest(ev, host);

    // The time summarized: the steps', or the whole trace's.
    const bool whole = steps.empty();
    double total_us = whole ? last_us - first_us : 0;
    for (const size_t s : steps) total_us += ev[s].dur_us;
    const double per = whole ? 1.0 : double(steps.size());

    std::map<std::string, Row> rows;
    double op_self = 0, range_self = 0, outside = 0;
    double covered = 0;  // the events' self time, which must add up to total_us
    for (const size_t i : host) {
        const TraceEvent& e = ev[i];
        if (!whole && nested[i].step < 0) continue;  // an evaluation, a checkpoint between steps
        const double self = nested[i].self_us;
        covered += self;
        if (e.category == "step") {
            outside += self;
            continue;
        }
        std::string key = e.name, kind = e.category;
        if (e.category == "backward") key = "backward nodes (autograd's own time)";
        if (options.by_shape && !e.signature.empty()) key += " | " + e.signature;
        Row& r = rows[kind + "\t" + key];
        r.name = key;
        r.kind = kind;
        r.calls += 1;
        r.self_us += self;
        r.dur_us += e.dur_us;
        r.flops += e.flops;
        r.bytes += e.bytes;
        (e.category == "op" ? op_self : range_self) += self;
    }
    if (whole) outside = total_us - covered;

    std::vector<Row> sorted;
    for (auto& [key, r] : rows) sorted.push_back(std::move(r));
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Row& a, const Row& b) { return a.self_us > b.self_us; });

    const MachineLimits& lim = t.info.limits;
    std::string s;
    s += "profile";
    if (!t.info.title.empty()) s += " of " + t.info.title;
    if (whole)
        s += strprintf(": %.3f ms recorded (no steps marked)\n", total_us / 1e3);
    else
        s += strprintf(": %zu steps (%s to %s), %.3f ms per step\n", steps.size(),
                    ev[steps.front()].name.c_str(), ev[steps.back()].name.c_str(), total_us / per / 1e3);
    if (lim.gemm_gflops > 0 || lim.copy_gbps > 0)
        s += strprintf("limits on %s, measured as ember bench does: f32 GEMM %.1f GFLOP/s, copy %.1f GB/s\n",
                    lim.device.c_str(), lim.gemm_gflops, lim.copy_gbps);
    // The name column fits the longest name shown (signatures make long ones).
    int width = 28;
    for (size_t k = 0; k < sorted.size() && int(k) < options.top; ++k)
        width = std::max(width, int(sorted[k].name.size()));
    width = std::min(width, 120);
    s += strprintf("%-*s %-10s %7s %9s %6s %9s %8s %6s %8s %6s\n", width, "op or range", "kind", "calls",
                "ms/step", "%step", "mean us", "GFLOP/s", "%GEMM", "GB/s", "%copy");
    // calls < 0: a row of time only (no calls, no mean).
    auto line = [&](const std::string& name, const std::string& kind, double calls, double self_us,
                    double mean_us, const std::string& rates) {
        const std::string n = int(name.size()) > width ? name.substr(0, size_t(width) - 3) + "..." : name;
        const std::string counts = calls < 0 ? strprintf("%7s", "") : strprintf("%7.1f", calls);
        const std::string mean = calls < 0 ? strprintf("%9s", "") : strprintf("%9.1f", mean_us);
        s += strprintf("%-*s %-10s %s %9.3f %6.1f %s %s\n", width, n.c_str(), kind.c_str(), counts.c_str(),
                    self_us / per / 1e3, total_us > 0 ? 100.0 * self_us / total_us : 0.0, mean.c_str(),
                    rates.c_str());
        while (s.size() > 1 && s[s.size() - 2] == ' ') s.erase(s.size() - 2, 1);  // no trailing blanks
    };
    double rest_us = 0, rest_calls = 0;
    size_t rest_rows = 0;
    for (size_t k = 0; k < sorted.size(); ++k) {
        const Row& r = sorted[k];
        if (int(k) >= options.top) {
            rest_us += r.self_us;
            rest_calls += double(r.calls);
            ++rest_rows;
            continue;
        }
        const double secs = r.dur_us * 1e-6;
        const std::string rates =
            rate(secs > 0 ? r.flops / secs / 1e9 : 0, lim.gemm_gflops) + " " +
            rate(secs > 0 ? r.bytes / secs / 1e9 : 0, lim.copy_gbps);
        line(r.name, r.kind, double(r.calls) / per, r.self_us, r.self_us / double(r.calls), rates);
    }
    if (rest_rows > 0)
        line(strprintf("(%zu more rows)", rest_rows), "", rest_calls / per, rest_us,
             rest_us / std::max(1.0, rest_calls), "");
    line("(outside every op and range)", "", -1, outside, 0, "");
    bool cached = false;
    for (size_t k = 0; k < sorted.size() && int(k) < options.top; ++k) {
        const double secs = sorted[k].dur_us * 1e-6;
        cached |= lim.copy_gbps > 0 && secs > 0 && sorted[k].bytes / secs / 1e9 > lim.copy_gbps;
    }
    if (total_us > 0)
        s += strprintf("ops %.1f %% of the %s, named ranges' own time %.1f %%, outside both %.1f %%\n",
                    100.0 * op_self / total_us, whole ? "time" : "step", 100.0 * range_self / total_us,
                    100.0 * outside / total_us);
    if (cached)
        s += "(%copy above 100 %: the op's data was in the caches; the limit is a copy through memory)\n";

    // The GPU's side: each stream's ops by their time on the device.
    std::map<std::string, Row> gpu;
    double gpu_us = 0;
    for (const TraceEvent& e : ev) {
        if (e.track == 0 || e.category != "op") continue;
        Row& r = gpu[options.by_shape ? e.name + " | " + e.signature : e.name];
        r.name = options.by_shape ? e.name + " | " + e.signature : e.name;
        r.calls += 1;
        r.dur_us += e.dur_us;
        r.flops += e.flops;
        r.bytes += e.bytes;
        gpu_us += e.dur_us;
    }
    if (!gpu.empty()) {
        std::vector<Row> g;
        for (auto& [key, r] : gpu) g.push_back(std::move(r));
        std::stable_sort(g.begin(), g.end(), [](const Row& a, const Row& b) { return a.dur_us > b.dur_us; });
        s += strprintf("on the GPU: %.3f ms of kernels per step (%.1f %% of the step)\n", gpu_us / per / 1e3,
                    total_us > 0 ? 100.0 * gpu_us / total_us : 0.0);
        for (size_t k = 0; k < g.size() && int(k) < options.top; ++k) {
            const double secs = g[k].dur_us * 1e-6;
            line(g[k].name, "gpu", double(g[k].calls) / per, g[k].dur_us, g[k].dur_us / double(g[k].calls),
                 rate(g[k].flops / secs / 1e9, lim.gemm_gflops) + " " +
                     rate(g[k].bytes / secs / 1e9, lim.copy_gbps));
        }
    }

    // Memory: the highest peak each device's counter reached.
    std::map<std::string, double> peaks;
    for (const CounterEvent& c : t.counters)
        for (const auto& [k, v] : c.values)
            if (k == "peak MB") peaks[c.name] = std::max(peaks[c.name], v);
    for (const auto& [name, mb] : peaks) s += strprintf("%s: peak %.1f MB allocated\n", name.c_str(), mb);
    return s;
}

}  // namespace ember::kernels

// metrics.jsonl in, curves.svg out. The reader is strict about what it knows
// (a bad line names the file and the line) and lenient about what it does
// not (unknown keys and kinds), so the trainer can log more without breaking
// older readers.
#include "train/plot.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ember::train {

namespace {

using json = nlohmann::json;

// Where a line came from, for error messages: "runs/a/metrics.jsonl:3".
struct Where {
    const std::string& name;
    int64_t line;
};

[[noreturn]] void bad_line(const Where& w, const std::string& what) {
    EMBER_FAIL("read_metrics: ", w.name, ":", w.line, ": ", what);
}

// nlohmann's message without its "[json.exception...] parse error at line 1," lead.
std::string parse_problem(const std::string& what) {
    const size_t column = what.find("column");
    if (column != std::string::npos) return what.substr(column);
    const size_t bracket = what.find("] ");
    return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

double number(const json& j, const char* key, const Where& w) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return kMissing;
    if (!it->is_number())
        bad_line(w, str("\"", key, "\" is a ", it->type_name(), ", not a number"));
    return it->get<double>();
}

// A step or epoch number: an integer >= 0 (120.0 too); -1 when absent and not required.
int64_t count(const json& j, const char* key, const char* kind, bool required, const Where& w) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        if (required)
            bad_line(w, str("a \"", kind, "\" line needs \"", key, "\" (an integer >= 0)"));
        return -1;
    }
    const double v = it->is_number() ? it->get<double>() : -1;
    if (!(v >= 0 && v == std::floor(v) && v < 9e18))
        bad_line(w, str("\"", key, "\" is ", it->dump(), ", not an integer >= 0"));
    return it->is_number_float() ? int64_t(v) : it->get<int64_t>();
}

StepMetrics step_line(const json& j, const Where& w) {
    StepMetrics s;
    s.step = count(j, "step", "step", true, w);
    s.epoch = count(j, "epoch", "step", false, w);
    s.loss = number(j, "loss", w);
    s.lr = number(j, "lr", w);
    s.samples_per_s = number(j, "samples_per_s", w);
    s.data_wait = number(j, "data_wait", w);
    s.host_syncs = number(j, "host_syncs", w);
    s.time_s = number(j, "time_s", w);
    return s;
}

EpochMetrics epoch_line(const json& j, const Where& w) {
    EpochMetrics e;
    e.epoch = count(j, "epoch", "epoch", true, w);
    e.step = count(j, "step", "epoch", true, w);
    e.train_loss = number(j, "train_loss", w);
    e.test_loss = number(j, "test_loss", w);
    e.test_acc = number(j, "test_acc", w);
    e.epoch_time_s = number(j, "epoch_time_s", w);
    e.samples_per_s = number(j, "samples_per_s", w);
    e.data_wait = number(j, "data_wait", w);
    return e;
}

// " (last 0.8843, best 0.8901 at step 2345)" for the accuracy chart's title.
std::string last_and_best(const std::vector<double>& x, const std::vector<double>& y) {
    int64_t last = -1, best = -1;
    for (size_t i = 0; i < y.size(); ++i) {
        if (!std::isfinite(y[i])) continue;
        last = int64_t(i);
        if (best < 0 || y[i] > y[size_t(best)]) best = int64_t(i);
    }
    if (last < 0) return "";
    char buf[96];
    std::snprintf(buf, sizeof buf, " (last %.4f, best %.4f at step %.0f)", y[size_t(last)],
                  y[size_t(best)], x[size_t(best)]);
    return buf;
}

}  // namespace

Metrics parse_metrics(std::istream& in, const std::string& name) {
    Metrics m;
    std::string text;
    for (int64_t line = 1; std::getline(in, text); ++line) {
        if (!text.empty() && text.back() == '\r') text.pop_back();
        if (text.find_first_not_of(" \t") == std::string::npos) continue;
        const Where w{name, line};
        json j;
        try {
            j = json::parse(text);
        } catch (const json::parse_error& e) {
            bad_line(w, "not valid JSON (" + parse_problem(e.what()) + ")");
        } catch (const json::out_of_range& e) {  // a number too large for a double: 1e999
            bad_line(w, std::string("a number out of range (") + e.what() + ")");
        }
        if (!j.is_object()) bad_line(w, str("a JSON ", j.type_name(), ", not an object"));
        const auto kind = j.find("kind");
        if (kind == j.end() || !kind->is_string())
            bad_line(w, "no \"kind\" string (\"step\" or \"epoch\")");
        if (*kind == "step")
            m.steps.push_back(step_line(j, w));
        else if (*kind == "epoch")
            m.epochs.push_back(epoch_line(j, w));
    }
    EMBER_CHECK(!in.bad(), "read_metrics: reading ", name, " failed");
    return m;
}

Metrics read_metrics(const std::string& path) {
    std::error_code ec;
    EMBER_CHECK(std::filesystem::is_regular_file(path, ec), "read_metrics: '", path, "' ",
                std::filesystem::exists(path, ec) ? "is not a regular file" : "does not exist");
    std::ifstream in(path, std::ios::binary);
    EMBER_CHECK(in.is_open(), "read_metrics: cannot open '", path, "': ", std::strerror(errno));
    return parse_metrics(in, path);
}

Metrics latest_metrics(const Metrics& m) {
    std::map<int64_t, StepMetrics> steps;
    std::map<int64_t, EpochMetrics> epochs;
    for (const StepMetrics& s : m.steps) steps[s.step] = s;  // a later line replaces an earlier
    for (const EpochMetrics& e : m.epochs) epochs[e.epoch] = e;
    Metrics out;
    for (const auto& [step, s] : steps) out.steps.push_back(s);
    for (const auto& [epoch, e] : epochs) out.epochs.push_back(e);
    return out;
}

std::vector<LineChart> curves_charts(const Metrics& all, const std::string& run_name) {
    const Metrics m = latest_metrics(all);
    std::vector<double> step, loss, lr, epoch_step, train_loss, test_loss, test_acc;
    for (const StepMetrics& s : m.steps)
        step.push_back(double(s.step)), loss.push_back(s.loss), lr.push_back(s.lr);
    for (const EpochMetrics& e : m.epochs) {
        epoch_step.push_back(double(e.step)), train_loss.push_back(e.train_loss);
        test_loss.push_back(e.test_loss), test_acc.push_back(e.test_acc);
    }

    // One step axis for all three, so that an epoch sits at the same x in each.
    LineChart base;
    base.width = 900;
    base.height = 280;
    base.x.label = "step";
    double lo = INFINITY, hi = -INFINITY;
    for (double s : step) lo = std::min(lo, s), hi = std::max(hi, s);
    for (double s : epoch_step) lo = std::min(lo, s), hi = std::max(hi, s);
    if (lo <= hi) {
        const Ticks t = linear_ticks(lo, hi);
        base.x.min = t.lo, base.x.max = t.hi;
    }

    LineChart loss_chart = base, acc_chart = base, lr_chart = base;
    loss_chart.title = run_name.empty() ? "loss" : run_name + ": loss";
    loss_chart.y.label = "loss";
    Series& per_step = loss_chart.add("train (per logged step)", step, loss);
    per_step.color = "#0072B2", per_step.stroke = 1.2;
    Series& train = loss_chart.add("train (epoch mean)", epoch_step, train_loss);
    train.color = "#56B4E9", train.markers = true;
    // A run without accuracies (a language model) evaluates a validation split.
    bool any_acc = false;
    for (double a : test_acc) any_acc |= std::isfinite(a);
    Series& test = loss_chart.add(any_acc || test_acc.empty() ? "test (end of epoch)"
                                                              : "validation (end of epoch)",
                                  epoch_step, test_loss);
    test.color = "#D55E00", test.markers = true;

    lr_chart.title = "learning rate";
    lr_chart.y.label = "lr";
    lr_chart.add("learning rate", step, lr).color = "#CC79A7";
    if (!any_acc && !test_acc.empty()) return {loss_chart, lr_chart};

    acc_chart.title = "test accuracy" + last_and_best(epoch_step, test_acc);
    acc_chart.y.label = "accuracy";
    Series& acc = acc_chart.add("test accuracy", epoch_step, test_acc);
    acc.color = "#009E73", acc.markers = true;
    return {loss_chart, acc_chart, lr_chart};
}

std::string plot_run(const std::string& run_dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    EMBER_CHECK(fs::is_directory(run_dir, ec), "plot: '", run_dir, "' ",
                fs::exists(run_dir, ec) ? "is not a directory" : "does not exist",
                " (give the run directory that ember train wrote)");
    const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
    EMBER_CHECK(fs::exists(metrics, ec), "plot: '", run_dir,
                "' has no metrics.jsonl (is it a run directory that ember train wrote?)");
    const Metrics m = read_metrics(metrics.string());
    // The run's name: the folder's own, also when given as "." or with a trailing slash.
    const std::string name = fs::weakly_canonical(fs::absolute(run_dir), ec).filename().string();
    const std::string out = (fs::path(run_dir) / "curves.svg").string();
    save_svg(out, stack_charts(curves_charts(m, name)));
    return out;
}

}  // namespace ember::train

// metrics.jsonl: the schema accepted, each malformed line rejected with its
// number; curves.svg drawn from a run directory.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "support/svg_support.h"
#include "train/plot.h"

using namespace ember;
using namespace ember::train;
using namespace ember::test;

namespace {

Metrics parse(const std::string& text) {
    std::istringstream in(text);
    return parse_metrics(in, "run/metrics.jsonl");
}

// The schema's example lines (docs/train.md, "metrics.jsonl").
const char* kStepLine =
    R"({"kind": "step", "step": 120, "epoch": 0, "loss": 0.53, "lr": 0.001, "samples_per_s": 5100.0, "data_wait": 0.01, "host_syncs": 1, "time_s": 3.2})";
const char* kEpochLine =
    R"({"kind": "epoch", "epoch": 0, "step": 469, "train_loss": 0.61, "test_loss": 0.45, "test_acc": 0.84, "epoch_time_s": 12.0, "samples_per_s": 5000.0, "data_wait": 0.02})";

}  // namespace

TEST_CASE("the metrics reader takes the documented schema", "[plot]") {
    const Metrics m = parse(std::string(kStepLine) + "\n" + kEpochLine + "\n");
    REQUIRE(m.steps.size() == 1);
    REQUIRE(m.epochs.size() == 1);
    const StepMetrics& s = m.steps[0];
    CHECK(s.step == 120);
    CHECK(s.epoch == 0);
    CHECK(s.loss == 0.53);
    CHECK(s.lr == 0.001);
    CHECK(s.samples_per_s == 5100.0);
    CHECK(s.data_wait == 0.01);
    CHECK(s.host_syncs == 1);
    CHECK(s.time_s == 3.2);
    const EpochMetrics& e = m.epochs[0];
    CHECK(e.epoch == 0);
    CHECK(e.step == 469);
    CHECK(e.train_loss == 0.61);
    CHECK(e.test_loss == 0.45);
    CHECK(e.test_acc == 0.84);
    CHECK(e.epoch_time_s == 12.0);
    CHECK(e.samples_per_s == 5000.0);
    CHECK(e.data_wait == 0.02);
}

TEST_CASE("the metrics reader tolerates what it may: missing numbers, new keys and kinds",
          "[plot]") {
    const Metrics m = parse(
        "{\"kind\": \"step\", \"step\": 5}\r\n"  // only what is required, CRLF
        "\n   \n"                                // blank lines
        "{\"kind\": \"step\", \"step\": 10.0, \"loss\": null, \"grad_norm\": 3, \"note\": \"x\"}\n"
        "{\"kind\": \"config\", \"model\": \"mlp\"}\n"  // a kind it does not know
        "{\"kind\": \"epoch\", \"epoch\": 1, \"step\": 20, \"test_acc\": 0.5}");  // no final
                                                                                  // newline
    REQUIRE(m.steps.size() == 2);
    CHECK(m.steps[0].step == 5);
    CHECK(m.steps[0].epoch == -1);
    CHECK(std::isnan(m.steps[0].loss));
    CHECK(std::isnan(m.steps[0].lr));
    CHECK(m.steps[1].step == 10);
    CHECK(std::isnan(m.steps[1].loss));
    REQUIRE(m.epochs.size() == 1);
    CHECK(m.epochs[0].test_acc == 0.5);
    CHECK(std::isnan(m.epochs[0].test_loss));
    CHECK(parse("").steps.empty());
}

TEST_CASE("a malformed metrics line is an error naming the file and the line", "[plot]") {
    const std::string ok = std::string(kStepLine) + "\n" + kEpochLine + "\n";
    const auto rejects = [&](const std::string& line, const std::string& why) {
        INFO(line);
        REQUIRE_THROWS_WITH(parse(ok + line + "\n" + kStepLine),
                            Catch::Contains("read_metrics: run/metrics.jsonl:3: " + why));
    };
    rejects(R"({"kind": "step", "step": 60, "loss": 0.)", "not valid JSON (column");
    rejects("not json", "not valid JSON");
    rejects(R"({"kind": "step", "step": 1} trailing)", "not valid JSON");
    rejects(R"([1, 2])", "a JSON array, not an object");
    rejects(R"({"step": 60})", "no \"kind\" string");
    rejects(R"({"kind": 1, "step": 60})", "no \"kind\" string");
    rejects(R"({"kind": "step", "loss": 0.5})", "a \"step\" line needs \"step\"");
    rejects(R"({"kind": "step", "step": -1})", "\"step\" is -1, not an integer >= 0");
    rejects(R"({"kind": "step", "step": 1.5})", "\"step\" is 1.5, not an integer >= 0");
    rejects(R"({"kind": "step", "step": "7"})", "\"step\" is \"7\", not an integer >= 0");
    rejects(R"({"kind": "step", "step": 7, "loss": "0.5"})", "\"loss\" is a string, not a number");
    rejects(R"({"kind": "step", "step": 7, "lr": [0.1]})", "\"lr\" is a array, not a number");
    rejects(R"({"kind": "epoch", "step": 7})", "a \"epoch\" line needs \"epoch\"");
    rejects(R"({"kind": "epoch", "epoch": 1})", "a \"epoch\" line needs \"step\"");
    rejects(R"({"kind": "epoch", "epoch": 1, "step": 9, "test_acc": true})",
            "\"test_acc\" is a boolean, not a number");
}

TEST_CASE("read_metrics names a file it cannot read", "[plot]") {
    ScratchDir dir;
    REQUIRE_THROWS_WITH(read_metrics(dir.file("metrics.jsonl")),
                        Catch::Contains("'" + dir.file("metrics.jsonl") + "' does not exist"));
    REQUIRE_THROWS_WITH(read_metrics(dir.path), Catch::Contains("is not a regular file"));
    write_text(dir.file("metrics.jsonl"), std::string(kStepLine) + "\n{\n");
    REQUIRE_THROWS_WITH(read_metrics(dir.file("metrics.jsonl")),
                        Catch::Contains(dir.file("metrics.jsonl") + ":2: not valid JSON"));
}

TEST_CASE("latest_metrics keeps each step and epoch once, from its last line", "[plot]") {
    // A run resumed from its checkpoint at step 20 logs steps 30 and 40 again.
    const Metrics m = latest_metrics(
        parse("{\"kind\": \"step\", \"step\": 10, \"loss\": 1.0}\n"
              "{\"kind\": \"step\", \"step\": 30, \"loss\": 0.9}\n"
              "{\"kind\": \"step\", \"step\": 40, \"loss\": 0.8}\n"
              "{\"kind\": \"epoch\", \"epoch\": 0, \"step\": 40, \"test_acc\": 0.1}\n"
              "{\"kind\": \"step\", \"step\": 30, \"loss\": 0.7}\n"
              "{\"kind\": \"step\", \"step\": 40, \"loss\": 0.6}\n"
              "{\"kind\": \"epoch\", \"epoch\": 0, \"step\": 40, \"test_acc\": 0.2}\n"));
    REQUIRE(m.steps.size() == 3);
    CHECK(m.steps[0].loss == 1.0);
    CHECK(m.steps[1].loss == 0.7);
    CHECK(m.steps[2].loss == 0.6);
    REQUIRE(m.epochs.size() == 1);
    CHECK(m.epochs[0].test_acc == 0.2);
}

TEST_CASE("curves: loss, accuracy and LR on one step axis", "[plot]") {
    const Metrics m = read_metrics(std::string(EMBER_TEST_RUNS) + "/good/metrics.jsonl");
    REQUIRE(m.steps.size() == 18);
    REQUIRE(m.epochs.size() == 3);
    const std::vector<LineChart> charts = curves_charts(m, "mlp-test");
    REQUIRE(charts.size() == 3);
    CHECK(charts[0].title == "mlp-test: loss");
    CHECK(charts[1].title == "test accuracy (last 0.8620, best 0.8620 at step 360)");
    CHECK(charts[2].title == "learning rate");
    for (const LineChart& c : charts) {
        CHECK(c.x_ticks().lo == 0);
        CHECK(c.x_ticks().hi == 400);
        CHECK(c.x_ticks().major == charts[0].x_ticks().major);
    }
    // Test loss and accuracy sit at each epoch's last step.
    const Series& test_loss = charts[0].series()[2];
    CHECK(test_loss.x == std::vector<double>{120, 240, 360});
    CHECK(test_loss.y == std::vector<double>{0.68, 0.53, 0.48});
    CHECK(charts[1].series()[0].y == std::vector<double>{0.81, 0.845, 0.862});
    CHECK(charts[2].series()[0].x.size() == 18);

    const std::string svg = stack_charts(charts);
    INFO(svg);
    REQUIRE(xml_problem(svg) == "");
    // The test loss's points are on the same pixels as the training loss's at those steps.
    const Runs train = series_runs(svg, "train (per logged step)");
    const Runs test = series_runs(svg, "test (end of epoch)");
    REQUIRE(train.size() == 1);
    REQUIRE(test.size() == 1);
    CHECK(test[0][0].x == Approx(train[0][5].x).margin(0.01));  // step 120, the 6th logged
}

TEST_CASE("plot_run writes curves.svg into the run directory", "[plot]") {
    ScratchDir dir;
    const std::string run = dir.file("mlp-run");
    std::filesystem::create_directory(run);
    std::filesystem::copy_file(std::string(EMBER_TEST_RUNS) + "/good/metrics.jsonl",
                               run + "/metrics.jsonl");
    const std::string path = plot_run(run + "/");
    CHECK(path == run + "/curves.svg");
    const std::string svg = read_text(path);
    REQUIRE(xml_problem(svg) == "");
    CHECK(count(svg, "<g class=\"chart\"") == 3);
    CHECK(label_texts(svg, "title").front() == "mlp-run: loss");

    const std::string missing = dir.file("nosuch");
    REQUIRE_THROWS_WITH(plot_run(missing),
                        Catch::Contains("plot: '" + missing + "' does not exist"));
    REQUIRE_THROWS_WITH(plot_run(run + "/metrics.jsonl"), Catch::Contains("is not a directory"));
    const std::string empty = dir.file("empty");
    std::filesystem::create_directory(empty);
    REQUIRE_THROWS_WITH(plot_run(empty), Catch::Contains("has no metrics.jsonl"));
    const std::string bad = dir.file("bad");
    std::filesystem::create_directory(bad);
    std::filesystem::copy_file(std::string(EMBER_TEST_RUNS) + "/bad/metrics.jsonl",
                               bad + "/metrics.jsonl");
    REQUIRE_THROWS_WITH(plot_run(bad), Catch::Contains(bad + "/metrics.jsonl:3: not valid JSON"));
    CHECK_FALSE(std::filesystem::exists(bad + "/curves.svg"));

    // A run that has logged nothing yet still gets a (valid, empty) figure.
    write_text(empty + "/metrics.jsonl", "");
    CHECK(xml_problem(read_text(plot_run(empty))) == "");
}

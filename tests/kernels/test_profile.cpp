// The profiler (kernels/profile.h): one row per op and signature with its
// calls and the FLOPs its front counted, nothing recorded without an
// installed profiler or after it is gone, nested profilers restoring the
// outer one, an op's kernel that fails still leaving the profiler usable;
// ranges nesting around ops; the summary's self-time arithmetic; the trace
// file read back, and files that are not traces refused.
#include "kernels/profile.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/profile_trace.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;
using ember::kernels::Profiler;
using ember::kernels::OpTime;

namespace {

const OpTime* find_row(const std::vector<OpTime>& rows, const std::string& name,
                       const std::string& signature) {
    for (const OpTime& r : rows)
        if (r.name == name && r.signature == signature) return &r;
    return nullptr;
}

}  // namespace

TEST_CASE("the op profiler counts calls and FLOPs per op and signature", "[profile]") {
    const Tensor a = random_tensor({8, 5}, DType::f32, 1), b = random_tensor({5, 3}, DType::f32, 2);
    const Tensor c = random_tensor({4}, DType::f32, 3);
    REQUIRE(Profiler::active() == nullptr);
    Profiler prof;
    REQUIRE(Profiler::active() == &prof);
    for (int i = 0; i < 3; ++i) (void)kernels::matmul(a, b);
    (void)kernels::unary(kernels::UnaryOp::relu, c);
    (void)kernels::unary(kernels::UnaryOp::relu, a);

    const std::vector<OpTime> rows = prof.rows();
    REQUIRE(rows.size() == 3);
    const OpTime* mm = find_row(rows, "matmul", "f32 [8, 3], f32 [8, 5], f32 [5, 3]");
    REQUIRE(mm != nullptr);
    CHECK(mm->calls == 3);
    CHECK(mm->flops == 3 * 2.0 * 8 * 3 * 5);
    const OpTime* r4 = find_row(rows, "relu", "f32 [4], f32 [4]");
    const OpTime* r85 = find_row(rows, "relu", "f32 [8, 5], f32 [8, 5]");
    REQUIRE((r4 != nullptr && r85 != nullptr));
    CHECK((r4->calls == 1 && r85->calls == 1 && r4->flops == 0));
    double total = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        CHECK(rows[i].seconds >= 0);
        if (i > 0) CHECK(rows[i - 1].seconds >= rows[i].seconds);  // slowest first
        total += rows[i].seconds;
    }
    CHECK(prof.total_seconds() == total);
    prof.clear();
    CHECK(prof.rows().empty());
}

TEST_CASE("the op profiler records only while installed; nesting restores", "[profile]") {
    const Tensor x = random_tensor({6}, DType::f32, 4);
    (void)kernels::unary(kernels::UnaryOp::relu, x);  // none installed: nothing to record into
    Profiler outer;
    {
        Profiler inner;
        REQUIRE(Profiler::active() == &inner);
        (void)kernels::unary(kernels::UnaryOp::relu, x);
        CHECK(inner.rows().size() == 1);
    }
    REQUIRE(Profiler::active() == &outer);
    CHECK(outer.rows().empty());  // the inner one took that call
    (void)kernels::unary(kernels::UnaryOp::exp, x);
    REQUIRE(outer.rows().size() == 1);
    CHECK(outer.rows()[0].name == "exp");
}

TEST_CASE("an op that throws under the profiler leaves it usable", "[profile]") {
    Profiler prof;
    const Tensor idx = from_blob(std::vector<int64_t>{0, 7}.data(), {2},
                                 TensorOptions{.dtype = DType::i64})
                           .clone();
    const Tensor src = random_tensor({3}, DType::f32, 5);
    REQUIRE_THROWS(kernels::index_select(src, 0, idx));  // index 7 is out of range
    (void)kernels::unary(kernels::UnaryOp::relu, src);
    const std::vector<OpTime> rows = prof.rows();
    REQUIRE(find_row(rows, "relu", "f32 [3], f32 [3]") != nullptr);
}

// ---- Ranges, the trace file and the summary (kernels/profile_trace.h) ----

namespace {

using ember::kernels::ProfileRange;
using ember::kernels::Trace;
using ember::kernels::TraceEvent;

TraceEvent span(const std::string& name, const std::string& category, double start, double dur,
                double flops = 0, double bytes = 0) {
    TraceEvent e;
    e.name = name;
    e.category = category;
    e.start_us = start;
    e.dur_us = dur;
    e.flops = flops;
    e.bytes = bytes;
    if (category == "op") {
        e.signature = "f32 [4]";
        e.device = "cpu";
    }
    return e;
}

// The words of the summary line that starts with `first`, after it.
std::vector<std::string> row_tokens(const std::string& summary, const std::string& first) {
    std::istringstream lines(summary);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::string w;
        if (!(words >> w) || w != first) continue;
        std::vector<std::string> out;
        while (words >> w) out.push_back(w);
        return out;
    }
    return {};
}

std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() /
            (name + "." + std::to_string(::getpid())))
        .string();
}

}  // namespace

TEST_CASE("ranges nest around the ops inside them; without a profiler they record nothing",
          "[profile]") {
    const Tensor x = random_tensor({16}, DType::f32, 6);
    { const ProfileRange nothing("step", "step 0"); }  // none installed
    Profiler prof;
    {
        const ProfileRange outer("step", "step 1");
        {
            const ProfileRange inner("optimizer", "AdamW", "optimizer.step: ");
            (void)kernels::unary(kernels::UnaryOp::relu, x);
        }
        (void)kernels::unary(kernels::UnaryOp::exp, x);
    }
    const std::vector<TraceEvent>& ev = prof.events();
    REQUIRE(ev.size() == 4);  // in the order they ended
    CHECK((ev[0].name == "relu" && ev[0].category == "op" && ev[0].device == "cpu"));
    CHECK(ev[0].signature == "f32 [16], f32 [16]");
    CHECK(ev[0].bytes == 2 * 16 * 4);
    CHECK((ev[1].name == "optimizer.step: AdamW" && ev[1].category == "optimizer"));
    CHECK((ev[2].name == "exp" && ev[3].name == "step 1" && ev[3].category == "step"));
    auto inside = [](const TraceEvent& in, const TraceEvent& out) {
        return in.start_us >= out.start_us && in.start_us + in.dur_us <= out.start_us + out.dur_us;
    };
    CHECK(inside(ev[0], ev[1]));
    CHECK(inside(ev[1], ev[3]));
    CHECK(inside(ev[2], ev[3]));
    CHECK(ev[2].start_us >= ev[1].start_us + ev[1].dur_us);
    // Memory: a sample whenever what ember holds changed, each with its peak.
    REQUIRE(!prof.counters().empty());
    CHECK(prof.counters()[0].name == "memory cpu");
    CHECK(prof.counters()[0].values.size() == 2);
}

TEST_CASE("the summary's self times: children come off their parents, rows add up to the step",
          "[profile]") {
    Trace t;
    t.tracks = {"host thread"};
    t.info.limits = {.device = "cpu", .gemm_gflops = 100, .copy_gbps = 10};
    // Two steps of 100 µs. In each: an op of 30 µs (3e6 FLOPs: 100 GFLOP/s,
    // 100 % of the GEMM peak), a range of 40 µs holding an op of 10 µs
    // (1e5 bytes: 10 GB/s), and 30 µs outside both.
    for (int k = 0; k < 2; ++k) {
        const double at = 1000.0 * k;
        t.events.push_back(span("matmul", "op", at + 10, 30, 3e6));
        t.events.push_back(span("relu", "op", at + 60, 10, 0, 1e5));
        t.events.push_back(span("optimizer.step: SGD", "optimizer", at + 50, 40));
        t.events.push_back(span("step " + std::to_string(k + 1), "step", at, 100));
    }
    // Between the steps, not in them: an evaluation's op.
    t.events.push_back(span("matmul", "op", 500, 200, 1));
    const std::string s = kernels::summarize(t);
    INFO(s);
    CHECK(s.find("2 steps (step 1 to step 2), 0.100 ms per step") != std::string::npos);
    CHECK(s.find("ops 40.0 % of the step, named ranges' own time 30.0 %, outside both 30.0 %") !=
          std::string::npos);
    // Columns: kind, calls/step, ms/step, %step, mean us, GFLOP/s, %GEMM, GB/s, %copy.
    // matmul: 1 call per step, 30 µs, at the GEMM peak (the evaluation's call is not counted).
    CHECK(row_tokens(s, "matmul") ==
          std::vector<std::string>{"op", "1.0", "0.030", "30.0", "30.0", "100.0", "100.0%"});
    // relu: 10 GB/s, all of the copy limit.
    CHECK(row_tokens(s, "relu") ==
          std::vector<std::string>{"op", "1.0", "0.010", "10.0", "10.0", "10.0", "100.0%"});
    // The range keeps its own 30 µs, not its 40.
    CHECK(row_tokens(s, "optimizer.step:") ==
          std::vector<std::string>{"SGD", "optimizer", "1.0", "0.030", "30.0", "30.0"});
    CHECK(row_tokens(s, "(outside") ==
          std::vector<std::string>{"every", "op", "and", "range)", "0.030", "30.0"});
    // Without steps, the whole trace is the time.
    Trace no_steps;
    no_steps.tracks = {"host thread"};
    no_steps.events = {span("add", "op", 0, 25), span("mul", "op", 75, 25)};
    const std::string w = kernels::summarize(no_steps);
    INFO(w);
    CHECK(w.find("0.100 ms recorded (no steps marked)") != std::string::npos);
    CHECK(w.find("ops 50.0 % of the time, named ranges' own time 0.0 %, outside both 50.0 %") !=
          std::string::npos);
}

TEST_CASE("a trace file reads back as written; files that are not one are errors", "[profile]") {
    const Tensor a = random_tensor({8, 5}, DType::f32, 7), b = random_tensor({5, 3}, DType::f32, 8);
    Trace t;
    {
        Profiler prof;
        {
            const ProfileRange step("step", "step 1");
            (void)kernels::matmul(a, b);
        }
        t = kernels::take_trace(prof, {.title = "test", .limits = {"cpu", 123.5, 45.25}});
    }
    const std::string path = temp_path("ember_trace.json");
    kernels::write_chrome_trace(t, path);
    const Trace back = kernels::read_chrome_trace(path);
    CHECK(back.info.title == "test");
    CHECK((back.info.limits.device == "cpu" && back.info.limits.gemm_gflops == 123.5 &&
           back.info.limits.copy_gbps == 45.25));
    CHECK(back.tracks == t.tracks);
    REQUIRE(back.events.size() == t.events.size());
    for (size_t i = 0; i < t.events.size(); ++i) {
        const TraceEvent &x = t.events[i], &y = back.events[i];
        CHECK((x.name == y.name && x.category == y.category && x.signature == y.signature &&
               x.device == y.device && x.flops == y.flops && x.bytes == y.bytes && x.track == y.track));
        CHECK(std::abs(x.start_us - y.start_us) <= 1e-3);  // to the nanosecond
        CHECK(std::abs(x.dur_us - y.dur_us) <= 1e-3);
    }
    CHECK(back.counters.size() == t.counters.size());

    auto write = [&](const std::string& text) {
        std::ofstream(path, std::ios::trunc) << text;
        return path;
    };
    CHECK_THROWS_WITH(kernels::read_chrome_trace(write("{not json")), Catch::Contains("not valid JSON"));
    CHECK_THROWS_WITH(kernels::read_chrome_trace(write("[1, 2]")), Catch::Contains("not a JSON object"));
    CHECK_THROWS_WITH(kernels::read_chrome_trace(write("{\"events\": []}")),
                      Catch::Contains("no 'traceEvents' array"));
    CHECK_THROWS_WITH(kernels::read_chrome_trace(write(R"({"traceEvents": [{"ph": "X", "name": "a",
                      "dur": 1, "tid": 1}]})")),
                      Catch::Contains("traceEvents[0] has no numeric 'ts'"));
    CHECK_THROWS_WITH(kernels::read_chrome_trace(write(R"({"traceEvents": [{"ph": "X", "name": "a",
                      "ts": 0, "dur": 1, "tid": 99999999999}]})")),
                      Catch::Contains("has tid 99999999999"));
    CHECK_THROWS_WITH(kernels::read_chrome_trace(write(R"({"traceEvents": [{"ph": "X", "name": "a",
                      "ts": 0, "dur": -1, "tid": 1}]})")),
                      Catch::Contains("negative duration"));
    CHECK_THROWS_WITH(kernels::read_chrome_trace(write(R"({"traceEvents": [7]})")),
                      Catch::Contains("traceEvents[0] is not an object"));
    std::filesystem::remove(path);
    CHECK_THROWS_WITH(kernels::read_chrome_trace(path), Catch::Contains("cannot open"));
}

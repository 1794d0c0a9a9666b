// `ember bench`'s report: each row's spread, the load line, and rows above a
// limit that bounds them marked unreliable with the load; the Timing a row's
// spread comes from (computed from given run times: no test here reads a clock).
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "bench/bench.h"

using namespace ember::bench;

namespace {
std::string table(const Report& r) {
    std::FILE* f = std::tmpfile();
    REQUIRE(f != nullptr);
    r.print_table(f);
    std::rewind(f);
    std::string out;
    for (int c; (c = std::fgetc(f)) != EOF;) out += char(c);
    std::fclose(f);
    return out;
}

// The line of the row whose kernel is `kernel`.
std::string line_of(const std::string& text, const std::string& kernel) {
    const size_t at = text.find(" " + kernel + " ");
    REQUIRE(at != std::string::npos);
    const size_t start = text.rfind('\n', at) + 1;
    return text.substr(start, text.find('\n', at) - start);
}
}  // namespace

TEST_CASE("bench report: spread, load and unreliable rows", "[bench]") {
    Report rep;
    rep.load = "1.0 of 2 cores busy with other processes, so 1 OpenMP thread(s)";
    rep.add({"copy", "fast", "[8]", 1.0, 10, -1, 0.8, "copy 12.5 GB/s"}, Timing{1.0, 0.25});
    Row bounded{"train", "step", "[8]", 2.0, -1, 5, 1.3, "GEMMs alone 2.6 ms"};
    bounded.bound = true;
    rep.add(bounded, Timing{2.0, 0.5});
    rep.add({"matmul", "ours", "[8]", 3.0, -1, 9, 1.25, "Eigen 7.2 GFLOP/s"});
    const std::string t = table(rep);
    CHECK(t.rfind("# CPU load at the start: 1.0 of 2 cores busy with other processes, so 1 OpenMP "
                  "thread(s)\n", 0) == 0);
    const std::string fast = line_of(t, "fast"), step = line_of(t, "step"), ours = line_of(t, "ours");
    CHECK(fast.find(" 25% ") != std::string::npos);
    CHECK(fast.find("UNRELIABLE") == std::string::npos);
    CHECK(step.find(" 50% ") != std::string::npos);
    CHECK(step.find("UNRELIABLE: above its limit (1.0 of 2 cores busy with other processes") !=
          std::string::npos);
    CHECK(ours.find("UNRELIABLE") == std::string::npos);  // a peer may be beaten, not a bound
    CHECK(ours.find("      - ") != std::string::npos);     // no spread measured
}

TEST_CASE("bench report: the median and the range over it", "[bench]") {
    // The summary of given run times: no clock involved.
    const Timing t = timing_of({2.0, 6.0, 2.0});
    CHECK(t.ms == 2.0);
    CHECK(t.spread == 2.0);  // (6 − 2) / 2
    CHECK(double(t) == t.ms);
    CHECK(timing_of({5.0}).spread == 0.0);
    CHECK(timing_of({3.0, 1.0, 4.0, 1.0, 5.0}).ms == 3.0);
    CHECK(timing_of({0.0, 0.0}).spread == 0.0);  // no division by a zero median
    // median_ms runs the warm-up, then the timed calls, and times each one.
    int calls = 0;
    const Timing m = median_ms([&] { ++calls; }, 2, 3);
    CHECK(calls == 5);
    CHECK(m.ms >= 0.0);
}

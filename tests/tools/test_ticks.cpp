// Axis arithmetic of the charts: nice steps, ticks that cover the data,
// decades on log axes, labels, and the data-to-pixel map.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "train/ticks.h"

using namespace ember::train;

namespace {

// m × 10^e with m in {1, 2, 5}, up to rounding.
bool is_nice(double step) {
    const double m = step / std::pow(10.0, std::floor(std::log10(step) + 1e-9));
    return std::abs(m - 1) < 1e-9 || std::abs(m - 2) < 1e-9 || std::abs(m - 5) < 1e-9;
}

}  // namespace

TEST_CASE("nice_step is the smallest 1, 2 or 5 × 10^k at or above the raw step", "[ticks]") {
    CHECK(nice_step(1) == 1);
    CHECK(nice_step(0.13) == Approx(0.2));
    CHECK(nice_step(0.2) == Approx(0.2));  // 0.2 / 0.1 rounds above 2: must stay 0.2
    CHECK(nice_step(0.21) == Approx(0.5));
    CHECK(nice_step(0.6) == Approx(1));
    CHECK(nice_step(7) == Approx(10));
    CHECK(nice_step(3e-5) == Approx(5e-5));
    CHECK(nice_step(1.2e7) == Approx(2e7));
}

TEST_CASE("linear ticks are nice, evenly spaced and cover the data", "[ticks]") {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> exponent(-8, 8), unit(-1, 1);
    for (int trial = 0; trial < 2000; ++trial) {
        const double scale = std::pow(10.0, exponent(rng));
        double lo = unit(rng) * scale, hi = unit(rng) * scale;
        if (lo > hi) std::swap(lo, hi);
        const Ticks t = linear_ticks(lo, hi);
        INFO("data [" << lo << ", " << hi << "] -> axis [" << t.lo << ", " << t.hi << "] step "
                      << t.step);
        REQUIRE(t.major.size() == t.labels.size());
        CHECK(t.major.size() >= 3);
        CHECK(t.major.size() <= 8);
        CHECK(is_nice(t.step));
        CHECK(t.lo <= lo);
        CHECK(t.hi >= hi);
        CHECK(t.major.front() == t.lo);
        CHECK(t.major.back() == t.hi);
        for (size_t i = 1; i < t.major.size(); ++i)
            CHECK(t.major[i] - t.major[i - 1] == Approx(t.step).epsilon(1e-9));
        for (double v : t.major) CHECK(std::abs(v / t.step - std::round(v / t.step)) < 1e-6);
    }
}

TEST_CASE("linear ticks: exact values and their labels", "[ticks]") {
    Ticks t = linear_ticks(0.53, 2.3);
    CHECK(t.major == std::vector<double>{0.5, 1, 1.5, 2, 2.5});
    CHECK(t.labels == std::vector<std::string>{"0.5", "1.0", "1.5", "2.0", "2.5"});

    // Each tick in one rounding: 0.6 itself, not 3 × 0.2.
    t = linear_ticks(0.6, 1.4);
    CHECK(t.major == std::vector<double>{0.6, 0.8, 1.0, 1.2, 1.4});
    CHECK(t.labels == std::vector<std::string>{"0.6", "0.8", "1.0", "1.2", "1.4"});

    t = linear_ticks(-30, 470);
    CHECK(t.major == std::vector<double>{-100, 0, 100, 200, 300, 400, 500});
    CHECK(t.labels.front() == "-100");

    // Learning rates: fixed decimals down to 1e-4, scientific below.
    CHECK(linear_ticks(0, 1e-3).labels ==
          std::vector<std::string>{"0.0000", "0.0002", "0.0004", "0.0006", "0.0008", "0.0010"});
    CHECK(linear_ticks(0, 1e-4).labels ==
          std::vector<std::string>{"0", "2e-5", "4e-5", "6e-5", "8e-5", "1.0e-4"});
    CHECK(linear_ticks(0, 2e6).labels ==
          std::vector<std::string>{"0", "5e5", "1.0e6", "1.5e6", "2.0e6"});
}

TEST_CASE("linear ticks: fixed ranges, one value, no data", "[ticks]") {
    // Fixed: the range stays, the ticks are the multiples inside it.
    Ticks t = linear_ticks(0.05, 0.95, false);
    CHECK(t.lo == 0.05);
    CHECK(t.hi == 0.95);
    CHECK(t.major == std::vector<double>{0.2, 0.4, 0.6, 0.8});

    t = linear_ticks(3, 3);  // widened around the value
    CHECK(t.lo < 3);
    CHECK(t.hi > 3);
    CHECK(t.major.size() >= 3);
    t = linear_ticks(0, 0);
    CHECK(t.lo < 0);
    CHECK(t.hi > 0);

    t = linear_ticks(NAN, 1);
    CHECK(t.lo == 0);
    CHECK(t.hi == 1);
    t = linear_ticks(-INFINITY, INFINITY);
    CHECK(t.lo == 0);
    CHECK(t.hi == 1);
    t = linear_ticks(5, 1);  // reversed
    CHECK(t.lo <= 1);
    CHECK(t.hi >= 5);
}

TEST_CASE("log ticks sit on the decades that cover the data", "[ticks]") {
    Ticks t = log_ticks(3, 700);
    CHECK(t.lo == 1);
    CHECK(t.hi == 1000);
    CHECK(t.major == std::vector<double>{1, 10, 100, 1000});
    CHECK(t.labels == std::vector<std::string>{"1", "10", "100", "1000"});
    // Minor ticks 2..9 × each decade, inside the range.
    CHECK(t.minor.size() == 3 * 8);
    CHECK(t.minor.front() == 2);
    CHECK(t.minor.back() == 900);

    t = log_ticks(2e-4, 0.03);
    CHECK(t.labels == std::vector<std::string>{"1e-4", "0.001", "0.01", "0.1"});

    // Many decades: every other one is labelled, and no minor ticks.
    t = log_ticks(1e-6, 1e3);
    CHECK(t.labels == std::vector<std::string>{"1e-6", "1e-4", "0.01", "1", "100"});
    CHECK(t.minor.empty());

    // A fixed range inside one decade is labelled linearly.
    t = log_ticks(2, 8, false);
    CHECK(t.major == std::vector<double>{2, 4, 6, 8});

    // Nothing placeable on a log axis: a default decade.
    t = log_ticks(-1, 0);
    CHECK(t.lo == 1);
    CHECK(t.hi == 10);
}

TEST_CASE("AxisMap maps linear and log10 values to pixels", "[ticks]") {
    const AxisMap x{Scale::linear, 0, 10, 100, 600};
    CHECK(x(0) == 100);
    CHECK(x(10) == 600);
    CHECK(x(2.5) == 225);
    const AxisMap y{Scale::linear, 0, 1, 400, 50};  // a y axis grows upwards
    CHECK(y(0) == 400);
    CHECK(y(0.25) == Approx(312.5));
    const AxisMap lx{Scale::log10, 1, 1000, 0, 300};
    CHECK(lx(10) == Approx(100));
    CHECK(lx(100) == Approx(200));
    CHECK(lx(std::sqrt(10.0)) == Approx(50));
    CHECK(lx.placeable(1e-9));
    CHECK_FALSE(lx.placeable(0));
    CHECK_FALSE(lx.placeable(-1));
    CHECK_FALSE(x.placeable(NAN));
    CHECK_FALSE(x.placeable(INFINITY));
    CHECK(x.placeable(-1));
}

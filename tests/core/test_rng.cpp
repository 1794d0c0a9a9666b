// The Philox stream contract (docs/rng.md): Random123's published
// known-answer vectors, element-to-block mapping derived from them, golden
// values, independence from thread count, and state save/restore.
#include "support/support.h"

#include <omp.h>

#include <cmath>

#include "core/philox.h"

using namespace ember;

TEST_CASE("Philox4x32-10 matches Random123's known-answer vectors", "[rng]") {
    const Philox4 a = philox4x32_10(0, 0, 0, 0, 0, 0);
    CHECK(a.x[0] == 0x6627e8d5u);
    CHECK(a.x[1] == 0xe169c58du);
    CHECK(a.x[2] == 0xbc57ac4cu);
    CHECK(a.x[3] == 0x9b00dbd8u);
    const uint32_t f = 0xffffffffu;
    const Philox4 b = philox4x32_10(f, f, f, f, f, f);
    CHECK(b.x[0] == 0x408f276du);
    CHECK(b.x[1] == 0x41c83b0eu);
    CHECK(b.x[2] == 0xa20bc7c6u);
    CHECK(b.x[3] == 0x6d5451fdu);
    const Philox4 c =
        philox4x32_10(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u);
    CHECK(c.x[0] == 0xd16cfe09u);
    CHECK(c.x[1] == 0x94fdccebu);
    CHECK(c.x[2] == 0x5001e420u);
    CHECK(c.x[3] == 0x24126ea1u);
}

TEST_CASE("rand: element i is word i%4 of block i/4 (seed 0 gives the KAT words)", "[rng]") {
    Generator g(0);
    const std::vector<float> v = rand({4}, {}, &g).to_vector<float>();
    const uint32_t words[4] = {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u};
    for (int i = 0; i < 4; ++i) CHECK(v[size_t(i)] == float(words[i] >> 8) / 16777216.0f);
    CHECK(g.state().offset == 1);
    // The next draw starts at block 1: counter (1, 0, 0, 0), key (0, 0).
    const std::vector<float> w = rand({5}, {}, &g).to_vector<float>();
    const Philox4 b1 = philox4x32_10(1, 0, 0, 0, 0, 0), b2 = philox4x32_10(2, 0, 0, 0, 0, 0);
    for (int i = 0; i < 4; ++i) CHECK(w[size_t(i)] == float(b1.x[i] >> 8) / 16777216.0f);
    CHECK(w[4] == float(b2.x[0] >> 8) / 16777216.0f);
    CHECK(g.state().offset == 3);
}

TEST_CASE("randn: Box-Muller pairs from one block; f64 uses two words per uniform", "[rng]") {
    Generator g(42);
    const std::vector<double> z = randn({3}, {DType::f64}, &g).to_vector<double>();
    const uint64_t seed = 42;
    for (int i = 0; i < 3; ++i) {
        const Philox4 b = philox_block(seed, uint64_t(i / 2));
        const double u1 = 1.0 - double((uint64_t(b.x[1]) << 32 | b.x[0]) >> 11) / 9007199254740992.0;
        const double u2 = double((uint64_t(b.x[3]) << 32 | b.x[2]) >> 11) / 9007199254740992.0;
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double want = i % 2 == 0 ? r * std::cos(2 * M_PI * u2) : r * std::sin(2 * M_PI * u2);
        CHECK(z[size_t(i)] == Approx(want).epsilon(1e-15));
    }
}

TEST_CASE("golden values pin the stream across releases", "[rng]") {
    // If one of these changes, every seeded run of every user changes: that is
    // a breaking change and must be announced (docs/tips.md #1).
    Generator g(1234);
    const std::vector<float> u = rand({3}, {}, &g).to_vector<float>();
    const std::vector<float> n = randn({2}, {}, &g).to_vector<float>();
    const std::vector<int64_t> k = randint(0, 10, {4}, {DType::i64}, &g).to_vector<int64_t>();
    INFO("u " << u[0] << " " << u[1] << " " << u[2] << " n " << n[0] << " " << n[1] << " k " << k[0]
              << k[1] << k[2] << k[3]);
    CHECK(u == std::vector<float>{0x1.048598p-3f, 0x1.b4f9ep-1f, 0x1.10064p-2f});  // exact
    // Normals go through the math library's log/sin/cos: pinned within a few ulp.
    CHECK(n[0] == Approx(0x1.0f6e4ep+0).epsilon(1e-6));
    CHECK(n[1] == Approx(0x1.ce52eap-1).epsilon(1e-6));
    CHECK(k == std::vector<int64_t>{2, 9, 7, 5});
    CHECK(g.state() == GeneratorState{1234, 3});
    // Distribution sanity on a large draw.
    Generator h(5);
    const std::vector<double> big = randn({200000}, {DType::f64}, &h).to_vector<double>();
    double s = 0, s2 = 0;
    for (double x : big) s += x, s2 += x * x;
    const double mean = s / double(big.size()), var = s2 / double(big.size()) - mean * mean;
    CHECK(std::abs(mean) < 0.01);
    CHECK(std::abs(var - 1.0) < 0.02);
}

TEST_CASE("random draws do not depend on the thread count", "[rng]") {
    const int saved = omp_get_max_threads();
    Generator a(9), b(9);
    omp_set_num_threads(1);
    const std::vector<float> one = randn({100001}, {}, &a).to_vector<float>();
    omp_set_num_threads(std::max(2, saved));
    const std::vector<float> many = randn({100001}, {}, &b).to_vector<float>();
    omp_set_num_threads(saved);
    CHECK(one == many);
}

TEST_CASE("generator state saves and restores", "[rng]") {
    Generator g(77);
    (void)rand({10}, {}, &g);
    const GeneratorState s = g.state();
    const std::vector<float> first = rand({8}, {}, &g).to_vector<float>();
    g.set_state(s);
    CHECK(rand({8}, {}, &g).to_vector<float>() == first);
    g.manual_seed(77);
    CHECK(g.state() == GeneratorState{77, 0});
    manual_seed(3);
    const std::vector<float> d1 = rand({4}).to_vector<float>();
    manual_seed(3);
    CHECK(rand({4}).to_vector<float>() == d1);
}

TEST_CASE("randint covers its range and rejects bad bounds", "[rng]") {
    Generator g(1);
    const std::vector<int64_t> v = randint(-3, 4, {5000}, {DType::i64}, &g).to_vector<int64_t>();
    std::vector<int> count(7, 0);
    for (int64_t x : v) {
        REQUIRE(x >= -3);
        REQUIRE(x < 4);
        ++count[size_t(x + 3)];
    }
    for (int c : count) CHECK(c > 500);
    REQUIRE_THROWS_WITH_MSG(randint(5, 5, {2}), "randint: need low < high");
    REQUIRE_THROWS_WITH_MSG(rand({2}, {DType::i32}), "rand: dtype must be floating");
    // Ranges past 2^32 use 64-bit draws.
    const std::vector<int64_t> w =
        randint(0, int64_t(1) << 40, {1000}, {DType::i64}, &g).to_vector<int64_t>();
    int64_t mx = 0;
    for (int64_t x : w) mx = std::max(mx, x);
    CHECK(mx > (int64_t(1) << 39));
}

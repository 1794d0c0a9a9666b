// Initialization: the layers' PyTorch defaults (Linear and Conv2d uniform in
// ±1/√fan_in, norms at 1 and 0, embeddings N(0, 1)) and the init:: schemes
// (Kaiming, Xavier, gains, fans), checked by bounds and sample statistics.
#include <cmath>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

struct Stats {
    double mean, std, max_abs;
};

Stats stats_of(const Tensor& t) {
    const std::vector<double> v = values(t);
    double m = 0, s = 0, mx = 0;
    for (double x : v) m += x, mx = std::max(mx, std::abs(x));
    m /= double(v.size());
    for (double x : v) s += (x - m) * (x - m);
    return {m, std::sqrt(s / double(v.size() - 1)), mx};
}

// Every element within ±bound, and a uniform's std bound/√3 within 2%
// (with n ≥ 100,000 the sample std is off by about 0.3% at one sigma).
void check_uniform(const Tensor& t, double bound, bool check_std) {
    const Stats s = stats_of(t);
    INFO("bound " << bound << " mean " << s.mean << " std " << s.std << " max " << s.max_abs);
    CHECK(s.max_abs <= bound);
    CHECK(s.max_abs > 0.9 * bound);  // fills the range, not a narrower one
    if (check_std) {
        CHECK(s.std == Approx(bound / std::sqrt(3.0)).epsilon(0.02));
        CHECK(std::abs(s.mean) < 0.02 * bound);
    }
}

}  // namespace

TEST_CASE("init: Linear and Conv2d default to U(±1/√fan_in)", "[nn][init]") {
    manual_seed(70);
    nn::Linear lin(400, 300);
    const double lb = 1 / std::sqrt(400.0);
    check_uniform(lin.weight, lb, true);
    check_uniform(lin.bias, lb, false);

    nn::Conv2d conv(32, 64, 5);  // fan_in = 32·5·5 = 800, 51,200 weights
    const double cb = 1 / std::sqrt(800.0);
    check_uniform(conv.weight, cb, true);
    check_uniform(conv.bias, cb, false);

    nn::Conv2d grouped(8, 8, 3, {.groups = 4});  // fan_in = 2·3·3
    CHECK(stats_of(grouped.weight).max_abs <= 1 / std::sqrt(18.0));
    CHECK(stats_of(grouped.weight).max_abs > 0.7 / std::sqrt(18.0));

    nn::Linear lin64(400, 300, {.dtype = DType::f64});
    check_uniform(lin64.weight, lb, true);
    CHECK(lin64.weight.dtype() == DType::f64);
}

TEST_CASE("init: norms start at weight 1, bias 0; Embedding at N(0, 1)", "[nn][init]") {
    nn::BatchNorm2d bn(5);
    CHECK(values(bn.weight) == std::vector<double>(5, 1.0));
    CHECK(values(bn.bias) == std::vector<double>(5, 0.0));
    nn::LayerNorm ln({3, 2});
    CHECK(values(ln.weight) == std::vector<double>(6, 1.0));
    CHECK(values(ln.bias) == std::vector<double>(6, 0.0));
    nn::Embedding emb(1000, 100);
    const Stats s = stats_of(emb.weight);
    CHECK(s.std == Approx(1.0).epsilon(0.02));
    CHECK(std::abs(s.mean) < 0.02);
}

TEST_CASE("init: gains and fans", "[nn][init]") {
    using nn::init::Nonlinearity;
    CHECK(nn::init::calculate_gain(Nonlinearity::linear) == 1.0);
    CHECK(nn::init::calculate_gain(Nonlinearity::sigmoid) == 1.0);
    CHECK(nn::init::calculate_gain(Nonlinearity::relu) == Approx(std::sqrt(2.0)));
    CHECK(nn::init::calculate_gain(Nonlinearity::tanh) == Approx(5.0 / 3.0));
    CHECK(nn::init::calculate_gain(Nonlinearity::leaky_relu, 0.2) == Approx(std::sqrt(2.0 / 1.04)));
    CHECK(nn::init::fans(empty({7, 3})) == std::pair<int64_t, int64_t>{3, 7});
    CHECK(nn::init::fans(empty({16, 4, 3, 5})) == std::pair<int64_t, int64_t>{60, 240});
    REQUIRE_THROWS_WITH_MSG(nn::init::fans(empty({7})),
                            "init: fan in/out need a weight with at least 2 dims, got [7]");
}

TEST_CASE("init: Kaiming and Xavier", "[nn][init]") {
    using nn::init::FanMode;
    using nn::init::Nonlinearity;
    Generator gen(71);
    const Tensor w = empty({256, 512});  // fan_in 512, fan_out 256

    nn::init::kaiming_normal_(w, 0, FanMode::fan_in, Nonlinearity::relu, &gen);
    Stats s = stats_of(w);
    CHECK(s.std == Approx(std::sqrt(2.0) / std::sqrt(512.0)).epsilon(0.02));
    CHECK(std::abs(s.mean) < 0.02 * s.std);
    nn::init::kaiming_normal_(w, 0, FanMode::fan_out, Nonlinearity::relu, &gen);
    CHECK(stats_of(w).std == Approx(std::sqrt(2.0) / std::sqrt(256.0)).epsilon(0.02));

    // Default a = 0 with leaky_relu: gain √2, bound √2·√(3/fan_in).
    nn::init::kaiming_uniform_(w, 0, FanMode::fan_in, Nonlinearity::leaky_relu, &gen);
    check_uniform(w, std::sqrt(6.0 / 512.0), true);

    nn::init::xavier_uniform_(w, 1.0, &gen);
    check_uniform(w, std::sqrt(6.0 / (512.0 + 256.0)), true);
    nn::init::xavier_uniform_(w, 2.0, &gen);
    check_uniform(w, 2.0 * std::sqrt(6.0 / (512.0 + 256.0)), true);
    nn::init::xavier_normal_(w, 1.0, &gen);
    CHECK(stats_of(w).std == Approx(std::sqrt(2.0 / 768.0)).epsilon(0.02));

    // A conv weight's fans include the receptive field.
    const Tensor cw = empty({64, 32, 3, 3}, {.dtype = DType::f64});
    nn::init::kaiming_normal_(cw, 0, FanMode::fan_in, Nonlinearity::relu, &gen);
    CHECK(stats_of(cw).std == Approx(std::sqrt(2.0 / 288.0)).epsilon(0.02));

    // Seeded: the same generator state gives the same values.
    Generator g1(5), g2(5);
    const Tensor a = empty({10, 10}), b = empty({10, 10});
    nn::init::xavier_uniform_(a, 1.0, &g1);
    nn::init::xavier_uniform_(b, 1.0, &g2);
    CHECK(values(a) == values(b));

    // Initializing a parameter that requires grad records nothing.
    nn::Linear lin(3, 2);
    nn::init::constant_(lin.weight, 0.5);
    nn::init::zeros_(lin.bias);
    CHECK(values(lin.weight) == std::vector<double>(6, 0.5));
    CHECK(values(lin.bias) == std::vector<double>(2, 0.0));
    CHECK(lin.weight.is_leaf());
    nn::init::ones_(lin.bias);
    CHECK(values(lin.bias) == std::vector<double>(2, 1.0));
}

// The divergence guard (train/divergence.h) on planted windows: a NaN or
// infinite loss, a non-finite gradient norm with finite losses, skips in a
// row and the counter's reset, the f16 scale floor, `continue`, the first
// non-finite parameter named, and the loss-spike test.
#include <cmath>

#include "nn/layers.h"
#include "support/support.h"
#include "train/divergence.h"

using namespace ember;
using namespace ember::train;

namespace {

Tensor scalar(double v) { return full({}, v); }
Tensor identity(Tensor t) { return t; }

TrainConfig config(const std::string& policy, int64_t max_skips = 3) {
    TrainConfig c;
    c.on_nonfinite = policy;
    c.max_skips = max_skips;
    return c;
}

}  // namespace

TEST_CASE("divergence: a non-finite loss is found at its step, with the LR", "[train]") {
    nn::Linear model(3, 2);
    for (const double bad : {double(NAN), double(INFINITY), -double(INFINITY)}) {
        INFO("bad loss " << bad);
        DivergenceGuard g(config("stop"), Device::cpu(), false);
        for (int64_t step = 1; step <= 5; ++step) {
            g.add_loss(step, scalar(step == 4 ? bad : 2.0 + 0.1 * double(step)));
            g.add_loss(step, scalar(1.0));  // a second micro-batch
            CHECK_FALSE(g.observe_step(step, Tensor(), 0.01 * double(step)).defined());
        }
        const DivergenceGuard::Window w = g.read(model, Tensor(), identity);
        REQUIRE(w.divergence);
        CHECK(w.divergence->step == 4);
        CHECK(w.divergence->lr == Approx(0.04));
        CHECK_FALSE(std::isfinite(w.divergence->loss));
        CHECK(w.divergence->reason == "the loss is not finite");
        CHECK(w.divergence->parameter.empty());  // the model is still finite
        CHECK(w.divergence->message().find("diverged at step 4: the loss is not finite") !=
              std::string::npos);
    }
    // A finite window: its summed loss, and no divergence.
    DivergenceGuard g(config("stop"), Device::cpu(), false);
    for (int64_t step = 1; step <= 3; ++step) {
        g.add_loss(step, scalar(double(step)));
        g.observe_step(step, scalar(5.0), 0.1);
    }
    const DivergenceGuard::Window w = g.read(model, Tensor(), identity);
    CHECK_FALSE(w.divergence);
    CHECK(w.loss_sum == 6.0);
    // After next_window the sums start again.
    g.next_window();
    g.add_loss(4, scalar(0.5));
    CHECK(g.read(model, Tensor(), identity).loss_sum == 0.5);
}

TEST_CASE("divergence: a non-finite gradient norm with finite losses, and the parameter named",
          "[train]") {
    nn::Linear model(3, 2);
    const auto named = model.named_parameters();
    Tensor bias = named[1].second;
    bias.set({1}, NAN);
    DivergenceGuard g(config("stop"), Device::cpu(), false);
    for (int64_t step = 1; step <= 4; ++step) {
        g.add_loss(step, scalar(1.0));
        g.observe_step(step, scalar(step == 3 ? INFINITY : 1.0), 0.5);
    }
    const DivergenceGuard::Window w = g.read(model, Tensor(), identity);
    REQUIRE(w.divergence);
    CHECK(w.divergence->step == 3);
    CHECK(w.divergence->reason == "the gradient norm is not finite");
    CHECK(w.divergence->parameter == named[1].first);
    // continue: never.
    DivergenceGuard c(config("continue"), Device::cpu(), false);
    c.add_loss(1, scalar(NAN));
    CHECK_FALSE(c.observe_step(1, scalar(NAN), 0.5).defined());
    CHECK_FALSE(c.read(model, Tensor(), identity).divergence);
}

TEST_CASE("divergence: skip flags non-finite norms and stops after max_skips in a row", "[train]") {
    nn::Linear model(3, 2);
    DivergenceGuard g(config("skip", 3), Device::cpu(), false);
    CHECK(g.needs_norm());
    // bad, bad, good, bad, bad: never 3 in a row.
    const char* pattern = "bbgbb";
    for (int64_t step = 1; step <= 5; ++step) {
        const bool bad = pattern[step - 1] == 'b';
        g.add_loss(step, scalar(1.0));
        const Tensor flag = g.observe_step(step, scalar(bad ? NAN : 2.0), 0.1);
        REQUIRE(flag.defined());
        CHECK(flag.dtype() == DType::f32);
        CHECK(flag.numel() == 1);
        CHECK(flag.reshape({}).item() == (bad ? 1.0 : 0.0));
    }
    CHECK_FALSE(g.read(model, Tensor(), identity).divergence);
    g.next_window();  // the count of skips in a row carries over windows
    g.add_loss(6, scalar(1.0));
    g.observe_step(6, scalar(NAN), 0.1);
    const DivergenceGuard::Window w = g.read(model, Tensor(), identity);
    REQUIRE(w.divergence);
    CHECK(w.divergence->reason.find("3 steps in a row") != std::string::npos);
}

TEST_CASE("divergence: under f16 loss scaling only a scale below 1 stops the run", "[train]") {
    nn::Linear model(3, 2);
    DivergenceGuard g(config("stop"), Device::cpu(), true);
    CHECK_FALSE(g.needs_norm());
    g.add_loss(1, scalar(INFINITY));  // the scaler's to skip
    CHECK_FALSE(g.observe_step(1, Tensor(), NAN).defined());
    CHECK_FALSE(g.read(model, full({1}, 2.0), identity).divergence);
    const DivergenceGuard::Window w = g.read(model, full({1}, 0.5), identity);
    REQUIRE(w.divergence);
    CHECK(w.divergence->reason.find("the loss scale fell to 0.5") != std::string::npos);
    CHECK(w.divergence->message().find(", lr") == std::string::npos);  // not known: not printed
}

TEST_CASE("divergence: a loss spike is 10x the median of the recent logged losses", "[train]") {
    DivergenceGuard g(config("stop"), Device::cpu(), false);
    CHECK_FALSE(g.spike(10, 100.0));  // fewer than 3 before: no verdict
    CHECK_FALSE(g.spike(20, 2.0));
    CHECK_FALSE(g.spike(30, 2.2));
    CHECK_FALSE(g.spike(40, 1.9));    // median of {100, 2, 2.2} is 2.2
    CHECK_FALSE(g.spike(50, 20.0));   // median of {100, 2, 2.2, 1.9} (upper) is 2.2: 9.1x
    const std::optional<Spike> s = g.spike(60, 30.0);  // median 2.2: 13.6x
    REQUIRE(s);
    CHECK(s->step == 60);
    CHECK(s->median == 2.2);
    CHECK(s->message() == "step 60: the loss 30 is 13.64x the median of the last logged losses (2.2)");
}

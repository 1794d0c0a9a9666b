// LR schedules: whole LR and momentum sequences, as the optimizer receives
// them, against PyTorch's documented formulas written out here in f64 (not
// by calling the library); fixed points the formulas must hit; skipped steps;
// the state round trip; bad arguments.
#include <cmath>

#include "optim/optim.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr double kPi = 3.14159265358979323846;

/// Groups of one small parameter each, with these LRs.
std::vector<optim::GroupSpec> groups(const std::vector<double>& lrs) {
    std::vector<optim::GroupSpec> out;
    for (size_t i = 0; i < lrs.size(); ++i)
        out.push_back({{random_tensor({3}, DType::f32, 40 + i).set_requires_grad(true)}, lrs[i]});
    return out;
}

struct Seq {
    std::vector<double> lr, momentum;
};

/// What the optimizer's group `g` holds at construction and after each of
/// `n` applied steps, and that lr_at and lr() agree with it.
Seq run(optim::Schedule& s, int64_t n, size_t g = 0) {
    Seq out;
    optim::Optimizer& opt = s.optimizer();
    for (int64_t t = 0; t <= n; ++t) {
        if (t > 0) s.step();
        REQUIRE(s.steps() == t);
        out.lr.push_back(opt.lr(g));
        out.momentum.push_back(opt.momentum(g));
        CHECK(s.lr(g) == opt.lr(g));
        CHECK(s.lr_at(t, g) == opt.lr(g));
        // The LR the last step used: the one the optimizer held before it.
        CHECK(s.last_lr(g) == (t == 0 ? opt.lr(g) : out.lr[size_t(t) - 1]));
    }
    return out;
}

/// Elementwise within a relative 1e-12 (the library evaluates the same math
/// in another order); names the first step that differs.
void check_seq(const std::vector<double>& actual, const std::vector<double>& expected) {
    REQUIRE(actual.size() == expected.size());
    for (size_t t = 0; t < actual.size(); ++t) {
        INFO("step " << t << ": got " << actual[t] << ", expected " << expected[t]);
        REQUIRE(std::abs(actual[t] - expected[t]) <= 1e-12 * std::abs(expected[t]) + 1e-18);
    }
}

// PyTorch's OneCycleLR, phase by phase: "cos" anneals start → end as
// end + (start − end)/2·(1 + cos(π·pct)), "linear" as start + (end − start)·pct.
double anneal(bool cos, double start, double end, double pct) {
    return cos ? end + (start - end) / 2 * (1 + std::cos(kPi * pct)) : start + (end - start) * pct;
}

// The LR (which = 0) or the momentum (which = 1) of OneCycle at step t.
double one_cycle(int which, int64_t t, double max_lr, int64_t total, double pct_start, bool cos,
                 bool three, double base_m = 0.85, double max_m = 0.95) {
    const double lo = max_lr / 25, hi = max_lr, end = lo / 1e4;
    const double up = pct_start * double(total) - 1;  // the step where the LR peaks
    const double x = double(std::min(t, total - 1));  // ember holds the last value at t = total
    if (!three) {
        if (x <= up)
            return which == 0 ? anneal(cos, lo, hi, x / up) : anneal(cos, max_m, base_m, x / up);
        const double pct = (x - up) / (double(total) - 1 - up);
        return which == 0 ? anneal(cos, hi, end, pct) : anneal(cos, base_m, max_m, pct);
    }
    const double down = 2 * pct_start * double(total) - 2;
    if (x <= up) return which == 0 ? anneal(cos, lo, hi, x / up) : anneal(cos, max_m, base_m, x / up);
    if (x <= down) {
        const double pct = (x - up) / (down - up);
        return which == 0 ? anneal(cos, hi, lo, pct) : anneal(cos, base_m, max_m, pct);
    }
    return which == 0 ? anneal(cos, lo, end, (x - down) / (double(total) - 1 - down)) : max_m;
}

}  // namespace

TEST_CASE("schedule: OneCycle follows OneCycleLR, LR and momentum", "[optim][schedule]") {
    for (bool cos : {true, false})
        for (bool three : {false, true}) {
            INFO((cos ? "cos" : "linear") << (three ? ", three phases" : ", two phases"));
            for (size_t g = 0; g < 2; ++g) {
                const double max_lr = g == 0 ? 0.1 : 0.02;
                optim::SGD opt(groups({0.5, 0.5}), {.lr = 0.5, .momentum = 0.5});
                optim::OneCycle s(opt, {.max_lr = {0.1, 0.02},
                                        .total_steps = 40,
                                        .anneal = cos ? optim::Anneal::cos : optim::Anneal::linear,
                                        .three_phase = three});
                const Seq seq = run(s, 40, g);
                std::vector<double> lr, m;
                for (int64_t t = 0; t <= 40; ++t) {
                    lr.push_back(one_cycle(0, t, max_lr, 40, 0.3, cos, three));
                    m.push_back(one_cycle(1, t, max_lr, 40, 0.3, cos, three));
                }
                check_seq(seq.lr, lr);
                check_seq(seq.momentum, m);
                // The fixed points: start, peak (step 0.3·40 − 1 = 11), end.
                CHECK(seq.lr[0] == Approx(max_lr / 25).epsilon(1e-14));
                CHECK(seq.lr[11] == Approx(max_lr).epsilon(1e-14));
                CHECK(seq.lr[39] == Approx(max_lr / 25 / 1e4).margin(1e-16));  // linear: (min − max)·1 + max
                CHECK(seq.momentum[0] == Approx(0.95).epsilon(1e-14));
                CHECK(seq.momentum[11] == Approx(0.85).epsilon(1e-14));
                CHECK(seq.lr[40] == seq.lr[39]);
                if (three) CHECK(seq.lr[22] == Approx(max_lr / 25).epsilon(1e-14));
            }
        }
}

TEST_CASE("schedule: OneCycle cycles Adam's beta1, or leaves it", "[optim][schedule]") {
    {
        optim::AdamW opt(groups({1e-3}), {.beta1 = 0.9});
        optim::OneCycle s(opt, {.max_lr = 0.01, .total_steps = 10, .base_momentum = 0.8,
                                .max_momentum = 0.9});
        for (int64_t t = 0; t <= 10; ++t) {
            if (t > 0) s.step();
            CHECK(opt.options(0).beta1 ==
                  Approx(one_cycle(1, t, 0.01, 10, 0.3, true, false, 0.8, 0.9)).epsilon(1e-13));
            CHECK(opt.options(0).beta2 == 0.999);
        }
    }
    optim::SGD opt(groups({0.1}), {.lr = 0.1, .momentum = 0.7});
    optim::OneCycle s(opt, {.max_lr = 0.1, .total_steps = 10, .cycle_momentum = false});
    for (int i = 0; i < 10; ++i) s.step();
    CHECK(opt.options(0).momentum == 0.7);
    CHECK_FALSE(s.momentum_at(3, 0).has_value());
}

TEST_CASE("schedule: Cyclic follows CyclicLR in its three modes", "[optim][schedule]") {
    // Up 4 steps, down 6: a cycle of 10. Written by position in the cycle.
    const double base = 0.01, max = 0.11, gamma = 0.97;
    for (optim::CyclicMode mode : {optim::CyclicMode::triangular, optim::CyclicMode::triangular2,
                                   optim::CyclicMode::exp_range}) {
        INFO("mode " << int(mode));
        optim::SGD opt(groups({0.5}), {.lr = 0.5, .momentum = 0.5});
        optim::Cyclic s(opt, {.base_lr = base, .max_lr = max, .step_size_up = 4,
                              .step_size_down = 6, .mode = mode, .gamma = gamma});
        const Seq seq = run(s, 35);
        std::vector<double> lr, m;
        for (int64_t t = 0; t <= 35; ++t) {
            const int64_t k = t / 10, p = t % 10;
            const double rise = p <= 4 ? p / 4.0 : (10 - p) / 6.0;
            const double f = mode == optim::CyclicMode::triangular    ? 1.0
                             : mode == optim::CyclicMode::triangular2 ? std::pow(0.5, double(k))
                                                                      : std::pow(gamma, double(t));
            lr.push_back(base + (max - base) * rise * f);
            m.push_back(0.9 - (0.9 - 0.8) * rise * f);
        }
        check_seq(seq.lr, lr);
        check_seq(seq.momentum, m);
        CHECK(seq.lr[0] == base);
        if (mode == optim::CyclicMode::triangular) CHECK(seq.lr[24] == Approx(max).epsilon(1e-14));
    }
    // step_size_down defaults to step_size_up.
    optim::SGD opt(groups({0.5}), {.lr = 0.5});
    optim::Cyclic s(opt, {.base_lr = 0.0, .max_lr = 1.0, .step_size_up = 2, .cycle_momentum = false});
    check_seq(run(s, 5).lr, {0, 0.5, 1, 0.5, 0, 0.5});
}

TEST_CASE("schedule: CosineWarmRestarts follows SGDR", "[optim][schedule]") {
    // Restarts after 5 steps, then 5·2 = 10 more (step 15), then 20 (step 35).
    struct Case {
        int64_t t_mult;
        std::vector<int64_t> restarts;
    };
    for (const Case& c : {Case{2, {0, 5, 15, 35}}, Case{1, {0, 5, 10, 15, 20, 25, 30, 35, 40}}}) {
        INFO("t_mult " << c.t_mult);
        optim::SGD opt(groups({0.2}), {.lr = 0.2});
        optim::CosineWarmRestarts s(opt, {.t_0 = 5, .t_mult = c.t_mult, .eta_min = 0.01});
        const Seq seq = run(s, 40);
        std::vector<double> lr;
        for (int64_t t = 0; t <= 40; ++t) {
            size_t k = 0;
            while (k + 1 < c.restarts.size() && c.restarts[k + 1] <= t) ++k;
            const double len = 5 * std::pow(double(c.t_mult), double(k));
            const double cur = double(t - c.restarts[k]);
            lr.push_back(0.01 + (0.2 - 0.01) * (1 + std::cos(kPi * cur / len)) / 2);
        }
        check_seq(seq.lr, lr);
        for (int64_t r : c.restarts) CHECK(seq.lr[size_t(r)] == Approx(0.2).epsilon(1e-14));
    }
}

TEST_CASE("schedule: Cosine anneals to its floor and stays there", "[optim][schedule]") {
    optim::SGD opt(groups({0.2, 0.05}), {});
    optim::Cosine s(opt, {.t_max = 7, .eta_min = 0.002});
    const Seq seq = run(s, 12, 1);
    for (int64_t t = 0; t <= 12; ++t) {
        const double cur = double(std::min<int64_t>(t, 7));
        const double want = 0.002 + (0.05 - 0.002) * (1 + std::cos(kPi * cur / 7)) / 2;
        CHECK(seq.lr[size_t(t)] == Approx(want).epsilon(1e-14));
    }
    CHECK(seq.lr[7] == 0.002);   // the floor at t_max
    CHECK(seq.lr[12] == 0.002);  // and after: no restart
    CHECK(s.lr_at(3, 0) == Approx(0.002 + (0.2 - 0.002) * (1 + std::cos(kPi * 3 / 7)) / 2));
    REQUIRE_THROWS_WITH_MSG(optim::Cosine(opt, {.t_max = 0}), "t_max must be >= 1, got 0");
}

TEST_CASE("schedule: StepLR, Constant and Warmup", "[optim][schedule]") {
    {
        for (size_t g = 0; g < 2; ++g) {
            optim::SGD opt(groups({0.3, 0.05}), {});
            optim::StepLR s(opt, {.step_size = 3, .gamma = 0.5});
            const double b = g == 0 ? 0.3 : 0.05;
            check_seq(run(s, 10, g).lr,
                      {b, b, b, b / 2, b / 2, b / 2, b / 4, b / 4, b / 4, b / 8, b / 8});
        }
    }
    {
        optim::SGD opt(groups({0.3}), {});
        optim::Constant plain(opt);
        check_seq(run(plain, 4).lr, {0.3, 0.3, 0.3, 0.3, 0.3});
        optim::SGD opt2(groups({0.3}), {});
        optim::Constant low(opt2, {.factor = 0.5, .total_steps = 2});
        check_seq(run(low, 4).lr, {0.15, 0.15, 0.3, 0.3, 0.3});
    }
    // Warm-up over 4 steps from 1/10 of the target, then StepLR shifted by 4.
    optim::SGD opt(groups({0.2}), {});
    optim::Warmup s(std::make_unique<optim::StepLR>(opt, optim::StepLROptions{.step_size = 3, .gamma = 0.5}),
                    {.steps = 4, .start_factor = 0.1});
    const double w = 0.2;
    check_seq(run(s, 11).lr, {w * 0.1, w * 0.325, w * 0.55, w * 0.775, w, w, w, w / 2, w / 2, w / 2,
                              w / 4, w / 4});
    // Momentum comes from the inner schedule, held at its step 0 during warm-up.
    optim::SGD opt3(groups({0.2}), {.momentum = 0.5});
    optim::Warmup oc(std::make_unique<optim::OneCycle>(opt3, optim::OneCycleOptions{.max_lr = 0.1, .total_steps = 20}),
                     {.steps = 5, .start_factor = 0.0});
    const Seq seq = run(oc, 25);
    for (int64_t t = 0; t <= 25; ++t) {
        const double lr = t < 5 ? (0.1 / 25) * double(t) / 5 : one_cycle(0, t - 5, 0.1, 20, 0.3, true, false);
        const double m = one_cycle(1, std::max<int64_t>(t - 5, 0), 0.1, 20, 0.3, true, false);
        INFO("step " << t);
        CHECK(seq.lr[size_t(t)] == Approx(lr).epsilon(1e-13).margin(1e-18));
        CHECK(seq.momentum[size_t(t)] == Approx(m).epsilon(1e-13));
    }
}

TEST_CASE("schedule: skipped steps do not advance", "[optim][schedule]") {
    optim::SGD opt(groups({0.2}), {});
    optim::StepLR s(opt, {.step_size = 1, .gamma = 0.5});
    s.step(false);
    CHECK(s.steps() == 0);
    CHECK(opt.lr(0) == 0.2);
    s.step(true);
    CHECK(opt.lr(0) == 0.1);
    // Through the loss scaler: an overflowing gradient skips the step.
    const Tensor p = opt.groups()[0].params[0];
    amp::GradScaler scaler;
    p.set_grad(from_vector<float>({1, INFINITY, 2}));
    s.step(scaler.step(opt));
    scaler.update();
    CHECK(s.steps() == 1);
    CHECK(opt.lr(0) == 0.1);
    p.set_grad(from_vector<float>({1, 1, 2}));
    s.step(scaler.step(opt));
    CHECK(s.steps() == 2);
    CHECK(opt.lr(0) == 0.05);
}

TEST_CASE("schedule: state saved and loaded continues identically", "[optim][schedule]") {
    auto make = [](optim::Optimizer& opt) {
        return std::make_unique<optim::Warmup>(
            std::make_unique<optim::OneCycle>(opt, optim::OneCycleOptions{.max_lr = {0.1, 0.05}, .total_steps = 30}),
            optim::WarmupOptions{.steps = 3});
    };
    optim::SGD a(groups({0.1, 0.05}), {.momentum = 0.9});
    auto sa = make(a);
    for (int i = 0; i < 7; ++i) sa->step();
    const std::string json = sa->state_json();

    optim::SGD b(groups({0.7, 0.7}), {.momentum = 0.1});  // other LRs: the file's win
    auto sb = make(b);
    sb->load_state(json);
    CHECK(sb->steps() == 7);
    for (int i = 0; i < 20; ++i) {
        for (size_t g = 0; g < 2; ++g) {
            CHECK(b.lr(g) == a.lr(g));
            CHECK(b.momentum(g) == a.momentum(g));
        }
        sa->step();
        sb->step();
    }
    // The base LRs read at construction travel with the state: a StepLR
    // built on an optimizer whose LR a schedule had already lowered resumes
    // from the original base.
    optim::SGD c(groups({0.4}), {});
    optim::StepLR sc(c, {.step_size = 2, .gamma = 0.5});
    for (int i = 0; i < 5; ++i) sc.step();
    optim::SGD d(groups({c.lr(0)}), {});
    optim::StepLR sd(d, {.step_size = 2, .gamma = 0.5});
    sd.load_state(sc.state_json());
    sc.step();
    sd.step();
    CHECK(d.lr(0) == c.lr(0));
    CHECK(d.lr(0) == 0.4 / 8);
}

TEST_CASE("schedule: a bad state is an error and changes nothing", "[optim][schedule]") {
    optim::SGD opt(groups({0.1}), {.momentum = 0.9});
    optim::OneCycle s(opt, {.max_lr = 0.1, .total_steps = 10});
    for (int i = 0; i < 4; ++i) s.step();
    const double lr = opt.lr(0), m = opt.momentum(0);
    const std::string good = s.state_json();
    auto with = [&](const std::string& from, const std::string& to) {
        std::string j = good;
        const size_t at = j.find(from);
        REQUIRE(at != std::string::npos);
        return j.replace(at, from.size(), to);
    };
    optim::SGD other_opt(groups({0.1}), {});
    optim::StepLR other(other_opt, {.step_size = 2});
    REQUIRE_THROWS_WITH_MSG(other.load_state(good), "saved by OneCycle, cannot be loaded into StepLR");
    REQUIRE_THROWS_WITH_MSG(s.load_state("{oops"), "does not parse");
    REQUIRE_THROWS_WITH_MSG(s.load_state(with("\"steps\":4", "\"steps\":-1")), "'steps' must be an integer >= 0");
    REQUIRE_THROWS_WITH_MSG(s.load_state(with("\"steps\":4", "\"steps\":2.5")), "'steps' must be an integer >= 0");
    REQUIRE_THROWS_WITH_MSG(s.load_state(with("\"steps\":4", "\"steps\":11")), "step 11 is past total_steps = 10");
    REQUIRE_THROWS_WITH_MSG(s.load_state(with("\"base_lrs\":[", "\"base_lrs\":[-1,")), "'base_lrs' has 2 values");
    REQUIRE_THROWS_WITH_MSG(s.load_state(with("\"base_lrs\":[", "\"base_lrs\":[-")), "'base_lrs' holds -");
    REQUIRE_THROWS_WITH_MSG(s.load_state(with("\"base_momenta\":[", "\"base_momenta\":[1")), "outside [0, 1)");
    REQUIRE_THROWS_WITH_MSG(s.load_state("{\"schedule\":\"OneCycle\"}"), "'steps' must be an integer");
    CHECK(s.steps() == 4);
    CHECK(opt.lr(0) == lr);
    CHECK(opt.momentum(0) == m);
    // Stepping past the end is an error, and changes nothing either.
    for (int i = 0; i < 6; ++i) s.step();
    const double last = opt.lr(0);
    REQUIRE_THROWS_WITH_MSG(s.step(), "OneCycle: step 11 is past total_steps = 10");
    CHECK(s.steps() == 10);
    CHECK(opt.lr(0) == last);
}

TEST_CASE("schedule: bad arguments are errors that say which", "[optim][schedule]") {
    optim::SGD opt(groups({0.1, 0.1}), {.momentum = 0.9});
    REQUIRE_THROWS_WITH_MSG(optim::OneCycle(opt, {.total_steps = 10}), "max_lr of group 0 must be > 0");
    REQUIRE_THROWS_WITH_MSG(optim::OneCycle(opt, {.max_lr = {0.1, 0.2, 0.3}, .total_steps = 10}),
                            "max_lr has 3 values but the optimizer has 2 groups");
    REQUIRE_THROWS_WITH_MSG(optim::OneCycle(opt, {.max_lr = 0.1}), "total_steps must be >= 1, got 0");
    REQUIRE_THROWS_WITH_MSG(optim::OneCycle(opt, {.max_lr = 0.1, .total_steps = 10, .pct_start = 1.5}),
                            "pct_start must be in [0, 1], got 1.5");
    REQUIRE_THROWS_WITH_MSG(optim::OneCycle(opt, {.max_lr = 0.1, .total_steps = 10, .pct_start = 0.1}),
                            "leaves the rising phase no length");
    REQUIRE_THROWS_WITH_MSG(optim::OneCycle(opt, {.max_lr = 0.1, .total_steps = 10, .max_momentum = 1.0}),
                            "max_momentum of group 0 must be in [0, 1), got 1");
    REQUIRE_THROWS_WITH_MSG(optim::Cyclic(opt, {.max_lr = 0.1, .step_size_up = 0}),
                            "step_size_up must be >= 1");
    REQUIRE_THROWS_WITH_MSG(optim::Cyclic(opt, {.base_lr = -0.1, .max_lr = 0.1}),
                            "base_lr of group 0 must be finite and >= 0, got -0.1");
    REQUIRE_THROWS_WITH_MSG(optim::CosineWarmRestarts(opt, {.t_0 = 0}), "t_0 must be >= 1, got 0");
    REQUIRE_THROWS_WITH_MSG(optim::CosineWarmRestarts(opt, {.t_0 = 3, .t_mult = 0}), "t_mult must be >= 1");
    REQUIRE_THROWS_WITH_MSG(optim::StepLR(opt, {}), "step_size must be >= 1, got 0");
    REQUIRE_THROWS_WITH_MSG(optim::Constant(opt, {.factor = 2}), "factor must be in [0, 1], got 2");
    REQUIRE_THROWS_WITH_MSG(optim::Warmup(nullptr, {.steps = 3}), "the inner schedule is null");
    REQUIRE_THROWS_WITH_MSG(optim::Warmup(std::make_unique<optim::Constant>(opt), {}),
                            "Warmup: steps must be >= 1, got 0");
    optim::StepLR s(opt, {.step_size = 2});
    REQUIRE_THROWS_WITH_MSG(s.lr_at(0, 2), "StepLR: no group 2 (2 groups)");
    REQUIRE_THROWS_WITH_MSG(s.lr_at(-1, 0), "StepLR: step -1 is negative");
    // A failed constructor leaves the optimizer as it was.
    CHECK(opt.lr(0) == 0.1);
    CHECK(opt.momentum(0) == 0.9);
}

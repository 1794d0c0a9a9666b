// The LR finder: the sweep, the smoothed loss, the divergence stop and the
// suggestion against the rules written out here in f64; a quadratic whose
// stable LRs are known, where the suggestion must be one of them and the
// sweep must stop past them; Snapshot undoing the training.
#include <algorithm>
#include <cmath>

#include "optim/optim.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

/// What lr_find should return for `losses` (a function of the call index
/// and the LR), by the rules in lr_find.h.
optim::LrFindResult reference(const std::function<double(int64_t, double)>& loss_of,
                              const optim::LrFindOptions& o) {
    optim::LrFindResult r;
    double avg = 0, best = INFINITY;
    for (int64_t i = 0; i < o.steps; ++i) {
        const double lr = o.start_lr * std::pow(o.end_lr / o.start_lr, double(i) / double(o.steps - 1));
        const double loss = loss_of(i, lr);
        avg = o.smoothing * avg + (1 - o.smoothing) * loss;
        const double s = avg / (1 - std::pow(o.smoothing, double(i + 1)));
        r.lrs.push_back(lr);
        r.losses.push_back(loss);
        r.smoothed.push_back(s);
        if (!std::isfinite(s) || s > o.diverge_factor * best) {
            r.diverged = true;
            break;
        }
        best = std::min(best, s);
    }
    // numpy.gradient of the kept points against log10(lr) up to the
    // smoothed loss's minimum, its argmin among points not above the first.
    const int64_t lo = o.skip_start;
    int64_t hi = int64_t(r.lrs.size()) - o.skip_end;
    if (hi - lo < 3) return r;
    const auto first = r.smoothed.begin() + lo;
    hi = int64_t(std::min_element(first, r.smoothed.begin() + hi) - r.smoothed.begin()) + 1;
    if (hi - lo < 3) return r;
    double steepest = 0;
    for (int64_t i = lo; i < hi; ++i) {
        if (r.smoothed[size_t(i)] > r.smoothed[size_t(lo)]) continue;
        const size_t a = size_t(i == lo ? i : i - 1), b = size_t(i == hi - 1 ? i : i + 1);
        const double g = (r.smoothed[b] - r.smoothed[a]) / (std::log10(r.lrs[b]) - std::log10(r.lrs[a]));
        if (g < steepest) {
            steepest = g;
            r.suggested_lr = r.lrs[size_t(i)];
        }
    }
    return r;
}

void check_same(const std::vector<double>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) {
        INFO("point " << i);
        CHECK(a[i] == Approx(b[i]).epsilon(1e-12));
    }
}

}  // namespace

TEST_CASE("lr_find: sweep, smoothing, divergence and suggestion follow the rules", "[optim][lr_find]") {
    // A loss that falls fastest near lr = 1e-3 and explodes past 0.1, with
    // deterministic wiggles for the smoothing to remove and a drop in the
    // first three calls that skip_start must leave out. It reads the LR the
    // finder set, as a real train_step's opt.step() would.
    auto loss_of = [](int64_t i, double lr) {
        const double blow = lr > 0.1 ? std::pow(lr / 0.1, 4) : 1.0;
        return (2 - std::tanh(std::log10(lr) + 3)) * blow + 0.02 * std::sin(7.0 * double(i)) +
               (i < 3 ? 0.5 : 0.0);
    };
    const Tensor p = random_tensor({4}, DType::f32, 7).set_requires_grad(true);
    optim::SGD opt(std::vector<optim::GroupSpec>{{{p}, 0.25}, {{random_tensor({2}, DType::f32, 8)}, 0.5}});
    for (bool early : {true, false}) {
        INFO((early ? "diverging" : "sweeping to the end"));
        optim::LrFindOptions o;
        if (!early) o.end_lr = 0.05;
        int64_t calls = 0;
        const optim::LrFindResult r = optim::lr_find(opt, [&] {
            CHECK(opt.lr(1) == opt.lr(0));  // every group gets the swept LR
            return loss_of(calls++, opt.lr(0));
        }, o);
        const optim::LrFindResult want = reference(loss_of, o);
        check_same(r.lrs, want.lrs);
        check_same(r.losses, want.losses);
        check_same(r.smoothed, want.smoothed);
        REQUIRE(r.suggested_lr.has_value());
        REQUIRE(want.suggested_lr.has_value());
        CHECK(*r.suggested_lr == Approx(*want.suggested_lr).epsilon(1e-12));
        CHECK(r.diverged == early);
        CHECK(int64_t(r.lrs.size()) == calls);
        CHECK(r.lrs.front() == Approx(1e-7).epsilon(1e-14));
        if (early) {
            CHECK(r.lrs.size() < 100);
            CHECK(r.lrs.back() > 0.1);
        } else {
            CHECK(r.lrs.size() == 100);
            CHECK(r.lrs.back() == Approx(0.05).epsilon(1e-12));
        }
        // Past the raw loss's steepest point (the average lags), below the blow-up.
        CHECK(*r.suggested_lr > 1e-3);
        CHECK(*r.suggested_lr < 0.1);
        // The groups' LRs are put back.
        CHECK(opt.lr(0) == 0.25);
        CHECK(opt.lr(1) == 0.5);
    }
    // A loss that never falls but in the last points skip_end leaves out
    // suggests nothing; a NaN stops the sweep.
    int64_t calls = 0;
    optim::LrFindResult flat = optim::lr_find(opt, [&] {
        const double i = double(calls++);
        return 1.0 + 1e-3 * i - (i >= 97 ? 0.5 : 0.0);
    });
    CHECK_FALSE(flat.suggested_lr.has_value());
    CHECK_FALSE(flat.diverged);
    calls = 0;
    optim::LrFindResult nan = optim::lr_find(opt, [&] { return calls++ < 30 ? 1.0 : NAN; });
    CHECK(nan.diverged);
    CHECK(nan.lrs.size() == 31);
}

TEST_CASE("lr_find: on a quadratic the suggestion is a stable LR and divergence stops the sweep",
          "[optim][lr_find]") {
    // f(w) = ½ Σ λ_i (w_i − c_i)²: gradient descent converges iff lr < 2/max λ = 0.5.
    const Tensor lambda = from_vector<double>({0.25, 0.5, 1, 2, 4});
    const Tensor c = from_vector<double>({0.5, -1, 2, 0, 1});
    const Tensor w = from_vector<double>({1.5, 0.2, 0.9, -0.7, 2.2}).set_requires_grad(true);
    optim::SGD opt(std::vector<Tensor>{w}, {.lr = 0.01});
    const std::vector<double> w0 = values(w);
    auto train_step = [&] {
        opt.zero_grad();
        const Tensor d = sub(w, c);
        const Tensor loss = mul(sum(mul(lambda, mul(d, d))), 0.5);
        loss.backward();
        opt.step();
        return loss.item();
    };
    const optim::Snapshot before(opt);
    const optim::LrFindResult r = optim::lr_find(opt, train_step);
    INFO("suggested " << r.suggested_lr.value_or(-1) << ", stopped at " << r.lrs.back() << " after "
                      << r.lrs.size() << " steps");
    REQUIRE(r.suggested_lr.has_value());
    CHECK(*r.suggested_lr >= 0.01);
    CHECK(*r.suggested_lr < 0.5);
    CHECK(r.diverged);
    CHECK(r.lrs.size() < 100);
    CHECK(r.lrs.back() > 0.5);  // nothing below the stable limit diverges
    CHECK(opt.lr(0) == 0.01);
    CHECK(opt.steps() == int64_t(r.lrs.size()));
    CHECK(values(w) != w0);     // the sweep trained
    before.restore();
    CHECK(values(w) == w0);
    CHECK(opt.steps() == 0);
}

TEST_CASE("lr_find: nothing past the minimum or above the start is suggested", "[optim][lr_find]") {
    // The loss falls gently to a minimum at lr 1e-3, climbs to 50x its
    // start by lr 1, then falls steeply back (a recovery from a blow-up,
    // as the mlp showed: loss 54 at lr 1.29, a suggestion of 1.87). The
    // steepest fall of all is that recovery; the suggestion must be on the
    // gentle descent before the minimum.
    const optim::LrFindOptions o{.start_lr = 1e-6, .end_lr = 100, .steps = 160, .smoothing = 0.6,
                                 .diverge_factor = 1e9, .skip_start = 5, .skip_end = 2};
    auto loss_of = [](int64_t, double lr) {
        const double x = std::log10(lr);  // -6 .. 2
        if (x < -3) return 2.0 - 0.1 * (x + 6);           // 2.0 down to 1.7
        if (x < 0) return 1.7 + 16.1 * (x + 3) * (x + 3);  // up to ~146
        return 146.0 - 140.0 * std::min(1.0, x);           // and down again, steeply
    };
    const optim::LrFindResult want = reference(loss_of, o);
    Tensor w = zeros({1}).set_requires_grad(true);
    optim::SGD opt({w}, {.lr = 0.1});
    const optim::LrFindResult r = optim::lr_find(opt, [&] { return loss_of(0, opt.lr(0)); }, o);
    REQUIRE(r.suggested_lr.has_value());
    REQUIRE(want.suggested_lr.has_value());
    CHECK(*r.suggested_lr == Approx(*want.suggested_lr).epsilon(1e-12));
    CHECK(*r.suggested_lr < 1e-3);  // before the minimum
    // Without the cut, the steepest slope is the recovery past lr 1.
    double steepest = 0, at = 0;
    for (size_t i = 1; i + 1 < r.lrs.size(); ++i) {
        const double g = (r.smoothed[i + 1] - r.smoothed[i - 1]) /
                         (std::log10(r.lrs[i + 1]) - std::log10(r.lrs[i - 1]));
        if (g < steepest) steepest = g, at = r.lrs[i];
    }
    CHECK(at > 1.0);
}

TEST_CASE("lr_find: Snapshot restores parameters, state and hyper-parameters", "[optim][lr_find]") {
    const std::vector<Tensor> ps = {random_tensor({6}, DType::f32, 3).set_requires_grad(true),
                                    random_tensor({2, 3}, DType::f32, 4).set_requires_grad(true)};
    optim::AdamW opt(ps, {.lr = 0.01});
    auto steps = [&](int from, int to) {
        for (int s = from; s < to; ++s) {
            for (size_t i = 0; i < ps.size(); ++i)
                ps[i].set_grad(random_tensor(ps[i].shape(), DType::f32, uint64_t(100 + 10 * s + i)));
            opt.step();
        }
    };
    steps(0, 2);
    const optim::Snapshot snap(opt);
    steps(2, 5);
    const std::vector<double> a0 = values(ps[0]), a1 = values(ps[1]);
    snap.restore();
    opt.set_lr(0, 0.5);
    snap.restore();  // twice: the snapshot is not used up
    CHECK(opt.lr(0) == 0.01);
    CHECK(opt.steps() == 2);
    steps(2, 5);
    CHECK(values(ps[0]) == a0);  // the same three steps from the same state
    CHECK(values(ps[1]) == a1);
}

TEST_CASE("lr_find: bad options are errors", "[optim][lr_find]") {
    optim::SGD opt(std::vector<Tensor>{random_tensor({2}, DType::f32, 1).set_requires_grad(true)});
    auto step = [] { return 1.0; };
    REQUIRE_THROWS_WITH_MSG(optim::lr_find(opt, step, {.start_lr = 1, .end_lr = 0.1}),
                            "needs 0 < start_lr < end_lr (finite), got 1 and 0.1");
    REQUIRE_THROWS_WITH_MSG(optim::lr_find(opt, step, {.steps = 1}), "steps must be >= 2, got 1");
    REQUIRE_THROWS_WITH_MSG(optim::lr_find(opt, step, {.smoothing = 1}), "smoothing must be in [0, 1)");
    REQUIRE_THROWS_WITH_MSG(optim::lr_find(opt, step, {.diverge_factor = 1}), "diverge_factor must be > 1");
    REQUIRE_THROWS_WITH_MSG(optim::lr_find(opt, {}), "train_step is empty");
    // An error inside train_step still puts the LR back.
    REQUIRE_THROWS_WITH_MSG(optim::lr_find(opt, [&]() -> double { EMBER_FAIL("batch 3 is bad"); }),
                            "batch 3 is bad");
    CHECK(opt.lr(0) == 1e-2);
}

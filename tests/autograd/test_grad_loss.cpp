// Gradients and values of the losses: fused cross_entropy (reductions, label
// smoothing, ignore_index, f32, huge logits) against an f64 reference and
// against log_softmax + nll_loss, nll_loss and mse_loss, their argument
// errors, and anomaly mode naming cross_entropy.
#include <cmath>

#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Reduction kReductions[] = {Reduction::mean, Reduction::sum, Reduction::none};

const char* name_of(Reduction r) {
    switch (r) {
        case Reduction::mean: return "mean";
        case Reduction::sum: return "sum";
        case Reduction::none: return "none";
    }
    return "?";
}

Tensor targets(const std::vector<int64_t>& t) { return from_vector(t, {int64_t(t.size())}); }

// Reduces per-sample losses as the op should: the mean divides by the number
// of rows whose target is not ignore_index.
std::vector<double> reduce_ref(const std::vector<double>& per, const std::vector<int64_t>& t,
                               int64_t ignore_index, Reduction r) {
    if (r == Reduction::none) return per;
    double s = 0, count = 0;
    for (size_t i = 0; i < per.size(); ++i) {
        s += per[i];
        count += t[i] != ignore_index;
    }
    return {r == Reduction::sum ? s : s / count};
}

// f64 reference of cross_entropy: per row lse − (1 − ε)·x[t] − (ε / C)·Σ x.
std::vector<double> cross_entropy_ref(const Tensor& logits, const std::vector<int64_t>& t,
                                      double eps, int64_t ignore_index, Reduction r) {
    const int64_t n = logits.size(0), c = logits.size(1);
    const std::vector<double> x = values(logits);
    std::vector<double> per(size_t(n), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        if (t[size_t(i)] == ignore_index) continue;
        const double* row = &x[size_t(i * c)];
        double m = row[0], s = 0, total = 0;
        for (int64_t j = 0; j < c; ++j) m = std::max(m, row[j]);
        for (int64_t j = 0; j < c; ++j) {
            s += std::exp(row[j] - m);
            total += row[j];
        }
        per[size_t(i)] = m + std::log(s) - (1 - eps) * row[t[size_t(i)]] - eps / double(c) * total;
    }
    return reduce_ref(per, t, ignore_index, r);
}

// Targets of 6 rows over 5 classes, two of them ignored (default ignore_index).
const std::vector<int64_t> kTargets = {3, -100, 0, 4, -100, 1};

}  // namespace

TEST_CASE("grad: cross_entropy reductions, smoothing and ignore_index", "[grad][loss]") {
    struct Case {
        std::vector<int64_t> t;
        int64_t ignore_index;
    };
    // ignore_index -100 on two rows; then a valid class (2) as ignore_index.
    const Case cases[] = {{kTargets, -100}, {{2, 0, 2, 4, 1, 3}, 2}, {{1, 0, 2, 4, 1, 3}, -100}};
    uint64_t seed = 300;
    for (const Case& k : cases)
        for (double eps : {0.0, 0.2})
            for (Reduction r : kReductions) {
                INFO("ignore_index " << k.ignore_index << ", smoothing " << eps << ", "
                                     << name_of(r));
                const Tensor x = leaf({6, 5}, seed++);
                const CrossEntropyOptions o{eps, r, k.ignore_index};
                const GradFn fn = [&](const std::vector<Tensor>& in) {
                    return cross_entropy(in[0], targets(k.t), o);
                };
                const Tensor y = fn({x});
                CHECK(y.dtype() == DType::f64);
                CHECK(y.shape() == (r == Reduction::none ? Shape{6} : Shape{}));
                check_close(y, cross_entropy_ref(x, k.t, eps, k.ignore_index, r), 1e-12, 1e-12);
                check_grad(fn, {x});
                // Ignored rows get exactly zero gradient.
                Generator gen(seed);
                const Tensor g = grads_of(fn, {x}, randn(y.shape(), {DType::f64}, &gen))[0];
                for (int64_t i = 0; i < 6; ++i)
                    for (int64_t j = 0; j < 5; ++j) {
                        const double gij = g.at({i, j});
                        if (k.t[size_t(i)] == k.ignore_index) CHECK(gij == 0);
                        else CHECK(gij != 0);
                    }
            }
}

TEST_CASE("cross_entropy equals log_softmax + nll_loss", "[grad][loss]") {
    const Tensor x = leaf({6, 5}, 320);
    Generator gen(321);
    for (Reduction r : kReductions) {
        INFO(name_of(r));
        const GradFn fused = [r](const std::vector<Tensor>& in) {
            return cross_entropy(in[0], targets(kTargets), {0.0, r, -100});
        };
        const GradFn composed = [r](const std::vector<Tensor>& in) {
            return nll_loss(log_softmax(in[0], 1), targets(kTargets), {r, -100});
        };
        check_close(fused({x}), composed({x}), 1e-12, 1e-12);
        const Tensor seed = randn(fused({x}).shape(), {DType::f64}, &gen);
        check_close(grads_of(fused, {x}, seed)[0], grads_of(composed, {x}, seed)[0], 1e-10, 1e-12);
    }
}

TEST_CASE("grad: cross_entropy with one class and with no rows", "[grad][loss]") {
    for (Reduction r : kReductions) {
        INFO(name_of(r));
        // One class: every loss is 0 whatever the logits, and so is the gradient.
        const Tensor x1 = leaf({3, 1}, 325);
        const GradFn one = [r](const std::vector<Tensor>& in) {
            return cross_entropy(in[0], targets({0, 0, 0}), {0.2, r, -100});
        };
        check_close(one({x1}), std::vector<double>(r == Reduction::none ? 3 : 1, 0.0), 0, 1e-15);
        check_grad(one, {x1});
    }
    // No rows: the sum is 0 and the per-sample losses are empty.
    const Tensor x0 = leaf({0, 4}, 326);
    const Tensor t0 = from_vector(std::vector<int64_t>{}, {0});
    const GradFn sum0 = [&](const std::vector<Tensor>& in) {
        return cross_entropy(in[0], t0, {0.0, Reduction::sum, -100});
    };
    CHECK(sum0({x0}).item() == 0);
    CHECK(grads_of(sum0, {x0})[0].shape() == x0.shape());
    CHECK(cross_entropy(x0, t0, {0.0, Reduction::none, -100}).shape() == Shape{0});
}

TEST_CASE("cross_entropy of f32 logits and of huge logits", "[grad][loss]") {
    const Tensor x64 = leaf({6, 5}, 330);
    const Tensor x32 = x64.detach().to(DType::f32);
    x32.set_requires_grad(true);
    for (Reduction r : kReductions) {
        INFO("f32, " << name_of(r));
        const GradFn fn = [r](const std::vector<Tensor>& in) {
            return cross_entropy(in[0], targets(kTargets), {0.2, r, -100});
        };
        const Tensor y = fn({x32});
        CHECK(y.dtype() == DType::f32);
        check_close(y, cross_entropy_ref(x32.to(DType::f64), kTargets, 0.2, -100, r), 1e-5, 1e-6);
        // The f32 gradient is the f64 one rounded (the inputs differ by f32 rounding).
        const Tensor g = grads_of(fn, {x32})[0];
        CHECK(g.dtype() == DType::f32);
        check_close(g, grads_of(fn, {x64})[0], 1e-5, 1e-6);
    }
    // Logits of magnitude 1e4: exp overflows unless the row max is taken out.
    for (DType dt : {DType::f64, DType::f32}) {
        INFO("huge logits, " << dtype_name(dt));
        const Tensor big = random_tensor({6, 5}, dt, 331, -1e4, 1e4);
        big.set_requires_grad(true);
        autograd::DetectAnomalyGuard anomaly;  // would throw on Inf/NaN anywhere
        const Tensor y = cross_entropy(big, targets(kTargets), {0.0, Reduction::none, -100});
        check_close(y, cross_entropy_ref(big.to(DType::f64), kTargets, 0, -100, Reduction::none),
                    1e-6, 1e-6);
        y.backward(ones({6}, {y.dtype()}));
        CHECK(autograd::all_finite(big.grad()));
        // Softmax is one-hot at the row max (the rest underflow): onehot(max) − onehot(t).
        const std::vector<double> xv = values(big);
        for (int64_t i = 0; i < 6; ++i) {
            if (kTargets[size_t(i)] == -100) continue;
            int64_t am = 0;
            for (int64_t j = 1; j < 5; ++j)
                if (xv[size_t(i * 5 + j)] > xv[size_t(i * 5 + am)]) am = j;
            for (int64_t j = 0; j < 5; ++j)
                CHECK(big.grad().at({i, j}) ==
                      Approx(double(j == am) - double(j == kTargets[size_t(i)])).margin(1e-6));
        }
    }
}

TEST_CASE("grad: cross_entropy of f32 logits shifted by 1e4 matches f64", "[grad][loss]") {
    // The same logits in f64 and in f32 (the f64 copy of the stored floats):
    // the f32 gradient must be the f64 one to f32 precision.
    for (double shift : {1e4, -1e4}) {
        INFO("shift " << shift);
        const Tensor base = add(random_tensor({8, 30}, DType::f32, 335, -3, 3), shift);
        const Tensor x32 = base.detach(), x64 = base.to(DType::f64);
        x32.set_requires_grad(true);
        x64.set_requires_grad(true);
        const std::vector<int64_t> t = {0, 29, 3, -100, 7, 7, 12, 5};
        for (const Tensor& x : {x32, x64})
            cross_entropy(x, targets(t), {0.1, Reduction::sum, -100}).backward();
        check_close(x32.grad(), x64.grad(), 1e-6, 3e-7);
    }
}

TEST_CASE("cross_entropy argument errors", "[grad][loss]") {
    const Tensor x = leaf({6, 5}, 340);
    REQUIRE_THROWS_WITH_MSG(cross_entropy(leaf({5}, 341), targets({1})), "expected logits [N, C]");
    REQUIRE_THROWS_WITH_MSG(cross_entropy(x, targets({1, 2, 3})), "expected target i64 [6]");
    REQUIRE_THROWS_WITH_MSG(cross_entropy(x, constant({6}, 342)), "expected target i64 [6]");
    REQUIRE_THROWS_WITH_MSG(cross_entropy(x, targets({1, 2, 5, 0, 0, 0})),
                            "target 5 at row 2 is out of range for 5 classes");
    REQUIRE_THROWS_WITH_MSG(cross_entropy(x, targets(kTargets), {1.5}),
                            "label_smoothing must be in [0, 1]");
}

TEST_CASE("grad: nll_loss reductions and ignore_index", "[grad][loss]") {
    struct Case {
        std::vector<int64_t> t;
        int64_t ignore_index;
    };
    // Every target is a class or ignore_index (anything else is an error).
    const Case cases[] = {{kTargets, -100}, {{3, 4, 0, 4, 2, 1}, 4}};
    uint64_t seed = 350;
    for (const Case& k : cases)
        for (Reduction r : kReductions) {
            INFO("ignore_index " << k.ignore_index << ", " << name_of(r));
            const Tensor lp = leaf({6, 5}, seed++, -3.0, 0.0);
            const GradFn fn = [&](const std::vector<Tensor>& in) {
                return nll_loss(in[0], targets(k.t), {r, k.ignore_index});
            };
            const std::vector<double> v = values(lp);
            std::vector<double> per(6, 0.0);
            for (size_t i = 0; i < 6; ++i)
                if (k.t[i] != k.ignore_index) per[i] = -v[i * 5 + size_t(k.t[i])];
            check_close(fn({lp}), reduce_ref(per, k.t, k.ignore_index, r), 1e-12, 1e-12);
            check_grad(fn, {lp});
            // Ignored rows get exactly zero gradient.
            const Tensor g = grads_of(fn, {lp})[0];
            for (int64_t i = 0; i < 6; ++i)
                for (int64_t j = 0; j < 5; ++j)
                    CHECK(g.at({i, j}) == (k.t[size_t(i)] != k.ignore_index && j == k.t[size_t(i)]
                                               ? -(r == Reduction::mean ? 0.25 : 1.0)
                                               : 0.0));
        }
}

TEST_CASE("nll_loss argument errors", "[grad][loss]") {
    const Tensor lp = leaf({6, 5}, 360);
    REQUIRE_THROWS_WITH_MSG(nll_loss(leaf({6}, 361), targets(kTargets)),
                            "nll_loss: expected log_probs [N, C] and target [N], got [6] and [6]");
    REQUIRE_THROWS_WITH_MSG(
        nll_loss(lp, targets({1, 2})),
        "nll_loss: expected log_probs [N, C] and target [N], got [6, 5] and [2]");
    REQUIRE_THROWS_WITH_MSG(nll_loss(lp, constant({6}, 362)),
                            "nll_loss: target must be i64, got f64");
    REQUIRE_THROWS_WITH_MSG(nll_loss(lp, targets({1, 2, 5, 0, 0, 0})),
                            "nll_loss: target 5 at row 2 is out of range for 5 classes");
}

TEST_CASE("grad: mse_loss reductions", "[grad][loss]") {
    uint64_t seed = 370;
    for (const Shape& s : {Shape{4, 3}, Shape{2, 3, 2}, Shape{}})
        for (Reduction r : kReductions) {
            INFO(shape_str(s) << ", " << name_of(r));
            const Tensor a = leaf(s, seed++), b = leaf(s, seed++);
            const GradFn fn = [r](const std::vector<Tensor>& in) {
                return mse_loss(in[0], in[1], r);
            };
            const std::vector<double> av = values(a), bv = values(b);
            std::vector<double> sq(av.size());
            double total = 0;
            for (size_t i = 0; i < av.size(); ++i) {
                sq[i] = (av[i] - bv[i]) * (av[i] - bv[i]);
                total += sq[i];
            }
            const std::vector<double> want =
                r == Reduction::none ? sq
                : r == Reduction::sum ? std::vector<double>{total}
                                      : std::vector<double>{total / double(av.size())};
            check_close(fn({a, b}), want, 1e-12, 1e-12);
            check_grad(fn, {a, b});
            check_grad(fn, {a, constant(s, seed)});
        }
    // Low precision: the mean of many elements must not overflow or round the count.
    for (DType dt : {DType::f16, DType::bf16}) {
        INFO(dtype_name(dt));
        const Tensor a = full({70001}, 1.5, {dt}), b = full({70001}, 0.5, {dt});
        CHECK(mse_loss(a, b).item() == 1.0);
    }
    REQUIRE_THROWS_WITH_MSG(mse_loss(leaf({2, 3}, 380), leaf({3, 2}, 381)),
                            "mse_loss: input [2, 3] and target [3, 2] differ in shape");
}

TEST_CASE("anomaly mode names cross_entropy for NaN logits", "[grad][loss]") {
    Tensor x = random_tensor({3, 4}, DType::f64, 390);
    x.set({1, 2}, NAN);
    x.set_requires_grad(true);
    const Tensor t = targets({0, 1, 3});
    {
        autograd::DetectAnomalyGuard anomaly;
        REQUIRE_THROWS_WITH_MSG(cross_entropy(x, t), "forward op 'cross_entropy' produced NaN");
    }
    // Without anomaly mode the NaN just propagates.
    CHECK(std::isnan(cross_entropy(x, t).item()));
}

TEST_CASE("nll_loss: a batch whose targets are all ignored gives a zero gradient, not NaN",
          "[grad][loss]") {
    // -inf log-probabilities in ignored rows must not leak into the gradient.
    Tensor lp = from_vector<double>({-INFINITY, -1, -2, -INFINITY, -3, -4}, {2, 3})
                    .set_requires_grad(true);
    Tensor t = from_vector<int64_t>({-100, -100}, {2});
    nll_loss(lp, t, {.reduction = Reduction::sum}).backward();
    REQUIRE(values(lp.grad()) == std::vector<double>(6, 0.0));
}

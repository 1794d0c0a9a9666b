// cross_entropy_forward / cross_entropy_backward against a naive f64
// log-softmax + NLL written here: shapes with N or C of 1 and odd sizes, label
// smoothing 0 and 0.1, ignored rows, strided inputs, every floating dtype;
// central differences of the forward; logits of magnitude 1e4; thread-count
// independence; every error path; f32 gradients for logits shifted by 1e4.
#include <omp.h>

#include <cmath>

#include "kernels/loss.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr int64_t kIgnore = -100;

struct RefCE {
    std::vector<double> loss, lse, grad;  // grad: [N, C] for upstream g
};

// log-sum-exp per row, then the smoothed NLL and its gradient, all in f64.
RefCE ref_cross_entropy(const Tensor& logits, const Tensor& target, double eps, int64_t ignore,
                        const std::vector<double>& g) {
    const int64_t N = logits.size(0), C = logits.size(1);
    const std::vector<double> x = values(logits);
    const std::vector<int64_t> t = target.to_vector<int64_t>();
    RefCE r;
    for (int64_t i = 0; i < N; ++i) {
        const double* row = x.data() + i * C;
        double m = -INFINITY, s = 0, sx = 0;
        for (int64_t c = 0; c < C; ++c) m = std::max(m, row[c]);
        for (int64_t c = 0; c < C; ++c) s += std::exp(row[c] - m), sx += row[c];
        const double lse = m + std::log(s);
        r.lse.push_back(lse);
        const bool skip = t[size_t(i)] == ignore;
        r.loss.push_back(skip ? 0.0 : lse - (1 - eps) * row[t[size_t(i)]] - eps / double(C) * sx);
        for (int64_t c = 0; c < C; ++c) {
            const double q = (c == t[size_t(i)] ? 1 - eps : 0) + eps / double(C);
            r.grad.push_back(skip ? 0.0 : g[size_t(i)] * (std::exp(row[c] - lse) - q));
        }
    }
    return r;
}

// Targets in [0, C) with every third row (from row 1) set to `ignore`.
Tensor make_targets(int64_t n, int64_t C, uint64_t seed, int64_t ignore) {
    std::vector<int64_t> t =
        random_tensor({n}, DType::i64, seed, 0, double(C)).to_vector<int64_t>();
    for (size_t i = 1; i < t.size(); i += 3) t[i] = ignore;
    return from_vector(t, {n});
}

// A step-2 view holding the same values (target of any layout).
Tensor strided_1d(const Tensor& t) {
    Tensor big = zeros({2 * t.numel()}, {t.dtype()});
    Tensor v = big.slice(0, 0, 2 * t.numel(), 2);
    v.copy_(t);
    return v;
}

const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

TEST_CASE("cross_entropy forward and backward match log_softmax + NLL in f64", "[loss]") {
    const Shape shapes[] = {{1, 1}, {1, 5}, {7, 1}, {5, 3}, {33, 17}, {4, 1000}, {0, 5}, {300, 10}};
    uint64_t seed = 1;
    for (const Shape& shape : shapes) {
        for (DType dt : kFloats) {
            for (double eps : {0.0, 0.1}) {
                for (int64_t ignore : {kIgnore, int64_t(0)}) {
                    const int64_t N = shape[0], C = shape[1];
                    const Tensor x = random_tensor(shape, dt, seed++, -5, 5);
                    const Tensor t = make_targets(N, C, seed++, ignore);
                    const Tensor g = random_tensor({N}, DType::f32, seed++, -1, 1);
                    const RefCE want = ref_cross_entropy(x, t, eps, ignore, values(g));
                    const DType acc = dt == DType::f64 ? DType::f64 : DType::f32;
                    const double tol = dt == DType::f64 ? 1e-12 : 2e-6;
                    for (bool strided : {false, true}) {
                        INFO(dtype_name(dt) << " " << shape_str(shape) << " eps " << eps
                                            << " ignore " << ignore << (strided ? " strided" : ""));
                        const Tensor xl = strided ? non_contiguous(x) : x;
                        const Tensor tl = strided ? strided_1d(t) : t;
                        const kernels::CrossEntropyForward f =
                            kernels::cross_entropy_forward(xl, tl, eps, ignore);
                        REQUIRE(f.loss.dtype() == acc);
                        REQUIRE(f.lse.shape() == Shape{N});
                        REQUIRE(f.lse.dtype() == DType::f64);
                        check_close(f.loss, want.loss, tol, tol);
                        check_close(f.lse, want.lse, tol, tol);
                        const Tensor gx = kernels::cross_entropy_backward(
                            strided ? strided_1d(g) : g, xl, f.lse, tl, eps, ignore);
                        REQUIRE(gx.shape() == shape);
                        REQUIRE(gx.dtype() == dt);
                        check_close(gx, want.grad, rtol_for(dt) * 2, rtol_for(dt));
                    }
                }
            }
        }
    }
}

TEST_CASE("cross_entropy_backward agrees with central differences of the forward", "[loss]") {
    for (double eps : {0.0, 0.1}) {
        INFO("eps " << eps);
        const Tensor x = random_tensor({5, 4}, DType::f64, 20 + uint64_t(eps * 10), -3, 3);
        const Tensor t = from_vector(std::vector<int64_t>{3, kIgnore, 0, 2, 1});
        const Tensor r = random_tensor({5}, DType::f64, 30, -1, 1);
        const std::vector<double> rv = values(r);
        const auto f = kernels::cross_entropy_forward(x, t, eps, kIgnore);
        const Tensor gx = kernels::cross_entropy_backward(r, x, f.lse, t, eps, kIgnore);
        std::vector<double> numeric;
        Tensor xp = x.clone();
        const double h = 1e-6;
        for (int64_t i = 0; i < x.numel(); ++i) {
            const Shape at = unravel(i, x.shape());
            const double v = x.at(at);
            double side[2];
            for (int s = 0; s < 2; ++s) {
                xp.set(at, s == 0 ? v + h : v - h);
                const std::vector<double> l =
                    values(kernels::cross_entropy_forward(xp, t, eps, kIgnore).loss);
                side[s] = 0;
                for (size_t j = 0; j < l.size(); ++j) side[s] += l[j] * rv[j];
            }
            xp.set(at, v);
            numeric.push_back((side[0] - side[1]) / (2 * h));
        }
        check_close(gx, numeric, 1e-6, 1e-8);
        // The ignored row has no gradient at all.
        for (int64_t c = 0; c < 4; ++c) CHECK(gx.at({1, c}) == 0);
    }
}

TEST_CASE("cross_entropy stays finite and accurate for logits of magnitude 1e4", "[loss]") {
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
        INFO(dtype_name(dt));
        const Tensor x = random_tensor({16, 50}, dt, 40, -1e4, 1e4);
        const Tensor t = make_targets(16, 50, 41, kIgnore);
        const std::vector<double> g(16, 1.0);
        const RefCE want = ref_cross_entropy(x, t, 0.1, kIgnore, g);
        const auto f = kernels::cross_entropy_forward(x, t, 0.1, kIgnore);
        for (double v : values(f.loss)) REQUIRE(std::isfinite(v));
        // Losses reach 2e4: an f32 result is good to its rounding of that.
        check_close(f.loss, want.loss, 1e-6, 1e-6);
        const Tensor gx =
            kernels::cross_entropy_backward(from_vector(g, {16}), x, f.lse, t, 0.1, kIgnore);
        for (double v : values(gx)) REQUIRE(std::isfinite(v));
        check_close(gx, want.grad, dt == DType::f64 ? 1e-9 : rtol_for(dt), 1e-7);
    }
}

// Note [lse in f64] (kernels/cpu/loss.cpp): logits near ±1e4 whose softmax is
// spread over many classes. With the log-sum-exp rounded to f32 (half an ulp
// of 1e4 is 5e-4) every probability was off by up to that much, relative.
TEST_CASE("cross_entropy_backward keeps f32 precision for logits shifted by 1e4", "[loss]") {
    uint64_t seed = 45;
    for (double shift : {1e4, -1e4, 3e3, 0.0}) {
        for (double eps : {0.0, 0.1}) {
            INFO("shift " << shift << ", eps " << eps);
            const int64_t N = 64, C = 37;
            const Tensor x = add(random_tensor({N, C}, DType::f32, seed++, -4, 4), shift);
            const Tensor t = make_targets(N, C, seed++, kIgnore);
            const Tensor g = random_tensor({N}, DType::f32, seed++, 0.5, 2);
            // The reference works from the f32 logits as stored, in f64.
            const RefCE want = ref_cross_entropy(x, t, eps, kIgnore, values(g));
            const auto f = kernels::cross_entropy_forward(x, t, eps, kIgnore);
            REQUIRE(f.lse.dtype() == DType::f64);
            // The sum of exps runs on f32 terms: lse is good to ~1e-7 absolute.
            check_close(f.lse, want.lse, 0, 1e-6);
            // Probabilities to a few f32 ulps; |grad| <= 2, so 3e-7 absolute
            // covers the rounding of p − q where they nearly cancel.
            check_close(kernels::cross_entropy_backward(g, x, f.lse, t, eps, kIgnore), want.grad,
                        1e-6, 3e-7);
        }
    }
}

TEST_CASE("cross_entropy gives the same bits for 1 and 2 threads", "[loss]") {
    const Tensor x = random_tensor({64, 1000}, DType::f32, 50, -8, 8);
    const Tensor t = make_targets(64, 1000, 51, kIgnore);
    const Tensor g = random_tensor({64}, DType::f32, 52);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(std::max(2, saved));
    const auto many = kernels::cross_entropy_forward(x, t, 0.1, kIgnore);
    const std::vector<float> many_g =
        kernels::cross_entropy_backward(g, x, many.lse, t, 0.1, kIgnore).to_vector<float>();
    omp_set_num_threads(1);
    const auto one = kernels::cross_entropy_forward(x, t, 0.1, kIgnore);
    const std::vector<float> one_g =
        kernels::cross_entropy_backward(g, x, one.lse, t, 0.1, kIgnore).to_vector<float>();
    omp_set_num_threads(saved);
    CHECK(many.loss.to_vector<float>() == one.loss.to_vector<float>());
    CHECK(many.lse.to_vector<double>() == one.lse.to_vector<double>());
    CHECK(many_g == one_g);
}

TEST_CASE("cross_entropy errors name the op, the tensors and the bad target", "[loss][errors]") {
    const Tensor x = random_tensor({3, 4}, DType::f32, 60);
    const Tensor t = from_vector(std::vector<int64_t>{0, 3, kIgnore});
    const auto f = kernels::cross_entropy_forward(x, t, 0, kIgnore);
    const Tensor g = ones({3});
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(Tensor(), t, 0, kIgnore),
                            "cross_entropy_forward: undefined tensor (logits undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(ones({12}), t, 0, kIgnore),
                            "cross_entropy_forward: expected logits [N, C], got f32 [12] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(ones({3, 0}), t, 0, kIgnore),
                            "cross_entropy_forward: logits f32 [3, 0] on cpu have no classes");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x.to(DType::i32), t, 0, kIgnore),
                            "cross_entropy_forward: expected a floating-point tensor, got i32");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, t.to(DType::i32), 0, kIgnore),
                            "cross_entropy_forward: expected target i64 [3] (class indices) for "
                            "logits f32 [3, 4] on cpu, got i32 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, t.slice(0, 0, 2), 0, kIgnore),
                            "got i64 [2] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, t.view({3, 1}), 0, kIgnore),
                            "got i64 [3, 1] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, t, 1.5, kIgnore),
                            "cross_entropy_forward: label_smoothing must be in [0, 1], got 1.5");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, t, -0.1, kIgnore),
                            "label_smoothing must be in [0, 1], got -0.1");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, t, NAN, kIgnore),
                            "label_smoothing must be in [0, 1]");
    // The first bad row is named, with its value; an in-range ignore_index is
    // a class like any other when it is not the target.
    const Tensor bad = from_vector(std::vector<int64_t>{1, 4, -1});
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, bad, 0, kIgnore),
                            "cross_entropy_forward: target 4 at row 1 is out of range for 4 "
                            "classes (ignore_index -100)");
    REQUIRE_THROWS_WITH_MSG(
        kernels::cross_entropy_forward(x, from_vector(std::vector<int64_t>{1, 2, -1}), 0, kIgnore),
        "target -1 at row 2 is out of range for 4 classes");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_forward(x, t, 0, -1),
                            "target -100 at row 2 is out of range for 4 classes (ignore_index -1)");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_backward(g, x, f.lse, bad, 0, kIgnore),
                            "cross_entropy_backward: target 4 at row 1 is out of range");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_backward(ones({4}), x, f.lse, t, 0, kIgnore),
                            "cross_entropy_backward: expected grad_loss [3] for logits f32 [3, 4] "
                            "on cpu, got f32 [4] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::cross_entropy_backward(g.to(DType::i64), x, f.lse, t, 0, kIgnore),
        "cross_entropy_backward: expected a floating-point tensor, got i64");
    REQUIRE_THROWS_WITH_MSG(
        kernels::cross_entropy_backward(g, x, f.lse.to(DType::f32), t, 0, kIgnore),
        "cross_entropy_backward: expected lse f64 [3] (cross_entropy_forward's) "
        "for logits f32 [3, 4] on cpu, got f32 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_backward(Tensor(), x, f.lse, t, 0, kIgnore),
                            "cross_entropy_backward: undefined tensor (grad_loss undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::cross_entropy_backward(g, x, f.lse, t, 2, kIgnore),
                            "cross_entropy_backward: label_smoothing must be in [0, 1], got 2");
}

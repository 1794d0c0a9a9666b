// softmax special cases beside the op table (tests/ops), which checks softmax,
// log_softmax and their backwards against f64 references over shapes, dims,
// layouts and dtypes: large magnitudes, NaN and -inf, the smallest normal
// float, the backwards against central differences of the forwards, thread
// independence, and every error path.
#include <omp.h>

#include <cmath>

#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "ops/reference.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

}  // namespace

TEST_CASE("log_softmax and softmax stay finite for inputs of magnitude 1000", "[softmax]") {
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        const Tensor x = random_tensor({16, 300}, dt, 50, -1000, 1000);
        const Tensor ly = kernels::log_softmax(x, 1);
        for (double v : values(ly)) REQUIRE(std::isfinite(v));
        check_close(ly, ref::softmax(x, 1, true), rtol_for(dt), rtol_for(dt));
        const Tensor y = kernels::softmax(x, 1);
        for (double v : values(y)) REQUIRE(std::isfinite(v));
        check_close(y, ref::softmax(x, 1, false), rtol_for(dt), 1e-7);
        // All equal large values: uniform.
        check_close(kernels::softmax(full({2, 4}, 1000.0, {dt}), 1), std::vector<double>(8, 0.25),
                    0, 0);
    }
}

TEST_CASE("softmax: -inf gives 0, NaN poisons only its own row", "[softmax]") {
    Tensor x = random_tensor({3, 6}, DType::f32, 60);
    x.set({0, 2}, -INFINITY);
    x.set({1, 4}, NAN);
    const std::vector<double> y = values(kernels::softmax(x, 1));
    const std::vector<double> ly = values(kernels::log_softmax(x, 1));
    CHECK(y[2] == 0);
    CHECK(ly[2] == -INFINITY);
    for (int j = 0; j < 6; ++j) {
        CHECK(std::isnan(y[size_t(6 + j)]));
        CHECK(std::isnan(ly[size_t(6 + j)]));
        CHECK(std::isfinite(y[size_t(12 + j)]));
    }
    // Down the columns as well (the strided path).
    const std::vector<double> yc = values(kernels::softmax(x.t().contiguous(), 0));
    CHECK(yc[2 * 3 + 0] == 0);
    CHECK(std::isnan(yc[4 * 3 + 1]));
    CHECK(std::isnan(yc[0 * 3 + 1]));
    CHECK(std::isfinite(yc[0 * 3 + 2]));
}

TEST_CASE("softmax errors name the op, the input and the problem", "[softmax][errors]") {
    const Tensor x = random_tensor({2, 3}, DType::f32, 70);
    REQUIRE_THROWS_WITH_MSG(kernels::softmax(Tensor(), 0), "softmax: undefined tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::log_softmax(Tensor(), 0), "log_softmax: undefined tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::softmax(x, 2),
                            "softmax: dim 2 out of range for input f32 [2, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::log_softmax(x, -3),
                            "log_softmax: dim -3 out of range for input f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::softmax(full({}, 1.0), 1),
                            "softmax: dim 1 out of range for input f32 []");
    const Tensor i = random_tensor({2, 3}, DType::i64, 71, 0, 9);
    REQUIRE_THROWS_WITH_MSG(kernels::softmax(i, 1),
                            "softmax: expected a floating-point tensor, got i64 [2, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::log_softmax(i.to(DType::boolean), 0),
                            "log_softmax: expected a floating-point tensor, got bool");
}

TEST_CASE("softmax keeps terms down to the smallest normal float", "[softmax]") {
    Tensor x = from_vector(std::vector<float>{0.0f, -87.335f, -80.0f});
    const std::vector<double> p = values(kernels::softmax(x, 0));
    const double denom = 1.0 + std::exp(-87.335) + std::exp(-80.0);
    CHECK(p[1] == Approx(std::exp(-87.335) / denom).epsilon(1e-5));
    CHECK(p[2] == Approx(std::exp(-80.0) / denom).epsilon(1e-5));
}

// ---- Backward ------------------------------------------------------------
// numeric_grad: tests/support/support.h.

TEST_CASE("softmax backwards agree with central differences of the forwards",
          "[softmax][backward]") {
    const struct {
        Shape shape;
        int64_t dim;
    } cases[] = {{{5}, 0}, {{3, 4}, 1}, {{3, 4}, 0}, {{2, 3, 4}, 1}, {{1, 1}, 1}};
    uint64_t seed = 300;
    for (const auto& c : cases) {
        for (bool log : {false, true}) {
            INFO(shape_str(c.shape) << " dim " << c.dim << (log ? " log_softmax" : " softmax"));
            const Tensor x = random_tensor(c.shape, DType::f64, seed++, -3, 3);
            const Tensor r = random_tensor(c.shape, DType::f64, seed++, -1, 1);
            auto f = [&](const Tensor& t) {
                return log ? kernels::log_softmax(t, c.dim) : kernels::softmax(t, c.dim);
            };
            const Tensor gx = log ? kernels::log_softmax_backward(r, f(x), c.dim)
                                  : kernels::softmax_backward(r, f(x), c.dim);
            check_close(gx, numeric_grad(x, r, f), 1e-6, 1e-8);
        }
    }
}

// log_softmax's backward reads its own output, (x − m) − log s, which stays
// exact near ±1e4 (x − m of two nearby floats is exact): it never needed an
// lse in f64 as cross_entropy did (Note [lse in f64], kernels/cpu/loss.cpp).
TEST_CASE("log_softmax_backward keeps f32 precision for inputs shifted by 1e4",
          "[softmax][backward]") {
    uint64_t seed = 400;
    for (double shift : {1e4, -1e4}) {
        for (int64_t dim : {1, 0}) {
            INFO("shift " << shift << ", dim " << dim);
            const Tensor x = add(random_tensor({24, 37}, DType::f32, seed++, -4, 4), shift);
            const Tensor g = random_tensor({24, 37}, DType::f32, seed++, -1, 1);
            // f64 reference from the stored f32 inputs: g − softmax(x) · Σ g along dim.
            const std::vector<double> p = ref::softmax(x, dim, false), gv = values(g);
            std::vector<double> want(gv.size());
            for (int64_t i = 0; i < 24; ++i)
                for (int64_t j = 0; j < 37; ++j) {
                    double sum = 0;
                    for (int64_t k2 = 0; k2 < (dim == 1 ? 37 : 24); ++k2)
                        sum += gv[size_t(dim == 1 ? i * 37 + k2 : k2 * 37 + j)];
                    want[size_t(i * 37 + j)] = gv[size_t(i * 37 + j)] - p[size_t(i * 37 + j)] * sum;
                }
            const Tensor gx = kernels::log_softmax_backward(g, kernels::log_softmax(x, dim), dim);
            check_close(gx, want, 1e-5, 1e-6);
        }
    }
}

TEST_CASE("softmax backwards give the same bits for 1 and 2 threads", "[softmax][backward]") {
    for (const Shape& shape : {Shape{64, 3000}, Shape{300, 700, 3}}) {
        INFO(shape_str(shape));
        const Tensor y = kernels::softmax(random_tensor(shape, DType::f32, 400, -5, 5), 1);
        const Tensor g = random_tensor(shape, DType::f32, 401, -1, 1);
        const int saved = omp_get_max_threads();
        omp_set_num_threads(std::max(2, saved));
        const std::vector<float> many = kernels::softmax_backward(g, y, 1).to_vector<float>();
        const std::vector<float> many_log =
            kernels::log_softmax_backward(g, y, 1).to_vector<float>();
        omp_set_num_threads(1);
        const std::vector<float> one = kernels::softmax_backward(g, y, 1).to_vector<float>();
        const std::vector<float> one_log =
            kernels::log_softmax_backward(g, y, 1).to_vector<float>();
        omp_set_num_threads(saved);
        CHECK(many == one);
        CHECK(many_log == one_log);
    }
}

TEST_CASE("softmax backward errors name the op and the tensors", "[softmax][backward][errors]") {
    const Tensor y = random_tensor({2, 3}, DType::f32, 500);
    REQUIRE_THROWS_WITH_MSG(kernels::softmax_backward(Tensor(), y, 1),
                            "softmax_backward: undefined tensor (grad_y undefined, y f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::log_softmax_backward(random_tensor({3, 2}, DType::f32, 501), y, 1),
        "log_softmax_backward: grad_y f32 [3, 2] on cpu must have the shape and dtype of y "
        "f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::softmax_backward(y.to(DType::f64), y, 1),
                            "softmax_backward: grad_y f64 [2, 3] on cpu must have the shape");
    REQUIRE_THROWS_WITH_MSG(kernels::softmax_backward(y, y, 2),
                            "softmax_backward: dim 2 out of range for input f32 [2, 3]");
    const Tensor i = random_tensor({2, 3}, DType::i64, 502, 0, 9);
    REQUIRE_THROWS_WITH_MSG(kernels::log_softmax_backward(i, i, 1),
                            "log_softmax_backward: expected a floating-point tensor, got i64");
}

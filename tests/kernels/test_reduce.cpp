// Reduction special cases beside the op table (tests/ops), which checks sum,
// mean, norm, var, std, amax and amin against f64 references: known values,
// integer sums past the input type, the accuracy of f32 sums, thread-count
// independence, corrections >= n, NaN and inf, max/min/argmax/argmin with
// ties and NaN over shapes and layouts, and every error path.
#include <omp.h>

#include <cmath>
#include <limits>

#include "kernels/reduce.h"
#include "ops/op_table.h"
#include "ops/reference.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// For each output element, the input values reduced into it, in order along
// the reduced dim.
std::vector<std::vector<double>> group_values(const Tensor& x, const ref::Groups& g) {
    std::vector<std::vector<double>> out(size_t(g.outputs));
    const std::vector<double> v = values(x);
    for (size_t i = 0; i < v.size(); ++i) out[size_t(g.out_of[i])].push_back(v[i]);
    return out;
}

const Layout kLayouts[] = {Layout::contiguous, Layout::transposed, Layout::strided,
                           Layout::reversed};

}  // namespace

TEST_CASE("known values", "[reduce]") {
    const Tensor x = from_vector(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
    check_close(kernels::sum(x, {0}), {5, 7, 9});
    check_close(kernels::sum(x, {1}, true), {6, 15});
    REQUIRE(kernels::sum(x, {1}, true).shape() == Shape{2, 1});
    check_close(kernels::mean(x), {3.5});
    check_close(kernels::var(x, {1}), {1, 1});
    check_close(kernels::std(x, {0}, 0), {1.5, 1.5, 1.5});
    check_close(kernels::norm(x, 1, {1}), {6, 15});
    check_close(kernels::norm(x, INFINITY), {6});
    check_close(kernels::amin(x, {0}), {1, 2, 3});
    const ValuesIndices m = kernels::max(x, 0);
    check_close(m.values, {4, 5, 6});
    check_close(m.indices, {1, 1, 1});
}

TEST_CASE("u8 and i32 sums do not wrap in the input type", "[reduce]") {
    check_close(kernels::sum(full({1000}, 200, {DType::u8})), {200000}, 0, 0);
    check_close(kernels::sum(full({3}, 2e9, {DType::i32})), {6e9}, 0, 0);
}

TEST_CASE("f32 sums are pairwise: 16M x 0.1f stays accurate", "[reduce][accuracy]") {
    const int64_t n = int64_t(1) << 24;
    const double exact = double(n) * double(0.1f);
    // A running f32 sum drifts once the total dwarfs 0.1: 15% high here.
    float naive = 0;
    for (int64_t i = 0; i < n; ++i) naive += 0.1f;
    CHECK(std::abs(naive - exact) / exact > 1e-2);

    const Tensor flat = full({n}, 0.1);
    const double all = kernels::sum(flat).item();
    INFO("full sum " << all << " vs " << exact);
    CHECK(std::abs(all - exact) / exact < 1e-6);
    // Along the last dim of rows, and down the columns of a [4M, 4] (the column path).
    const Tensor rows = kernels::sum(flat.view({4, n / 4}), {1});
    for (double v : values(rows)) CHECK(std::abs(v - exact / 4) / (exact / 4) < 1e-6);
    const Tensor cols = kernels::sum(flat.view({n / 4, 4}), {0});
    for (double v : values(cols)) CHECK(std::abs(v - exact / 4) / (exact / 4) < 1e-6);
    CHECK(std::abs(kernels::mean(flat).item() - double(0.1f)) < 1e-6 * 0.1);
}

TEST_CASE("results do not depend on the number of threads", "[reduce]") {
    // 5 long rows and 5 column strips: cut into chunks with several threads
    // (fewer than 4 items per thread), whole with one.
    const Tensor x = random_tensor({5, 300000}, DType::f32, 7);
    const Tensor y = random_tensor({5, 1100, 3}, DType::f32, 8);
    const auto run = [&] {
        return std::vector<Tensor>{
            kernels::sum(x),      kernels::sum(x, {1}),       kernels::sum(y, {1}),
            kernels::var(x, {1}), kernels::max(x, 1).indices, kernels::argmin(x)};
    };
    const std::vector<Tensor> many = run();
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    const std::vector<Tensor> one = run();
    omp_set_num_threads(threads);
    for (size_t i = 0; i < many.size(); ++i) CHECK(values(many[i]) == values(one[i]));
}

TEST_CASE("var and std with correction >= n divide by zero like PyTorch", "[reduce]") {
    const Tensor two = from_vector(std::vector<double>{1, 2});
    check_close(kernels::var(two, {}, 0), {0.25});
    check_close(kernels::var(two, {}, 1), {0.5});
    check_close(kernels::var(two, {}, 2), {INFINITY});  // 0.5 / 0
    check_close(kernels::var(two, {}, 5), {INFINITY});
    check_close(kernels::var(two, {}, 0.5), {1.0 / 3});
    check_close(kernels::var(from_vector(std::vector<double>{3, 3}), {}, 2), {NAN});  // 0 / 0
    check_close(kernels::std(from_vector(std::vector<float>{5}), {0}), {NAN});
    check_close(kernels::var(empty({0})), {NAN});
    check_close(kernels::mean(empty({0, 3}), {0}), {NAN, NAN, NAN});
    check_close(kernels::sum(empty({0, 3}), {0}), {0, 0, 0});
    check_close(kernels::norm(empty({0})), {0.0});
    check_close(kernels::norm(empty({0}), INFINITY), {0.0});
}

TEST_CASE("reductions propagate NaN and inf", "[reduce]") {
    Tensor x = random_tensor({4, 50}, DType::f32, 9);
    x.set({1, 7}, NAN);
    x.set({2, 3}, INFINITY);
    x.set({3, 3}, -INFINITY);
    const std::vector<double> s = values(kernels::sum(x, {1}));
    CHECK(std::isnan(s[1]));
    CHECK(s[2] == INFINITY);
    CHECK(s[3] == -INFINITY);
    CHECK(std::isfinite(s[0]));
    CHECK(std::isnan(kernels::amax(x, {1}).at({1})));
    CHECK(std::isnan(kernels::amin(x, {1}).at({1})));
    CHECK(kernels::amax(x, {1}).at({2}) == INFINITY);
    CHECK(kernels::amin(x, {1}).at({3}) == -INFINITY);
    CHECK(std::isnan(kernels::norm(x, INFINITY, {1}).at({1})));
    CHECK(std::isnan(kernels::var(x, {1}).at({1})));
}

namespace {

// First index of the max (min) of g, a NaN counting as the max (min).
int64_t ref_arg(const std::vector<double>& g, bool is_max) {
    int64_t best = 0;
    for (int64_t i = 0; i < int64_t(g.size()); ++i) {
        if (std::isnan(g[size_t(i)])) return i;
        if (is_max ? g[size_t(i)] > g[size_t(best)] : g[size_t(i)] < g[size_t(best)]) best = i;
    }
    return best;
}

}  // namespace

TEST_CASE("max/min return the first extreme and its index; NaN wins", "[reduce]") {
    struct DimCase {
        Shape shape;
        int64_t dim;
    };
    const DimCase cases[] = {{{}, 0},         {{1}, 0},          {{9}, 0},        {{9}, -1},
                             {{4, 6}, 0},     {{4, 6}, 1},       {{3, 5, 4}, 1},  {{3, 5, 4}, -3},
                             {{2, 1, 3}, 1},  {{0, 3}, 1},       {{300, 200}, 1}, {{300, 200}, 0},
                             {{2, 80000}, 1}, {{40, 900, 3}, 1}, {{30, 2100}, 0}};
    uint64_t seed = 200;
    for (const DimCase& c : cases) {
        for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::u8}) {
            // Few distinct values, so ties are common.
            Tensor x = random_tensor(c.shape, DType::i64, seed++, 0, 4).to(dt);
            if (is_floating(dt) && x.numel() > 20) {  // NaNs in some rows, two in one
                x.view({-1}).set({3}, NAN);
                x.view({-1}).set({11}, NAN);
                x.view({-1}).set({x.numel() - 2}, NAN);
            }
            for (Layout layout : kLayouts) {
                const std::optional<std::vector<Tensor>> in = in_layout({x}, layout);
                if (!in) continue;
                const Tensor& xl = in->at(0);
                for (bool keepdim : {false, true}) {
                    if (keepdim && layout != Layout::contiguous) continue;
                    INFO(str(dtype_name(dt), " ", shape_str(c.shape), " dim ", c.dim, " layout ",
                             int(layout), keepdim ? " keepdim" : ""));
                    const ref::Groups g = ref::groups(xl.shape(), {c.dim}, keepdim);
                    const std::vector<std::vector<double>> groups = group_values(xl, g);
                    for (bool is_max : {true, false}) {
                        std::vector<double> want_v, want_i;
                        for (const std::vector<double>& v : groups) {
                            want_i.push_back(double(ref_arg(v, is_max)));
                            want_v.push_back(v[size_t(want_i.back())]);
                        }
                        const ValuesIndices r = is_max ? kernels::max(xl, c.dim, keepdim)
                                                       : kernels::min(xl, c.dim, keepdim);
                        REQUIRE(r.values.shape() == g.out_shape);
                        REQUIRE(r.values.dtype() == dt);
                        REQUIRE(r.indices.dtype() == DType::i64);
                        check_close(r.values, want_v, 0, 0);
                        check_close(r.indices, want_i, 0, 0);
                        check_close(is_max ? kernels::argmax(xl, c.dim, keepdim)
                                           : kernels::argmin(xl, c.dim, keepdim),
                                    want_i, 0, 0);
                    }
                }
            }
        }
    }
}

TEST_CASE("argmax/argmin without a dim index the flattened tensor", "[reduce]") {
    Tensor x = random_tensor({30, 40}, DType::f32, 300);
    x.set({17, 5}, 10);
    x.set({20, 1}, 10);  // a later tie
    x.set({2, 9}, -10);
    CHECK(kernels::argmax(x).item() == 17 * 40 + 5);
    CHECK(kernels::argmin(x).item() == 2 * 40 + 9);
    CHECK(kernels::argmax(x).dim() == 0);
    CHECK(kernels::argmax(x, std::nullopt, true).shape() == Shape{1, 1});
    // Flattened in logical order, whatever the layout.
    CHECK(kernels::argmax(non_contiguous(x)).item() == 17 * 40 + 5);
    CHECK(kernels::argmax(x.t()).item() ==
          1 * 30 + 20);  // the tie at x[20, 1] comes first in x.t()
    Tensor big = random_tensor({200000}, DType::f32, 301);
    big.view({-1}).set({123456}, 5);
    CHECK(kernels::argmax(big).item() == 123456);
    big.set({7}, NAN);
    CHECK(kernels::argmax(big).item() == 7);
    CHECK(kernels::argmin(big).item() == 7);
    CHECK(kernels::argmax(full({}, 3.0)).item() == 0);
}

TEST_CASE("reduction errors name the op, the input and the problem", "[reduce][errors]") {
    const Tensor x = random_tensor({2, 3}, DType::f32, 400);
    REQUIRE_THROWS_WITH_MSG(kernels::sum(Tensor()), "sum: undefined tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::max(Tensor(), 0), "max: undefined tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::argmax(Tensor()), "argmax: undefined tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::sum(x, {2}),
                            "sum: dim 2 out of range for input f32 [2, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::amax(x, {-3}),
                            "amax: dim -3 out of range for input f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::mean(x, {1, -1}),
                            "mean: dim -1 appears twice in dims [1, -1] for input f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::max(x, 5), "max: dim 5 out of range for input f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::sum(full({}, 1.0), {1}),
                            "sum: dim 1 out of range for input f32 [] on cpu");
    const Tensor i = random_tensor({2, 3}, DType::i32, 401, 0, 9);
    REQUIRE_THROWS_WITH_MSG(kernels::mean(i),
                            "mean: expected a floating-point tensor, got i32 [2, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::var(i),
                            "var: expected a floating-point tensor, got i32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::std(i.to(DType::boolean)),
                            "std: expected a floating-point tensor, got bool");
    REQUIRE_THROWS_WITH_MSG(kernels::norm(i), "norm: expected a floating-point tensor, got i32");
    REQUIRE_THROWS_WITH_MSG(kernels::norm(x, 3),
                            "norm: p must be 1, 2 or inf, got 3 for input f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::norm(x, -INFINITY), "norm: p must be 1, 2 or inf, got -inf");
    const Tensor e = empty({0, 3});
    REQUIRE_THROWS_WITH_MSG(
        kernels::amax(e, {0}),
        "amax: cannot reduce over an empty dim of input f32 [0, 3] on cpu (dims [0])");
    REQUIRE_THROWS_WITH_MSG(kernels::amin(e),
                            "amin: cannot reduce over an empty dim of input f32 [0, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::max(e, 0),
                            "max: cannot reduce over dim 0 of size 0 of input f32 [0, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::argmin(e, -2), "argmin: cannot reduce over dim -2 of size 0");
    REQUIRE_THROWS_WITH_MSG(kernels::argmax(e),
                            "argmax: cannot take the argmax of an empty input f32 [0, 3]");
    // Reducing the non-empty dim of an empty tensor is fine: an empty result.
    CHECK(kernels::amax(e, {1}).shape() == Shape{0});
    CHECK(kernels::max(e, 1).indices.shape() == Shape{0});
}

TEST_CASE("reductions of empty tensors with huge dims do not overflow", "[reduce][errors]") {
    Tensor z = empty({0, int64_t(1) << 40, int64_t(1) << 40});
    CHECK(kernels::sum(z, {1, 2}).shape() == Shape{0});
    CHECK(kernels::amax(z, {1, 2}).shape() == Shape{0});
    // A kept empty dim still reduces over a non-empty one.
    CHECK(kernels::max(empty({0, 5}), 1).values.shape() == Shape{0});
}

TEST_CASE("column sums over a long, narrow tensor stay exact", "[reduce]") {
    Tensor x = random_tensor({300001, 2}, DType::f32, 17);
    const std::vector<double> v = values(x);
    double s0 = 0, s1 = 0;
    for (size_t i = 0; i < v.size(); i += 2) s0 += v[i], s1 += v[i + 1];
    check_close(kernels::sum(x, {0}), std::vector<double>{s0, s1}, 1e-5, 1e-3);
}

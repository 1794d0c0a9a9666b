// matmul, bmm, addmm and linear against a naive f64 reference of
// torch.matmul's rules: shape tables with size-0/1 dims, 1-d operands and
// batch broadcasting, every supported dtype, transposed/sliced/expanded
// operands, sizes that take the threaded paths, a poisoned output, errors.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/cpu/gemm_bf16.h"
#include "kernels/cpu/matmul.h"
#include "kernels/front.h"
#include "kernels/matmul.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// torch.matmul on the logical (row-major) values of a and b, in f64 with
// plain loops: 1-d operands become a row (left) or column (right) vector,
// leading dims broadcast. Returns the values; `shape` gets the result shape.
std::vector<double> reference_matmul(const Tensor& a, const Tensor& b, Shape* shape) {
    Shape as = a.shape(), bs = b.shape();
    if (a.dim() == 1) as.insert(as.begin(), 1);
    if (b.dim() == 1) bs.push_back(1);
    const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
    const size_t nb = std::max(ab.size(), bb.size());
    Shape batch(nb);
    for (size_t i = 0; i < nb; ++i) {
        const int64_t x = i + ab.size() >= nb ? ab[i + ab.size() - nb] : 1;
        const int64_t y = i + bb.size() >= nb ? bb[i + bb.size() - nb] : 1;
        batch[i] = x == 1 ? y : x;
    }
    // Flat matrix index of batch index `idx` in an operand with batch dims `ob`.
    auto source = [&](const Shape& idx, const Shape& ob) {
        int64_t f = 0;
        for (size_t i = 0; i < ob.size(); ++i) {
            const int64_t size = ob[i], at = idx[i + nb - ob.size()];
            f = f * size + (size == 1 ? 0 : at);
        }
        return f;
    };
    const std::vector<double> va = values(a), vb = values(b);
    const int64_t nbatch = shape_numel(batch);
    std::vector<double> out(size_t(nbatch * m * n), 0.0);
    for (int64_t t = 0; t < nbatch; ++t) {
        const Shape idx = unravel(t, batch);
        const double* pa = va.data() + source(idx, ab) * m * k;
        const double* pb = vb.data() + source(idx, bb) * k * n;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t p = 0; p < k; ++p) s += pa[i * k + p] * pb[p * n + j];
                out[size_t((t * m + i) * n + j)] = s;
            }
    }
    *shape = batch;
    if (a.dim() > 1) shape->push_back(m);
    if (b.dim() > 1) shape->push_back(n);
    return out;
}

// Absolute slack for a sum of k products of inputs in [-2, 2), on top of the
// dtype's relative tolerance (f16/bf16 accumulate in f32).
double atol_for(DType t, int64_t k) {
    if (t == DType::f64) return 1e-14 * double(k + 1);
    if (t == DType::i32 || t == DType::i64) return 0;
    return 5e-7 * double(k + 1);
}

std::string describe_pair(const Tensor& a, const Tensor& b) {
    return str(dtype_name(a.dtype()), " ", shape_str(a.shape()), " strides ",
               shape_str(a.strides()), " @ ", shape_str(b.shape()), " strides ",
               shape_str(b.strides()));
}

double rtol_of(DType t) { return is_floating(t) ? rtol_for(t) : 0.0; }

// Checks kernels::matmul(a, b) against the reference (shape and values).
void check_matmul(const Tensor& a, const Tensor& b) {
    Shape want;
    const std::vector<double> expected = reference_matmul(a, b, &want);
    const Tensor got = kernels::matmul(a, b);
    INFO(describe_pair(a, b));
    REQUIRE(got.dtype() == a.dtype());
    REQUIRE(got.shape() == want);
    const int64_t k = a.size(-1);
    check_close(got, expected, rtol_of(a.dtype()), atol_for(a.dtype(), k));
}

}  // namespace

TEST_CASE("matmul matches the f64 reference over a shape table and every dtype", "[matmul]") {
    struct Case {
        Shape a, b, out;
    };
    const Case cases[] = {
        {{3}, {3}, {}},  // dot product
        {{0}, {0}, {}},  // empty dot product is 0
        {{1}, {1}, {}},
        {{2, 3}, {3}, {2}},  // matrix · vector
        {{3}, {3, 4}, {4}},  // vector · matrix
        {{1, 1}, {1, 1}, {1, 1}},
        {{5, 7}, {7, 3}, {5, 3}},
        {{4, 0}, {0, 5}, {4, 5}},  // K = 0 gives zeros
        {{0, 3}, {3, 2}, {0, 2}},
        {{3, 2}, {2, 0}, {3, 0}},
        {{2, 1, 3, 4}, {5, 4, 2}, {2, 5, 3, 2}},  // batch broadcasting both ways
        {{7}, {2, 7, 3}, {2, 3}},
        {{2, 4, 5}, {5}, {2, 4}},
        {{3, 4, 5}, {5, 2}, {3, 4, 2}},  // shared right operand (folded)
        {{4, 5}, {3, 5, 2}, {3, 4, 2}},  // shared left operand
        {{1, 3, 4}, {2, 4, 6}, {2, 3, 6}},
        {{0, 2, 3}, {3, 4}, {0, 2, 4}},
        {{2, 2, 3, 0}, {1, 0, 4}, {2, 2, 3, 4}},  // batched K = 0
        {{6, 1, 1}, {6, 1, 1}, {6, 1, 1}},
        {{2, 3, 1, 4}, {3, 4, 1}, {2, 3, 1, 1}},
    };
    const DType dtypes[] = {DType::f32,  DType::f64, DType::f16,
                            DType::bf16, DType::i32, DType::i64};
    uint64_t seed = 100;
    for (const Case& c : cases) {
        for (DType dt : dtypes) {
            const Tensor a = random_tensor(c.a, dt, ++seed), b = random_tensor(c.b, dt, ++seed);
            INFO("case " << shape_str(c.a) << " @ " << shape_str(c.b) << " " << dtype_name(dt));
            REQUIRE(kernels::matmul(a, b).shape() == c.out);
            check_matmul(a, b);
            check_matmul(non_contiguous(a), non_contiguous(b));
        }
    }
}

TEST_CASE("matmul reads transposed, sliced, expanded and strided operands", "[matmul]") {
    const Tensor a = random_tensor({6, 8}, DType::f32, 1);
    const Tensor w = random_tensor({5, 8}, DType::f32, 2);
    const Tensor big = random_tensor({10, 12}, DType::f32, 3);
    check_matmul(a, w.t());  // column-major right
    check_matmul(w, a.t());
    check_matmul(a.t(), random_tensor({6, 3}, DType::f32, 4));  // column-major left
    check_matmul(big.slice(0, 1, 9).slice(1, 2, 11), random_tensor({9, 4}, DType::f32, 5));
    check_matmul(big.slice(1, 0, 12, 2),
                 random_tensor({6, 3}, DType::f32, 6));  // both strides != 1
    check_matmul(random_tensor({7, 3}, DType::f32, 7), big.slice(0, 0, 6, 2).slice(1, 0, 12, 3));
    check_matmul(random_tensor({1, 5}, DType::f32, 8).expand({4, 5}),  // stride-0 rows
                 random_tensor({5, 3}, DType::f32, 9));
    check_matmul(random_tensor({5, 1}, DType::f32, 10).expand({5, 4}).t(),
                 random_tensor({5, 2}, DType::f32, 11));
    check_matmul(big.slice(1, 0, 12, 2).select(0, 3), random_tensor({6}, DType::f32, 12));
    check_matmul(random_tensor({3, 5, 4}, DType::f64, 13).transpose(1, 2),
                 random_tensor({3, 5, 2}, DType::f64, 14));
    check_matmul(random_tensor({4, 3, 5, 6}, DType::f64, 15).permute({1, 0, 2, 3}),
                 random_tensor({6, 2}, DType::f64, 16));
    check_matmul(random_tensor({2, 6, 5}, DType::f64, 17),
                 random_tensor({2, 5, 4}, DType::f64, 18).slice(2, 0, 4, 2));
}

TEST_CASE("matmul is right on sizes that take the threaded paths", "[matmul]") {
    // One GEMM Eigen threads; a batch run one matrix per thread; a batch
    // folded into one tall GEMM; and one that cannot fold (transposed rows).
    check_matmul(random_tensor({256, 300}, DType::f32, 21),
                 random_tensor({300, 200}, DType::f32, 22));
    check_matmul(random_tensor({200, 130}, DType::f64, 23),
                 random_tensor({170, 130}, DType::f64, 24).t());
    check_matmul(random_tensor({16, 40, 30}, DType::f32, 25),
                 random_tensor({16, 30, 20}, DType::f32, 26));
    check_matmul(random_tensor({64, 16, 16}, DType::i64, 27),
                 random_tensor({64, 16, 16}, DType::i64, 28));
    check_matmul(random_tensor({8, 64, 100}, DType::f32, 29),
                 random_tensor({100, 50}, DType::f32, 30));
    check_matmul(random_tensor({8, 100, 64}, DType::f32, 31).transpose(1, 2),
                 random_tensor({100, 50}, DType::f32, 32));
    check_matmul(random_tensor({4, 64, 96}, DType::bf16, 33),
                 random_tensor({96, 40}, DType::bf16, 34));
}

TEST_CASE("bmm, addmm and linear match the reference", "[matmul]") {
    const Tensor a = random_tensor({3, 4, 5}, DType::f32, 41),
                 b = random_tensor({3, 5, 2}, DType::f32, 42);
    Shape shape;
    check_close(kernels::bmm(a, b), reference_matmul(a, b, &shape), 2e-5, atol_for(DType::f32, 5));

    for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        INFO(dtype_name(dt));
        const Tensor m1 = random_tensor({3, 4}, dt, 43), m2 = random_tensor({4, 2}, dt, 44);
        const std::vector<double> prod = reference_matmul(m1, m2, &shape);
        for (const Shape& cs : {Shape{2}, Shape{3, 1}, Shape{3, 2}, Shape{}}) {
            INFO("c " << shape_str(cs));
            const Tensor c = random_tensor(cs, dt, 45);
            const Tensor cc = c.expand({3, 2}).contiguous();
            std::vector<double> want = values(cc);
            for (size_t i = 0; i < want.size(); ++i) want[i] += prod[i];
            check_close(kernels::addmm(c, m1, m2), want, rtol_for(dt), atol_for(dt, 4));
        }

        // linear: x [2, 3, 5] (also strided), w [4, 5], bias [4] -> [2, 3, 4].
        const Tensor x = random_tensor({2, 3, 5}, dt, 46), w = random_tensor({4, 5}, dt, 47);
        const Tensor bias = random_tensor({4}, dt, 48);
        for (const Tensor& xi : {x, non_contiguous(x), x.select(1, 2), x.permute({1, 0, 2})}) {
            INFO("x " << shape_str(xi.shape()) << " strides " << shape_str(xi.strides()));
            std::vector<double> want = reference_matmul(xi, w.t(), &shape);
            const std::vector<double> vb = values(bias);
            const Tensor y0 = kernels::linear(xi, w);
            REQUIRE(y0.shape() == shape);
            check_close(y0, want, rtol_for(dt), atol_for(dt, 5));
            for (size_t i = 0; i < want.size(); ++i) want[i] += vb[i % 4];
            const Tensor y = kernels::linear(xi, w, bias);
            REQUIRE(y.dtype() == dt);
            check_close(y, want, rtol_for(dt), atol_for(dt, 5));
        }
    }
    REQUIRE(kernels::linear(random_tensor({0, 5}, DType::f32, 49),
                            random_tensor({4, 5}, DType::f32, 50),
                            random_tensor({4}, DType::f32, 51))
                .shape() == Shape{0, 4});
}

TEST_CASE("linear_relu and linear_weight_grad match the reference", "[matmul]") {
    for (DType dt : {DType::f32, DType::f64, DType::bf16}) {
        INFO(dtype_name(dt));
        // linear_relu: max(x·wᵀ + b, 0), with and without bias, 1-d to 3-d x.
        const Tensor w = random_tensor({6, 5}, dt, 60), bias = random_tensor({6}, dt, 61);
        for (const Shape& sx : {Shape{5}, Shape{4, 5}, Shape{2, 3, 5}}) {
            INFO("x " << shape_str(sx));
            const Tensor x = random_tensor(sx, dt, 62);
            Shape shape;
            std::vector<double> want =
                reference_matmul(x.dim() == 1 ? x.unsqueeze(0) : x, w.t(), &shape);
            const std::vector<double> vb = values(bias);
            std::vector<double> nb = want;
            for (size_t i = 0; i < want.size(); ++i) {
                want[i] = std::max(want[i] + vb[i % 6], 0.0);
                nb[i] = std::max(nb[i], 0.0);
            }
            const Tensor y = kernels::linear_relu(x, w, bias);
            Shape ys = sx;
            ys.back() = 6;
            REQUIRE(y.shape() == ys);
            REQUIRE(y.dtype() == dt);
            check_close(y, want, rtol_for(dt), atol_for(dt, 5));
            check_close(kernels::linear_relu(x, w), nb, rtol_for(dt), atol_for(dt, 5));
        }

        // linear_weight_grad: gᵀ·x and the column sums of g, from strided operands too.
        const Tensor g = random_tensor({7, 6}, dt, 63), x = random_tensor({7, 5}, dt, 64);
        for (const bool strided : {false, true}) {
            const Tensor gi = strided ? non_contiguous(g) : g,
                         xi = strided ? x.t().contiguous().t() : x;  // column-major
            Shape shape;
            const std::vector<double> want_w = reference_matmul(g.t(), x, &shape);
            std::vector<double> want_b(6, 0.0);
            const std::vector<double> vg = values(g);
            for (size_t i = 0; i < vg.size(); ++i) want_b[i % 6] += vg[i];
            const kernels::LinearWeightGrads r = kernels::linear_weight_grad(gi, xi, true);
            REQUIRE(r.weight.shape() == Shape{6, 5});
            REQUIRE(r.bias.shape() == Shape{6});
            REQUIRE(r.bias.dtype() == dt);
            check_close(r.weight, want_w, rtol_for(dt), atol_for(dt, 7));
            check_close(r.bias, want_b, rtol_for(dt), atol_for(dt, 7));
            CHECK_FALSE(kernels::linear_weight_grad(gi, xi, false).bias.defined());
        }
    }
    // linear_gelu: GELU's tanh form of x·wᵀ + b, and the pre-activation.
    for (DType dt : {DType::f32, DType::f64}) {
        INFO("linear_gelu " << dtype_name(dt));
        const Tensor x = random_tensor({4, 5}, dt, 65, -2, 2), w = random_tensor({6, 5}, dt, 66);
        const Tensor bias = random_tensor({6}, dt, 67);
        Shape shape;
        std::vector<double> pre = reference_matmul(x, w.t(), &shape), out(pre.size());
        const std::vector<double> vb = values(bias);
        for (size_t i = 0; i < pre.size(); ++i) {
            const double z = pre[i] += vb[i % 6];
            out[i] = 0.5 * z * (1 + std::tanh(0.7978845608028654 * (z + 0.044715 * z * z * z)));
        }
        const kernels::LinearGelu r = kernels::linear_gelu(x, w, bias);
        REQUIRE(r.out.shape() == Shape{4, 6});
        REQUIRE(r.pre.shape() == Shape{4, 6});
        check_close(r.pre, pre, rtol_for(dt), atol_for(dt, 5));
        check_close(r.out, out, rtol_for(dt), atol_for(dt, 5));
        const kernels::LinearGelu no_pre = kernels::linear_gelu(x, w, bias, false);
        CHECK_FALSE(no_pre.pre.defined());
        check_close(no_pre.out, r.out, 0, 0);
    }
    REQUIRE_THROWS_WITH_MSG(kernels::linear_weight_grad(zeros({3, 4}), zeros({2, 5}), true),
                            "linear_weight_grad: expected grad [rows, out] and input [rows, in]");
    REQUIRE_THROWS_WITH_MSG(kernels::linear_relu(zeros({3, 4}), zeros({2, 5})),
                            "linear_relu: input f32 [3, 4]");
}

TEST_CASE("linear_weight_grad: f32 gradients from bf16 operands, the f32 sums unrounded",
          "[matmul]") {
    // 300 rows: sums long enough that f32 keeps bits bf16 does not.
    const Tensor g = random_tensor({300, 70}, DType::bf16, 71), x = random_tensor({300, 90}, DType::bf16, 72);
    Shape shape;
    const std::vector<double> want_w = reference_matmul(g.t(), x, &shape);
    std::vector<double> want_b(70, 0.0);
    const std::vector<double> vg = values(g);
    for (size_t i = 0; i < vg.size(); ++i) want_b[i % 70] += vg[i];
    for (const bool strided : {false, true}) {
        INFO((strided ? "strided" : "contiguous"));
        const Tensor gi = strided ? non_contiguous(g) : g;
        const kernels::LinearWeightGrads wide = kernels::linear_weight_grad(gi, x, true, DType::f32);
        const kernels::LinearWeightGrads low = kernels::linear_weight_grad(gi, x, true);
        REQUIRE(wide.weight.dtype() == DType::f32);
        REQUIRE(wide.bias.dtype() == DType::f32);
        // The products are exact and summed in f32: within f32's rounding of
        // 300 terms, far inside bf16's (2^-8).
        check_close(wide.weight, want_w, 1e-5, 1e-5);
        check_close(wide.bias, want_b, 1e-6, 1e-6);
        // The same sums as the bf16 result's, which rounds them once more.
        check_close(wide.weight.to(DType::bf16).to(DType::f32), low.weight.to(DType::f32), 0, 0);
        check_close(wide.bias.to(DType::bf16).to(DType::f32), low.bias.to(DType::f32), 0, 0);
        CHECK(sum(abs(sub(wide.weight, wide.weight.to(DType::bf16).to(DType::f32)))).item() > 0);
        CHECK_FALSE(kernels::linear_weight_grad(gi, x, false, DType::f32).bias.defined());
    }
    // f32 operands give f32; f32 gradients come only from f16 or bf16.
    const Tensor g32 = g.to(DType::f32), x32 = x.to(DType::f32);
    check_close(kernels::linear_weight_grad(g32, x32, true, DType::f32).weight,
                kernels::linear_weight_grad(g32, x32, true).weight, 0, 0);
    REQUIRE_THROWS_WITH_MSG(kernels::linear_weight_grad(g32, x32, true, DType::bf16),
                            "linear_weight_grad: gradients in bf16 from f32 operands");
}

TEST_CASE("cpu::matmul overwrites a poisoned output, zeroes it for K = 0, accumulates on request",
          "[matmul]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (int64_t k : {int64_t(0), int64_t(6)}) {
        INFO("K = " << k);
        const Tensor a = random_tensor({5, k}, DType::f32, 61),
                     b = random_tensor({k, 7}, DType::f32, 62);
        Shape shape;
        const std::vector<double> want = reference_matmul(a, b, &shape);
        Tensor out = full({5, 7}, nan);
        kernels::cpu::matmul(kernels::view_of(out), kernels::view_of(a), kernels::view_of(b));
        check_close(out, want, 2e-5, atol_for(DType::f32, k));

        out = full({5, 7}, 1.5);
        kernels::cpu::matmul(kernels::view_of(out), kernels::view_of(a), kernels::view_of(b), true);
        std::vector<double> acc = want;
        for (double& v : acc) v += 1.5;
        check_close(out, acc, 2e-5, atol_for(DType::f32, k));
    }
}

TEST_CASE("matmul errors name the op, shapes and dtypes", "[matmul][errors]") {
    const Tensor m23 = random_tensor({2, 3}, DType::f32, 71),
                 m45 = random_tensor({4, 5}, DType::f32, 72);
    REQUIRE_THROWS_WITH_MSG(kernels::matmul(full({}, 1.0), m23),
                            "matmul: both operands need at least 1 dim");
    REQUIRE_THROWS_WITH_MSG(kernels::matmul(m23, m45),
                            "matmul: cannot multiply f32 [2, 3] on cpu by f32 [4, 5] on cpu: inner "
                            "dims 3 and 4 differ");
    REQUIRE_THROWS_WITH_MSG(
        kernels::matmul(random_tensor({3}, DType::f32, 73), random_tensor({4}, DType::f32, 74)),
        "inner dims 3 and 4 differ");
    REQUIRE_THROWS_WITH_MSG(
        kernels::matmul(m23, random_tensor({3, 2}, DType::f64, 75)),
        "matmul: expected operands of one dtype, got f32 [2, 3] on cpu and f64 [3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::matmul(random_tensor({2, 2}, DType::u8, 76, 0, 3),
                                            random_tensor({2, 2}, DType::u8, 77, 0, 3)),
                            "matmul: dtype u8 is not supported");
    REQUIRE_THROWS_WITH_MSG(
        kernels::matmul(random_tensor({2, 3, 4}, DType::f32, 78),
                        random_tensor({3, 4, 5}, DType::f32, 79)),
        "matmul: batch dims of f32 [2, 3, 4] on cpu and f32 [3, 4, 5] on cpu do not broadcast");
    REQUIRE_THROWS_WITH_MSG(kernels::bmm(m23, m23.t()), "bmm: expected 3-d operands");
    REQUIRE_THROWS_WITH_MSG(kernels::bmm(random_tensor({2, 3, 4}, DType::f32, 80),
                                         random_tensor({1, 4, 5}, DType::f32, 81)),
                            "bmm: batch sizes differ");
    REQUIRE_THROWS_WITH_MSG(
        kernels::addmm(random_tensor({3}, DType::f32, 82), m23,
                       random_tensor({3, 4}, DType::f32, 83)),
        "addmm: f32 [3] on cpu does not broadcast to the product's shape [2, 4]");
    REQUIRE_THROWS_WITH_MSG(kernels::addmm(m23, m23, random_tensor({3, 3, 3}, DType::f32, 84)),
                            "addmm: expected 2-d operands");
    const Tensor w = random_tensor({4, 3}, DType::f32, 85);
    REQUIRE_THROWS_WITH_MSG(kernels::linear(m23, w.view({4, 3, 1})),
                            "linear: expected a 2-d weight [out, in]");
    REQUIRE_THROWS_WITH_MSG(kernels::linear(m45, w),
                            "linear: input f32 [4, 5] on cpu does not end in the 3 input features");
    REQUIRE_THROWS_WITH_MSG(
        kernels::linear(m23, w, random_tensor({3}, DType::f32, 86)),
        "linear: expected bias [4] for weight f32 [4, 3] on cpu, got f32 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::linear(m23, w, random_tensor({4}, DType::f64, 87)),
                            "linear: expected operands of one dtype");
    REQUIRE_THROWS_WITH_MSG(kernels::matmul(m23, Tensor()), "matmul: undefined tensor argument");
}

TEST_CASE("bf16 products on the CPU run the bf16 GEMM, fused or not with the same bits",
          "[matmul]") {
    const Tensor a = random_tensor({70, 300}, DType::bf16, 90),
                 b = random_tensor({300, 90}, DType::bf16, 91);
    const Tensor c = kernels::matmul(a, b);
    REQUIRE(c.dtype() == DType::bf16);
    std::vector<BFloat16> want(70 * 90);
    kernels::cpu::gemm_bf16(70, 90, 300, {a.data<BFloat16>(), DType::bf16, {true, 300}},
                            {b.data<BFloat16>(), DType::bf16, {true, 90}}, want.data(),
                            DType::bf16, 90, false);
    CHECK(std::memcmp(c.data<BFloat16>(), want.data(), want.size() * 2) == 0);

    // linear, linear_relu and linear_gelu (the GEMM's epilogue) against the
    // plain passes: the bias copied into the output, the product added, the
    // activation after.
    const Tensor x = random_tensor({2, 33, 300}, DType::bf16, 92),
                 w = random_tensor({130, 300}, DType::bf16, 93),
                 bias = random_tensor({130}, DType::bf16, 94);
    const Tensor plain = kernels::addmm(bias, x.reshape({66, 300}), w.t()).reshape({2, 33, 130});
    auto same = [](const Tensor& u, const Tensor& v) {
        REQUIRE(u.shape() == v.shape());
        REQUIRE(u.dtype() == v.dtype());
        return std::memcmp(u.contiguous().data<BFloat16>(), v.contiguous().data<BFloat16>(),
                           size_t(u.numel()) * 2) == 0;
    };
    CHECK(same(kernels::linear(x, w, bias), plain));
    CHECK(same(kernels::linear_relu(x, w, bias), kernels::relu(plain)));
    const kernels::LinearGelu g = kernels::linear_gelu(x, w, bias, true);
    CHECK(same(g.out, kernels::gelu(plain, GeluApprox::tanh)));
    CHECK(same(g.pre, plain));
}

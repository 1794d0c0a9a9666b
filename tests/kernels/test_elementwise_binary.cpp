// Binary elementwise special cases beside the op table (tests/ops): dtype
// promotion of mixed operands, comparisons across dtypes and with NaN, large
// (OpenMP) strided tensors, in-place variants and integer wrapping.
#include <cmath>
#include <limits>

#include "kernels/elementwise.h"
#include "kernels/front.h"
#include "ops/reference.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;
using kernels::BinaryOp;
using kernels::describe;

namespace {

// f(x, y) over the broadcast shape, from the values a and b hold as dtype t.
template <class F>
std::vector<double> ref_map(const Tensor& a, const Tensor& b, DType t, F f) {
    return ref::map({a, b}, t, [&](const double* v) { return f(v[0], v[1]); });
}

// Checks binary(op, a, b) (result dtype `t`) against the reference.
void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, DType t) {
    INFO(kernels::op_name(op) << "(" << describe(a) << ", " << describe(b) << ")");
    const Tensor out = kernels::binary(op, a, b);
    REQUIRE(out.dtype() == t);
    REQUIRE(out.shape() == ref::broadcast(a.shape(), b.shape()));
    const bool integer = !is_floating(t);
    std::vector<double> want =
        ref_map(a, b, t, [&](double x, double y) { return ref::binary(op, x, y, integer); });
    if (integer && t != DType::boolean)
        for (double& w : want) w = ref::wrap_to(w, t);
    check_close(out, want, rtol_for(t), rtol_for(t) * 0.1);
}

}  // namespace

TEST_CASE("result dtypes follow promotion", "[elementwise][dtype]") {
    struct Case {
        DType a, b;
        BinaryOp op;
        DType result;
    };
    const Case cases[] = {{DType::f16, DType::bf16, BinaryOp::add, DType::f32},
                          {DType::f16, DType::f32, BinaryOp::mul, DType::f32},
                          {DType::i32, DType::f16, BinaryOp::sub, DType::f16},
                          {DType::u8, DType::i32, BinaryOp::add, DType::i32},
                          {DType::boolean, DType::i64, BinaryOp::mul, DType::i64},
                          {DType::i32, DType::f64, BinaryOp::div, DType::f64},
                          {DType::i64, DType::i64, BinaryOp::div, DType::f32},
                          {DType::boolean, DType::boolean, BinaryOp::div, DType::f32},
                          {DType::boolean, DType::boolean, BinaryOp::add, DType::boolean},
                          {DType::boolean, DType::boolean, BinaryOp::mul, DType::boolean},
                          {DType::boolean, DType::boolean, BinaryOp::maximum, DType::boolean},
                          {DType::boolean, DType::boolean, BinaryOp::minimum, DType::boolean},
                          {DType::u8, DType::f32, BinaryOp::maximum, DType::f32}};
    uint64_t seed = 300;
    for (const Case& c : cases) {
        Tensor a = random_tensor({3, 4}, c.a, ++seed, 0, 9),
               b = random_tensor({4}, c.b, ++seed, 1, 9);
        std::vector<double> want;
        if (c.result == DType::boolean) {  // add/max are or, mul/min are and
            const bool is_or = c.op == BinaryOp::add || c.op == BinaryOp::maximum;
            want = ref_map(a, b, DType::f64,
                           [&](double x, double y) { return double(is_or ? (x || y) : (x && y)); });
            const Tensor out = kernels::binary(c.op, a, b);
            REQUIRE(out.dtype() == DType::boolean);
            check_close(out, want);
        } else {
            check_binary(c.op, a, b, c.result);
        }
    }
    Tensor i = random_tensor({5}, DType::i64, 1, -9, 9), h = random_tensor({5}, DType::f16, 2);
    Tensor bo = random_tensor({5}, DType::boolean, 3);
    CHECK(kernels::add(i, 2.0).dtype() == DType::f32);
    CHECK(kernels::add(h, 2.0).dtype() == DType::f16);
    CHECK(kernels::mul(bo, 1.5).dtype() == DType::f32);
    CHECK(kernels::exp(i).dtype() == DType::f32);
    CHECK(kernels::sigmoid(bo).dtype() == DType::f32);
    CHECK(kernels::neg(i).dtype() == DType::i64);
    CHECK(kernels::relu(random_tensor({5}, DType::u8, 4, 0, 9)).dtype() == DType::u8);
    CHECK(kernels::clamp(i, -1.0, 1.0).dtype() == DType::i64);
    CHECK(kernels::lt(i, h).dtype() == DType::boolean);
    CHECK(kernels::where(bo, i, h).dtype() == DType::f16);
}

TEST_CASE("comparisons of mixed dtypes promote; NaN is unequal to everything",
          "[elementwise][compare]") {
    // Mixed dtypes compare in the promoted dtype: i32 against f16 in f16.
    const Tensor ia = random_tensor({4}, DType::i32, 701, -3, 3);
    const Tensor hb =
        kernels::div(random_tensor({3, 1}, DType::i64, 702, -6, 6).to(DType::f16), 2.0);
    check_close(kernels::le(ia, hb),
                ref_map(ia, hb, DType::f64, [](double x, double y) { return double(x <= y); }));
    // NaN compares unequal to everything, itself included.
    const Tensor n = from_vector(std::vector<float>{NAN, 1.0f});
    check_close(kernels::eq(n, n), {0, 1});
    check_close(kernels::ne(n, n), {1, 0});
    check_close(kernels::lt(n, 2.0), {0, 1});
    check_close(kernels::ge(n, NAN), {0, 0});
}

TEST_CASE("large strided and broadcast tensors take the OpenMP path", "[elementwise][large]") {
    // 301 x 257 = 77357 elements, above cpu::kParallelGrain.
    const Tensor a = random_tensor({257, 301}, DType::f32, 900).t();  // transposed
    const Tensor b = random_tensor({301, 1}, DType::f32, 901);
    const Tensor bf = random_tensor({301, 257}, DType::bf16, 902);
    check_binary(BinaryOp::add, a, b, DType::f32);
    check_binary(BinaryOp::mul, bf, a, DType::f32);
    check_binary(BinaryOp::maximum, bf.slice(1, 0, 256, 2), a.slice(1, 1, 257, 2), DType::f32);
    std::vector<double> want = values(a);
    for (double& w : want) w = std::exp(w);
    check_close(kernels::exp(a), want, rtol_for(DType::f32));
    const Tensor c = kernels::gt(a, b);
    check_close(c, ref_map(a, b, DType::f64, [](double x, double y) { return double(x > y); }));
    const std::vector<double> vc = values(c), va = values(a), vbf = values(bf);
    std::vector<double> picked(vc.size());
    for (size_t i = 0; i < vc.size(); ++i) picked[i] = vc[i] != 0 ? va[i] : vbf[i];
    check_close(kernels::where(c, a, bf), picked, 0, 0);
    // A stride-0 (expanded) input to a unary op.
    std::vector<double> relu_b;
    for (double v : values(b.expand({301, 257}))) relu_b.push_back(std::max(v, 0.0));
    check_close(kernels::relu(b.expand({301, 257})), relu_b, 0, 0);
}

TEST_CASE("in-place variants write into the first argument", "[elementwise][inplace]") {
    uint64_t seed = 1000;
    const BinaryOp ops[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div};
    for (BinaryOp op : ops)
        for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
            // A strided destination inside a sentinel buffer: the gaps must stay untouched.
            Tensor buf = full({6, 10}, 77.0, {t});
            Tensor a = buf.slice(1, 1, 10, 2);  // [6, 5], stride 2
            a.copy_(random_tensor({6, 5}, t, ++seed));
            const Tensor b =
                random_tensor({5}, DType::f32, ++seed, 0.5, 2);  // f32 into t: cast back
            const std::vector<double> va = values(a);
            const uint64_t version = a.storage()->version();
            const Tensor r = kernels::binary_(op, a, b);
            CHECK(r.is_same(a));
            CHECK(a.storage()->version() > version);
            std::vector<double> want =
                ref_map(from_vector(va, {6, 5}), b, DType::f64,
                        [&](double x, double y) { return ref::binary(op, x, y, false); });
            check_close(a, want, rtol_for(t), rtol_for(t) * 0.1);
            for (int64_t i = 0; i < 6; ++i)
                for (int64_t j = 0; j < 10; j += 2) REQUIRE(buf.at({i, j}) == 77.0);
            // Scalar form.
            const std::vector<double> before = values(a);
            kernels::binary_(op, a, 1.25);
            for (size_t i = 0; i < want.size(); ++i)
                want[i] = ref::binary(op, before[i], 1.25, false);
            check_close(a, want, rtol_for(t), rtol_for(t) * 0.1);
        }
    // Integers in place with integers stay exact.
    Tensor i = random_tensor({4, 3}, DType::i64, 1010, -9, 9);
    const std::vector<double> vi = values(i);
    kernels::mul_(i, from_vector(std::vector<int64_t>{2, -3, 4}));
    check_close(i,
                ref_map(from_vector(vi, {4, 3}), from_vector(std::vector<double>{2, -3, 4}),
                        DType::f64, [](double x, double y) { return x * y; }),
                0, 0);
    // b aliasing a: the same view is read before it is written; a transposed view
    // of the same memory goes through a temporary so it reads the original values.
    Tensor m = random_tensor({5, 5}, DType::f32, 1011);
    std::vector<double> want = values(kernels::add(m, m));
    kernels::add_(m, m);
    check_close(m, want, 0, 0);
    want = values(kernels::add(m, m.t()));
    kernels::add_(m, m.t());
    check_close(m, want, 0, 0);
    // bool |= bool.
    Tensor bo = from_vector(std::vector<uint8_t>{0, 1, 0, 1}).to(DType::boolean);
    kernels::add_(bo, from_vector(std::vector<uint8_t>{0, 0, 1, 1}).to(DType::boolean));
    check_close(bo, {0, 1, 1, 1});
}

TEST_CASE("integer arithmetic wraps and integer pow is exact", "[elementwise][int]") {
    const int32_t mx = std::numeric_limits<int32_t>::max(),
                  mn = std::numeric_limits<int32_t>::min();
    const Tensor i = from_vector(std::vector<int32_t>{mx, mn, 5});
    check_close(kernels::add(i, from_vector(std::vector<int32_t>{1, -1, 1})),
                {double(mn), double(mx), 6}, 0, 0);
    check_close(kernels::neg(i), {double(-mx), double(mn), -5}, 0, 0);
    check_close(kernels::abs(i), {double(mx), double(mn), 5}, 0, 0);
    const Tensor u = from_vector(std::vector<uint8_t>{0, 200, 3});
    check_close(kernels::sub(u, from_vector(std::vector<uint8_t>{1, 100, 3})), {255, 100, 0}, 0, 0);
    check_close(kernels::neg(u), {0, 56, 253}, 0, 0);
    check_close(kernels::mul(u, from_vector(std::vector<uint8_t>{1, 2, 3})), {0, 144, 9}, 0, 0);
    const Tensor base = from_vector(std::vector<int64_t>{2, 3, -1, -1, 1, 2, 0});
    const Tensor expo = from_vector(std::vector<int64_t>{62, 5, -3, -2, -7, -1, 0});
    check_close(kernels::pow(base, expo), {std::ldexp(1.0, 62), 243, -1, 1, 1, 0, 1}, 0, 0);
    check_close(
        kernels::pow(from_vector(std::vector<int32_t>{2}), from_vector(std::vector<int32_t>{40})),
        std::vector<double>{0}, 0, 0);
}

TEST_CASE("elementwise results keep a channels-last operand's format", "[elementwise][format]") {
    // Large enough for the threaded loop; values from the row-major reference.
    const Tensor a = random_tensor({4, 16, 30, 30}, DType::f32, 31);
    const Tensor b = random_tensor({4, 16, 30, 30}, DType::f32, 32);
    const Tensor al = a.contiguous(MemoryFormat::channels_last);
    const Tensor bl = b.contiguous(MemoryFormat::channels_last);
    auto same = [](const Tensor& got, const Tensor& want) {
        REQUIRE(got.to_vector<float>() == want.to_vector<float>());
    };
    const Tensor sum_l = kernels::add(al, bl);
    REQUIRE(sum_l.is_contiguous(MemoryFormat::channels_last));
    same(sum_l, kernels::add(a, b));
    const Tensor mixed = kernels::mul(al, b);  // the first channels-last operand decides
    REQUIRE(mixed.is_contiguous(MemoryFormat::channels_last));
    same(mixed, kernels::mul(a, b));
    const Tensor relu_g = kernels::relu_backward(bl, al);
    REQUIRE(relu_g.is_contiguous(MemoryFormat::channels_last));
    same(relu_g, kernels::relu_backward(b, a));
    const Tensor r = kernels::relu(al);
    REQUIRE(r.is_contiguous(MemoryFormat::channels_last));
    same(r, kernels::relu(a));
    const Tensor scaled = kernels::mul(al, 0.5);
    REQUIRE(scaled.is_contiguous(MemoryFormat::channels_last));
    same(scaled, kernels::mul(a, 0.5));
    // A broadcast channels-last operand does not decide; row-major operands stay row-major.
    const Tensor bias = random_tensor({1, 16, 1, 1}, DType::f32, 33);
    REQUIRE(kernels::add(a, bias).is_contiguous());
    REQUIRE(kernels::add(al, bias).is_contiguous(MemoryFormat::channels_last));
    same(kernels::add(al, bias), kernels::add(a, bias));
}

// Elementwise ops against naive f64 references computed here: every op over a
// table of shapes (size-0 and size-1 dims, broadcasting, [] scalars), strided
// inputs, every dtype it accepts, promotions, large (OpenMP) tensors, in-place
// variants, the NaN/inf policies and every documented error.
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>

#include "kernels/cpu/elementwise.h"
#include "kernels/elementwise.h"
#include "kernels/front.h"
#include "support.h"

using namespace ember;
using namespace ember::test;
namespace K = ember::kernels;
using K::BinaryOp;
using K::CompareOp;
using K::describe;
using K::UnaryOp;

namespace {

const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
const DType kInts[] = {DType::i32, DType::i64, DType::u8};
const BinaryOp kBinary[] = {BinaryOp::add, BinaryOp::sub,     BinaryOp::mul,    BinaryOp::div,
                            BinaryOp::pow, BinaryOp::maximum, BinaryOp::minimum};
const UnaryOp kUnary[] = {UnaryOp::neg,       UnaryOp::abs,     UnaryOp::exp,  UnaryOp::log,
                          UnaryOp::sqrt,      UnaryOp::rsqrt,   UnaryOp::relu, UnaryOp::gelu,
                          UnaryOp::gelu_tanh, UnaryOp::sigmoid, UnaryOp::tanh};
const CompareOp kCompare[] = {CompareOp::eq, CompareOp::ne, CompareOp::lt,
                              CompareOp::le, CompareOp::gt, CompareOp::ge};

// Pairs of input shapes: equal, broadcast both ways, [] scalars, size-0 and size-1 dims.
// clang-format off
const std::vector<std::pair<Shape, Shape>> kBinaryShapes = {
    {{}, {}}, {{1}, {}}, {{7}, {7}}, {{3, 1, 5}, {4, 5}}, {{2, 3, 4}, {}}, {{}, {2, 3}},
    {{0, 3}, {3}}, {{4, 0}, {1, 1}}, {{2, 1, 3}, {1, 1, 1}}, {{5, 1}, {1, 6}},
    {{2, 3, 4, 5}, {3, 1, 5}}, {{1, 1}, {1}}};
const std::vector<Shape> kUnaryShapes = {{}, {1}, {0}, {7}, {3, 0, 2}, {2, 3, 4}, {1, 5, 1}, {33, 17}};
// clang-format on

// ---- f64 references ----

double ref_unary(UnaryOp op, double x) {
    switch (op) {
        case UnaryOp::neg: return -x;
        case UnaryOp::abs: return std::fabs(x);
        case UnaryOp::exp: return std::exp(x);
        case UnaryOp::log: return std::log(x);
        case UnaryOp::sqrt: return std::sqrt(x);
        case UnaryOp::rsqrt: return 1.0 / std::sqrt(x);
        case UnaryOp::relu: return std::isnan(x) ? x : std::max(x, 0.0);
        case UnaryOp::gelu: return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
        case UnaryOp::gelu_tanh:
            return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
        case UnaryOp::sigmoid: return 1.0 / (1.0 + std::exp(-x));
        case UnaryOp::tanh: return std::tanh(x);
    }
    return NAN;
}

// Integer power by repeated multiplication (b >= 0), in int64.
int64_t ref_int_pow(int64_t a, int64_t b) {
    int64_t r = 1;
    for (int64_t i = 0; i < b; ++i) r = int64_t(uint64_t(r) * uint64_t(a));
    return r;
}

double ref_binary(BinaryOp op, double a, double b, bool integer) {
    switch (op) {
        case BinaryOp::add: return a + b;
        case BinaryOp::sub: return a - b;
        case BinaryOp::mul: return a * b;
        case BinaryOp::div: return a / b;
        case BinaryOp::pow:
            return integer ? double(ref_int_pow(int64_t(a), int64_t(b))) : std::pow(a, b);
        case BinaryOp::maximum: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
        case BinaryOp::minimum: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    }
    return NAN;
}

bool ref_compare(CompareOp op, double a, double b) {
    switch (op) {
        case CompareOp::eq: return a == b;
        case CompareOp::ne: return a != b;
        case CompareOp::lt: return a < b;
        case CompareOp::le: return a <= b;
        case CompareOp::gt: return a > b;
        case CompareOp::ge: return a >= b;
    }
    return false;
}

// An exact integer result as the integer dtype holds it (two's complement wrap).
double wrap_to(double v, DType d) {
    const int64_t i = int64_t(v);
    if (d == DType::u8) return double(uint8_t(uint64_t(i)));
    if (d == DType::i32) return double(int32_t(uint32_t(uint64_t(i))));
    return double(i);
}

Shape ref_broadcast(const Shape& a, const Shape& b) {
    const size_t n = std::max(a.size(), b.size());
    Shape s(n, 1);
    for (size_t i = 0; i < n; ++i) {
        const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
        const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
        s[i] = x == 1 ? y : x;
    }
    return s;
}

// Row-major flat index into a tensor of shape `in` read at output index `idx`.
int64_t source_index(const Shape& idx, const Shape& in) {
    const size_t off = idx.size() - in.size();
    int64_t flat = 0;
    for (size_t d = 0; d < in.size(); ++d) flat = flat * in[d] + (in[d] == 1 ? 0 : idx[off + d]);
    return flat;
}

// f(a, b) over the broadcast shape, from the values a and b hold as dtype t.
template <class F>
std::vector<double> ref_map(const Tensor& a, const Tensor& b, DType t, F f) {
    const std::vector<double> va = values(a.to(t)), vb = values(b.to(t));
    const Shape s = ref_broadcast(a.shape(), b.shape());
    std::vector<double> out(size_t(shape_numel(s)));
    for (size_t i = 0; i < out.size(); ++i) {
        const Shape idx = unravel(int64_t(i), s);
        out[i] =
            f(va[size_t(source_index(idx, a.shape()))], vb[size_t(source_index(idx, b.shape()))]);
    }
    return out;
}

double atol_for(DType t) { return rtol_for(t) * 0.1; }

// Input range of each op (a valid domain, away from poles).
std::pair<double, double> domain(UnaryOp op) {
    switch (op) {
        case UnaryOp::log:
        case UnaryOp::sqrt:
        case UnaryOp::rsqrt: return {0.05, 4};
        case UnaryOp::sigmoid:
        case UnaryOp::tanh: return {-4, 4};
        default: return {-3, 3};
    }
}

// Checks binary(op, a, b) (dtype `t`) against the reference.
void check_binary(BinaryOp op, const Tensor& a, const Tensor& b, DType t) {
    INFO(K::op_name(op) << "(" << describe(a) << ", " << describe(b) << ")");
    const Tensor out = K::binary(op, a, b);
    REQUIRE(out.dtype() == t);
    REQUIRE(out.shape() == ref_broadcast(a.shape(), b.shape()));
    const bool integer = !is_floating(t);
    std::vector<double> want =
        ref_map(a, b, t, [&](double x, double y) { return ref_binary(op, x, y, integer); });
    if (integer && t != DType::boolean)
        for (double& w : want) w = wrap_to(w, t);
    check_close(out, want, rtol_for(t), atol_for(t));
}

}  // namespace

TEST_CASE("binary ops match the f64 reference on floating dtypes, shapes and layouts",
          "[elementwise]") {
    uint64_t seed = 1;
    for (BinaryOp op : kBinary)
        for (DType t : kFloats)
            for (const auto& [sa, sb] : kBinaryShapes) {
                // pow: positive bases; div: denominators away from zero.
                const double alo = op == BinaryOp::pow ? 0.25 : -2;
                const double blo = op == BinaryOp::div ? 0.25 : -2;
                Tensor a = random_tensor(sa, t, ++seed, alo, 2),
                       b = random_tensor(sb, t, ++seed, blo, 2);
                check_binary(op, a, b, t);
                check_binary(op, non_contiguous(a), non_contiguous(b), t);
            }
}

TEST_CASE("binary ops on integer dtypes are exact and wrap; div is true division",
          "[elementwise]") {
    uint64_t seed = 100;
    for (BinaryOp op : kBinary)
        for (DType t : kInts)
            for (const auto& [sa, sb] : kBinaryShapes) {
                const bool u8 = t == DType::u8, pow = op == BinaryOp::pow;
                Tensor a = random_tensor(sa, t, ++seed, u8 ? 0 : (pow ? -3 : -50), pow ? 4 : 50);
                Tensor b = random_tensor(sb, t, ++seed, u8 || pow ? 0 : -50, pow ? 6 : 50);
                // Integer division by zero is in range: it gives ±inf or NaN in f32, as in double.
                check_binary(op, non_contiguous(a), b, op == BinaryOp::div ? DType::f32 : t);
            }
}

TEST_CASE("binary ops with a scalar right operand", "[elementwise][scalar]") {
    uint64_t seed = 200;
    const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::u8};
    for (BinaryOp op : kBinary)
        for (DType t : dtypes)
            for (const Shape& s : kUnaryShapes)
                for (double scalar : {2.5, -0.75}) {
                    const bool pow = op == BinaryOp::pow;
                    Tensor a =
                        random_tensor(s, t, ++seed, pow || t == DType::u8 ? 1 : -20, pow ? 3 : 20);
                    if (s.size() >= 2) a = non_contiguous(a);
                    const Tensor out = K::binary(op, a, scalar);
                    const DType want_t = is_floating(t) ? t : DType::f32;
                    INFO(K::op_name(op) << "(" << describe(a) << ", " << scalar << ")");
                    REQUIRE(out.dtype() == want_t);
                    REQUIRE(out.shape() == s);
                    // The scalar is used in the compute dtype (f32 for f16/bf16).
                    const double sc = want_t == DType::f64 ? scalar : double(float(scalar));
                    std::vector<double> want = values(a.to(want_t));
                    for (double& w : want) w = ref_binary(op, w, sc, false);
                    check_close(out, want, rtol_for(want_t), atol_for(want_t));
                }
}

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
            const Tensor out = K::binary(c.op, a, b);
            REQUIRE(out.dtype() == DType::boolean);
            check_close(out, want);
        } else {
            check_binary(c.op, a, b, c.result);
        }
    }
    Tensor i = random_tensor({5}, DType::i64, 1, -9, 9), h = random_tensor({5}, DType::f16, 2);
    Tensor bo = random_tensor({5}, DType::boolean, 3);
    CHECK(K::add(i, 2.0).dtype() == DType::f32);
    CHECK(K::add(h, 2.0).dtype() == DType::f16);
    CHECK(K::mul(bo, 1.5).dtype() == DType::f32);
    CHECK(K::exp(i).dtype() == DType::f32);
    CHECK(K::sigmoid(bo).dtype() == DType::f32);
    CHECK(K::neg(i).dtype() == DType::i64);
    CHECK(K::relu(random_tensor({5}, DType::u8, 4, 0, 9)).dtype() == DType::u8);
    CHECK(K::clamp(i, -1.0, 1.0).dtype() == DType::i64);
    CHECK(K::lt(i, h).dtype() == DType::boolean);
    CHECK(K::where(bo, i, h).dtype() == DType::f16);
}

TEST_CASE("unary ops match the f64 reference on floating dtypes, shapes and layouts",
          "[elementwise]") {
    uint64_t seed = 400;
    for (UnaryOp op : kUnary)
        for (DType t : kFloats)
            for (const Shape& s : kUnaryShapes) {
                const auto [lo, hi] = domain(op);
                const Tensor x = random_tensor(s, t, ++seed, lo, hi);
                for (const Tensor& in : {x, non_contiguous(x)}) {
                    INFO(K::op_name(op) << "(" << describe(in) << ")");
                    const Tensor out = K::unary(op, in);
                    REQUIRE(out.dtype() == t);
                    REQUIRE(out.shape() == s);
                    std::vector<double> want = values(in);
                    for (double& w : want) w = ref_unary(op, w);
                    check_close(out, want, rtol_for(t), atol_for(t));
                }
            }
}

TEST_CASE("unary ops on integers: neg/abs/relu keep the dtype, the others compute in f32",
          "[elementwise]") {
    uint64_t seed = 500;
    for (UnaryOp op : kUnary)
        for (DType t : kInts) {
            const bool positive = op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt;
            const Tensor x =
                random_tensor({4, 6}, t, ++seed, positive || t == DType::u8 ? 1 : -30, 30);
            const bool keeps = op == UnaryOp::neg || op == UnaryOp::abs || op == UnaryOp::relu;
            const DType want_t = keeps ? t : DType::f32;
            INFO(K::op_name(op) << "(" << describe(x) << ")");
            const Tensor out = K::unary(op, x.t());
            REQUIRE(out.dtype() == want_t);
            std::vector<double> want = values(x.t());
            for (double& w : want) w = keeps ? wrap_to(ref_unary(op, w), t) : ref_unary(op, w);
            check_close(out, want, rtol_for(want_t), atol_for(want_t));
        }
}

TEST_CASE("gelu: exact and tanh forms", "[elementwise][gelu]") {
    const Tensor x = from_vector(std::vector<double>{-3, -1, -0.5, 0, 0.5, 1, 3});
    check_close(
        K::gelu(x),
        {-0.004049694095, -0.1586552539, -0.1542687694, 0, 0.3457312306, 0.8413447461, 2.995950306},
        1e-7, 1e-9);
    check_close(
        K::gelu(x, K::GeluApprox::tanh),
        {-0.003637392082, -0.1588080094, -0.1542859902, 0, 0.3457140098, 0.8411919906, 2.996362608},
        1e-7, 1e-9);
}

TEST_CASE("clamp with either bound, on floating and integer dtypes", "[elementwise][clamp]") {
    using Bound = std::optional<double>;
    const std::pair<Bound, Bound> bounds[] = {
        {-0.5, 0.7}, {-0.5, std::nullopt}, {std::nullopt, 0.7}, {1.0, -1.0}, {-2.5, 2.5}};
    uint64_t seed = 600;
    for (DType t :
         {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8})
        for (const auto& [lo, hi] : bounds) {
            const bool integer = !is_floating(t);
            const Tensor x = random_tensor(
                {5, 7}, t, ++seed, integer ? (t == DType::u8 ? 0 : -6) : -2, integer ? 6 : 2);
            INFO("clamp(" << describe(x) << ", " << lo.value_or(-INFINITY) << ", "
                          << hi.value_or(INFINITY) << ")");
            const Tensor out = K::clamp(non_contiguous(x), lo, hi);
            REQUIRE(out.dtype() == t);
            // Integer dtypes round bounds inward; the bounds in the compute dtype otherwise.
            auto in_dtype = [&](double v, bool upper) {
                if (!integer) return t == DType::f64 ? v : double(float(v));
                v = upper ? std::floor(v) : std::ceil(v);
                return t == DType::u8 ? std::max(v, 0.0) : v;  // saturated to the u8 range
            };
            std::vector<double> want = values(x);
            for (double& w : want) {
                if (lo) w = std::max(w, in_dtype(*lo, false));
                if (hi) w = std::min(w, in_dtype(*hi, true));
            }
            check_close(out, want, rtol_for(t), atol_for(t));
        }
}

TEST_CASE("comparisons return bool, with broadcasting and scalars", "[elementwise][compare]") {
    uint64_t seed = 700;
    const DType dtypes[] = {DType::f32, DType::f64, DType::f16,    DType::bf16,
                            DType::i32, DType::u8,  DType::boolean};
    for (CompareOp op : kCompare)
        for (DType t : dtypes)
            for (const auto& [sa, sb] : kBinaryShapes) {
                // Small integers in every dtype make ties (eq, le, ge) frequent.
                auto make = [&](const Shape& s) {
                    return t == DType::boolean ? random_tensor(s, t, ++seed)
                                               : random_tensor(s, DType::i64, ++seed, 0, 4).to(t);
                };
                Tensor a = make(sa), b = make(sb);
                INFO(K::op_name(op) << "(" << describe(a) << ", " << describe(b) << ")");
                const Tensor out = K::compare(op, non_contiguous(a), b);
                REQUIRE(out.dtype() == DType::boolean);
                check_close(out, ref_map(a, b, DType::f64, [&](double x, double y) {
                                return double(ref_compare(op, x, y));
                            }));
            }
    for (CompareOp op : kCompare)
        for (DType t : {DType::f32, DType::f16, DType::i64}) {
            Tensor a = random_tensor({6, 5}, t, ++seed, -3, 3);
            const Tensor out = K::compare(op, a.t(), 1.0);
            std::vector<double> want = values(a.t());
            for (double& w : want) w = ref_compare(op, w, 1.0);
            check_close(out, want);
        }
    // Mixed dtypes compare in the promoted dtype: i32 against f16 in f16.
    const Tensor ia = random_tensor({4}, DType::i32, ++seed, -3, 3);
    const Tensor hb = K::div(random_tensor({3, 1}, DType::i64, ++seed, -6, 6).to(DType::f16), 2.0);
    check_close(K::le(ia, hb),
                ref_map(ia, hb, DType::f64, [](double x, double y) { return double(x <= y); }));
    // NaN compares unequal to everything, itself included.
    const Tensor n = from_vector(std::vector<float>{NAN, 1.0f});
    check_close(K::eq(n, n), {0, 1});
    check_close(K::ne(n, n), {1, 0});
    check_close(K::lt(n, 2.0), {0, 1});
    check_close(K::ge(n, NAN), {0, 0});
}

TEST_CASE("where broadcasts three ways and promotes a and b", "[elementwise][where]") {
    const std::vector<std::array<Shape, 3>> shapes = {
        {{{3, 1, 5}, {4, 5}, {}}}, {{{}, {2, 3}, {3}}},        {{{4}, {}, {}}},
        {{{2, 0}, {1}, {2, 1}}},   {{{5, 4}, {5, 4}, {5, 4}}}, {{{1}, {1, 1}, {}}}};
    uint64_t seed = 800;
    const DType dtypes[][2] = {{DType::f32, DType::f32},    {DType::f16, DType::f16},
                               {DType::bf16, DType::bf16},  {DType::i64, DType::i64},
                               {DType::u8, DType::boolean}, {DType::i32, DType::f16}};
    for (const auto& s : shapes)
        for (const auto& d : dtypes) {
            Tensor c = random_tensor(s[0], DType::boolean, ++seed);
            Tensor a = random_tensor(s[1], d[0], ++seed, 0, 9),
                   b = random_tensor(s[2], d[1], ++seed, 0, 9);
            const DType t = promote_types(d[0], d[1]);
            INFO("where(" << describe(c) << ", " << describe(a) << ", " << describe(b) << ")");
            const Tensor out = K::where(non_contiguous(c), non_contiguous(a), b);
            REQUIRE(out.dtype() == t);
            const Shape os = ref_broadcast(ref_broadcast(s[0], s[1]), s[2]);
            REQUIRE(out.shape() == os);
            const std::vector<double> vc = values(c), va = values(a.to(t)), vb = values(b.to(t));
            std::vector<double> want(size_t(shape_numel(os)));
            for (size_t i = 0; i < want.size(); ++i) {
                const Shape idx = unravel(int64_t(i), os);
                want[i] = vc[size_t(source_index(idx, s[0]))] != 0
                              ? va[size_t(source_index(idx, s[1]))]
                              : vb[size_t(source_index(idx, s[2]))];
            }
            check_close(out, want, 0, 0);
        }
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
    check_close(K::exp(a), want, rtol_for(DType::f32));
    const Tensor c = K::gt(a, b);
    check_close(c, ref_map(a, b, DType::f64, [](double x, double y) { return double(x > y); }));
    const std::vector<double> vc = values(c), va = values(a), vbf = values(bf);
    std::vector<double> picked(vc.size());
    for (size_t i = 0; i < vc.size(); ++i) picked[i] = vc[i] != 0 ? va[i] : vbf[i];
    check_close(K::where(c, a, bf), picked, 0, 0);
    // A stride-0 (expanded) input to a unary op.
    std::vector<double> relu_b;
    for (double v : values(b.expand({301, 257}))) relu_b.push_back(std::max(v, 0.0));
    check_close(K::relu(b.expand({301, 257})), relu_b, 0, 0);
}

TEST_CASE("in-place variants write into the first argument", "[elementwise][inplace]") {
    uint64_t seed = 1000;
    const BinaryOp ops[] = {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::div};
    for (BinaryOp op : ops)
        for (DType t : kFloats) {
            // A strided destination inside a sentinel buffer: the gaps must stay untouched.
            Tensor buf = full({6, 10}, 77.0, {t});
            Tensor a = buf.slice(1, 1, 10, 2);  // [6, 5], stride 2
            a.copy_(random_tensor({6, 5}, t, ++seed));
            const Tensor b =
                random_tensor({5}, DType::f32, ++seed, 0.5, 2);  // f32 into t: cast back
            const std::vector<double> va = values(a);
            const uint64_t version = a.storage()->version();
            const Tensor r = K::binary_(op, a, b);
            CHECK(r.is_same(a));
            CHECK(a.storage()->version() > version);
            std::vector<double> want =
                ref_map(from_vector(va, {6, 5}), b, DType::f64,
                        [&](double x, double y) { return ref_binary(op, x, y, false); });
            check_close(a, want, rtol_for(t), atol_for(t));
            for (int64_t i = 0; i < 6; ++i)
                for (int64_t j = 0; j < 10; j += 2) REQUIRE(buf.at({i, j}) == 77.0);
            // Scalar form.
            const std::vector<double> before = values(a);
            K::binary_(op, a, 1.25);
            for (size_t i = 0; i < want.size(); ++i)
                want[i] = ref_binary(op, before[i], 1.25, false);
            check_close(a, want, rtol_for(t), atol_for(t));
        }
    // Integers in place with integers stay exact.
    Tensor i = random_tensor({4, 3}, DType::i64, 1010, -9, 9);
    const std::vector<double> vi = values(i);
    K::mul_(i, from_vector(std::vector<int64_t>{2, -3, 4}));
    check_close(i,
                ref_map(from_vector(vi, {4, 3}), from_vector(std::vector<double>{2, -3, 4}),
                        DType::f64, [](double x, double y) { return x * y; }),
                0, 0);
    // b aliasing a: the same view is read before it is written; a transposed view
    // of the same memory goes through a temporary so it reads the original values.
    Tensor m = random_tensor({5, 5}, DType::f32, 1011);
    std::vector<double> want = values(K::add(m, m));
    K::add_(m, m);
    check_close(m, want, 0, 0);
    want = values(K::add(m, m.t()));
    K::add_(m, m.t());
    check_close(m, want, 0, 0);
    // bool |= bool.
    Tensor bo = from_vector(std::vector<uint8_t>{0, 1, 0, 1}).to(DType::boolean);
    K::add_(bo, from_vector(std::vector<uint8_t>{0, 0, 1, 1}).to(DType::boolean));
    check_close(bo, {0, 1, 1, 1});
}

TEST_CASE("NaN and infinity behaviour", "[elementwise][nan]") {
    const float inf = std::numeric_limits<float>::infinity();
    const Tensor x = from_vector(std::vector<float>{NAN, inf, -inf, 0.0f, -1.0f});
    check_close(K::log(x), {NAN, INFINITY, NAN, -INFINITY, NAN});
    check_close(K::sqrt(x), {NAN, INFINITY, NAN, 0, NAN});
    check_close(K::rsqrt(x), {NAN, 0, NAN, INFINITY, NAN});
    check_close(K::exp(x), {NAN, INFINITY, 0, 1, std::exp(-1.0)});
    check_close(K::relu(x), {NAN, INFINITY, 0, 0, 0});  // relu(NaN) = NaN
    check_close(K::sigmoid(x), {NAN, 1, 0, 0.5, 1 / (1 + std::exp(1.0))});
    check_close(K::tanh(x), {NAN, 1, -1, 0, std::tanh(-1.0)});
    check_close(K::gelu(x), {NAN, INFINITY, NAN, 0, ref_unary(UnaryOp::gelu, -1)});
    check_close(K::gelu(x, K::GeluApprox::tanh),
                {NAN, INFINITY, NAN, 0, ref_unary(UnaryOp::gelu_tanh, -1)});
    // Far left tail: the tanh form rounds to -0; exp(-2u) overflows to inf here (or
    // nearly), giving -0 or a negligible negative.
    check_close(K::gelu(from_vector(std::vector<float>{-60.0f, -10.0f}), K::GeluApprox::tanh),
                {0, 0}, 0, 1e-30);
    check_close(K::clamp(x, -0.5, 0.5), {NAN, 0.5, -0.5, 0, -0.5});
    check_close(K::maximum(x, 0.0), {NAN, INFINITY, 0, 0, 0});
    check_close(
        K::minimum(from_vector(std::vector<float>{1, 2}), from_vector(std::vector<float>{NAN, 1})),
        {NAN, 1});
    check_close(K::div(x, 0.0), {NAN, INFINITY, -INFINITY, NAN, -INFINITY});
    check_close(K::div(from_vector(std::vector<int32_t>{1, 0, -2}),
                       from_vector(std::vector<int32_t>{0, 0, 0})),
                {INFINITY, NAN, -INFINITY});
}

TEST_CASE("integer arithmetic wraps and integer pow is exact", "[elementwise][int]") {
    const int32_t mx = std::numeric_limits<int32_t>::max(),
                  mn = std::numeric_limits<int32_t>::min();
    const Tensor i = from_vector(std::vector<int32_t>{mx, mn, 5});
    check_close(K::add(i, from_vector(std::vector<int32_t>{1, -1, 1})), {double(mn), double(mx), 6},
                0, 0);
    check_close(K::neg(i), {double(-mx), double(mn), -5}, 0, 0);
    check_close(K::abs(i), {double(mx), double(mn), 5}, 0, 0);
    const Tensor u = from_vector(std::vector<uint8_t>{0, 200, 3});
    check_close(K::sub(u, from_vector(std::vector<uint8_t>{1, 100, 3})), {255, 100, 0}, 0, 0);
    check_close(K::neg(u), {0, 56, 253}, 0, 0);
    check_close(K::mul(u, from_vector(std::vector<uint8_t>{1, 2, 3})), {0, 144, 9}, 0, 0);
    const Tensor base = from_vector(std::vector<int64_t>{2, 3, -1, -1, 1, 2, 0});
    const Tensor expo = from_vector(std::vector<int64_t>{62, 5, -3, -2, -7, -1, 0});
    check_close(K::pow(base, expo), {std::ldexp(1.0, 62), 243, -1, 1, 1, 0, 1}, 0, 0);
    check_close(K::pow(from_vector(std::vector<int32_t>{2}), from_vector(std::vector<int32_t>{40})),
                std::vector<double>{0}, 0, 0);
}

TEST_CASE("the CPU kernel runs on raw Views and writes only its elements",
          "[elementwise][kernel]") {
    std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(8, NAN);
    K::View va, vb, vo;
    va.data = reinterpret_cast<char*>(a.data());
    vb.data = reinterpret_cast<char*>(b.data());
    vo.data = reinterpret_cast<char*>(out.data());
    va.ndim = vb.ndim = vo.ndim = 1;
    va.shape[0] = vb.shape[0] = vo.shape[0] = 4;
    va.strides[0] = vb.strides[0] = 1;
    vo.strides[0] = 2;  // every other element; the rest stay poisoned
    K::cpu::binary(BinaryOp::sub, vo, vb, va);
    CHECK(out[0] == 9);
    CHECK(out[2] == 18);
    CHECK(out[4] == 27);
    CHECK(out[6] == 36);
    for (int i = 1; i < 8; i += 2) CHECK(std::isnan(out[size_t(i)]));
}

TEST_CASE("elementwise errors name the op, shapes and dtypes", "[elementwise][errors]") {
    const Tensor a = random_tensor({3}, DType::f32, 1), b = random_tensor({4}, DType::f32, 2);
    REQUIRE_THROWS_WITH_MSG(K::add(a, b), "add: shapes [3] and [4] cannot be broadcast");
    REQUIRE_THROWS_WITH_MSG(K::lt(a, b), "lt: shapes [3] and [4]");
    REQUIRE_THROWS_WITH_MSG(K::mul(a, Tensor()), "mul: undefined tensor");
    REQUIRE_THROWS_WITH_MSG(K::exp(Tensor()), "exp: undefined tensor");
    const Tensor bo = random_tensor({3}, DType::boolean, 3);
    REQUIRE_THROWS_WITH_MSG(K::neg(bo), "neg: not supported for bool tensors, got bool [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(K::abs(bo), "abs: not supported for bool");
    REQUIRE_THROWS_WITH_MSG(K::relu(bo), "relu: not supported for bool");
    REQUIRE_THROWS_WITH_MSG(K::sub(bo, bo), "sub: not supported for bool tensors");
    REQUIRE_THROWS_WITH_MSG(K::pow(bo, bo), "pow: not supported for bool tensors");
    REQUIRE_THROWS_WITH_MSG(K::clamp(bo, 0.0, 1.0), "clamp: not supported for bool");
    REQUIRE_THROWS_WITH_MSG(K::where(a, a, a),
                            "where: the condition must be a bool tensor, got f32 [3]");
    REQUIRE_THROWS_WITH_MSG(K::where(bo, a, b),
                            "where: condition bool [3] on cpu, a f32 [3] on cpu and b f32 [4]");
    REQUIRE_THROWS_WITH_MSG(K::clamp(a, std::nullopt, std::nullopt),
                            "clamp: at least one of min and max");
    REQUIRE_THROWS_WITH_MSG(K::clamp(a, NAN, 1.0), "clamp: a bound is NaN");
    // In place: the destination must hold the broadcast shape and the result dtype.
    Tensor d = random_tensor({2, 3}, DType::f32, 4);
    REQUIRE_THROWS_WITH_MSG(K::add_(d, random_tensor({2, 1, 3}, DType::f32, 5)),
                            "add_: operand of shape [2, 1, 3] does not broadcast to the shape of "
                            "the destination f32 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(K::sub_(d, b), "sub_: operand of shape [4]");
    Tensor di = random_tensor({3}, DType::i32, 6, -5, 5);
    REQUIRE_THROWS_WITH_MSG(K::div_(di, di),
                            "div_: result dtype f32 cannot be written into i32 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(K::add_(di, a), "add_: result dtype f32 cannot be written into i32");
    REQUIRE_THROWS_WITH_MSG(K::mul_(di, 2.0), "mul_: result dtype f32 cannot be written into i32");
    Tensor dbo = random_tensor({3}, DType::boolean, 7);
    REQUIRE_THROWS_WITH_MSG(K::add_(dbo, di), "add_: result dtype i32 cannot be written into bool");
    REQUIRE_THROWS_WITH_MSG(
        K::add_(random_tensor({1}, DType::f32, 8).expand({4}), random_tensor({4}, DType::f32, 9)),
        "add_: the destination has broadcast (stride 0) dims");
    // Device mismatch (check_same_device) needs a CUDA build and a GPU: not tested here.
}

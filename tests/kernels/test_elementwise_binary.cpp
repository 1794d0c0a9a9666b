// Binary elementwise ops against naive f64 references: tensor and scalar
// operands, broadcasting, promotion, comparisons, where, large (OpenMP)
// tensors, in-place variants and integer wrapping.
#include "kernels/elementwise_ref.h"

using namespace ember::test::elementwise_ref;

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

TEST_CASE("activation backwards match their f64 derivatives", "[elementwise][backward]") {
    uint64_t seed = 500;
    for (BinaryOp op : {BinaryOp::relu_backward, BinaryOp::gelu_backward,
                        BinaryOp::gelu_tanh_backward, BinaryOp::sigmoid_backward,
                        BinaryOp::tanh_backward})
        for (DType t : kFloats)
            for (const auto& [sa, sb] : kBinaryShapes) {
                Tensor g = random_tensor(sa, t, ++seed, -2, 2), s = random_tensor(sb, t, ++seed, -4, 4);
                check_binary(op, g, s, t);
                check_binary(op, non_contiguous(g), non_contiguous(s), t);
            }
    const Tensor i = from_vector<int64_t>({1, 2}, {2});
    REQUIRE_THROWS_WITH_MSG(kernels::relu_backward(i, i), "relu_backward: expected floating tensors");
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

// The direct conv2d kernels (kernels/cpu/conv_direct.cpp) against naive f64
// loops written from the definitions: forward, grad_input and grad_weight
// over strides (phase planes), paddings, dilations, non-square and even
// kernels, one input channel (the stem's tiles), images narrower than a
// pixel vector and wider than several tiles, batches that split into
// several grad_weight chunks; every output overwritten; bit-identical for
// 1, 2 and 3 threads; the fronts take the direct path exactly where
// direct::fits says so; and the rule itself.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "support/conv_cases.h"
#include "kernels/conv.h"
#include "kernels/cpu/conv_direct.h"

using namespace ember;
using namespace ember::kernels;
using namespace ember::test;
using Case = ConvCase;
using ember::kernels::cpu::direct::Pass;

namespace {

// The input element under tap (i, j) of output (oy, ox), or −1 in the padding.
int64_t tap_index(const Conv2dShape& s, int64_t n, int64_t c, int64_t oy, int64_t ox, int64_t i,
                  int64_t j) {
    const int64_t y = oy * s.sh - s.ph + i * s.dh, x = ox * s.sw - s.pw + j * s.dw;
    if (y < 0 || y >= s.h || x < 0 || x >= s.w) return -1;
    return ((n * s.c + c) * s.h + y) * s.w + x;
}

int64_t out_index(const Conv2dShape& s, int64_t n, int64_t o, int64_t oy, int64_t ox) {
    return ((n * s.o + o) * s.oh + oy) * s.ow + ox;
}

int64_t weight_index(const Conv2dShape& s, int64_t o, int64_t c, int64_t i, int64_t j) {
    return ((o * s.c + c) * s.kh + i) * s.kw + j;
}

// Every (output, tap, channel) term of the convolution, once: f(out, in, weight) indices.
template <class F>
void for_each_term(const Conv2dShape& s, F&& f) {
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t o = 0; o < s.o; ++o)
            for (int64_t oy = 0; oy < s.oh; ++oy)
                for (int64_t ox = 0; ox < s.ow; ++ox)
                    for (int64_t c = 0; c < s.c; ++c)
                        for (int64_t i = 0; i < s.kh; ++i)
                            for (int64_t j = 0; j < s.kw; ++j) {
                                const int64_t in = tap_index(s, n, c, oy, ox, i, j);
                                if (in >= 0)
                                    f(out_index(s, n, o, oy, ox), in, weight_index(s, o, c, i, j));
                            }
}

struct Refs {
    Ref out, dx, dw;
};

Refs references(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, const std::vector<float>& dy) {
    Refs r{Ref(size_t(s.n * s.o * s.oh * s.ow)), Ref(x.size()), Ref(w.size())};
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t o = 0; o < s.o; ++o)
            for (int64_t q = 0; q < s.oh * s.ow; ++q)
                r.out.add(size_t((n * s.o + o) * s.oh * s.ow + q), b[size_t(o)]);
    for_each_term(s, [&](int64_t out, int64_t in, int64_t wi) {
        r.out.add(size_t(out), double(w[size_t(wi)]) * x[size_t(in)]);
        r.dx.add(size_t(in), double(dy[size_t(out)]) * w[size_t(wi)]);
        r.dw.add(size_t(wi), double(dy[size_t(out)]) * x[size_t(in)]);
    });
    return r;
}

// A tensor holding a copy of v.
Tensor tensor_of(std::vector<float> v, const Shape& shape) {
    return from_blob(v.data(), shape).clone();
}

struct Outputs {
    std::vector<float> out, dx, dw;
};

// The three direct kernels on `threads` threads, into NaN-poisoned buffers.
Outputs run_direct(const Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                   const std::vector<float>& b, const std::vector<float>& dy, int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    constexpr float nan = std::numeric_limits<float>::quiet_NaN();
    Outputs r{std::vector<float>(dy.size(), nan), std::vector<float>(x.size(), nan),
              std::vector<float>(w.size(), nan)};
    cpu::direct::forward(s, x.data(), w.data(), b.data(), r.out.data());
    if (cpu::direct::fits(s, Pass::grad_input))
        cpu::direct::grad_input(s, dy.data(), w.data(), r.dx.data());
    cpu::direct::grad_weight(s, dy.data(), x.data(), r.dw.data());
    omp_set_num_threads(saved);
    return r;
}

const Case kCases[] = {
    // n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw
    {2, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1},   // resnet8's layer1
    {2, 16, 28, 28, 32, 3, 3, 2, 2, 1, 1, 1, 1},   // layer2's first conv: four planes
    {3, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1},     // layer3: 7 columns, 9 wide
    {2, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1},    // the stem: one channel
    {2, 1, 13, 11, 16, 3, 5, 2, 1, 1, 2, 1, 1},    // one channel, strided rows, wide kernel
    {2, 1, 12, 12, 16, 3, 3, 1, 2, 1, 1, 1, 1},    // one channel, strided columns
    {2, 8, 9, 10, 16, 2, 2, 1, 1, 0, 0, 1, 1},     // even kernel, no padding
    {1, 8, 17, 19, 16, 3, 3, 3, 2, 2, 1, 1, 1},    // stride 3 × 2: six planes
    {2, 16, 12, 12, 16, 3, 3, 1, 1, 2, 2, 2, 2},   // dilation 2
    {1, 8, 11, 13, 32, 3, 3, 2, 2, 2, 2, 2, 1},    // dilation and stride: taps share planes
    {1, 24, 6, 5, 16, 5, 3, 1, 1, 3, 0, 1, 1},     // padding > kernel/2, non-square
    {1, 8, 3, 4, 16, 3, 3, 1, 1, 1, 1, 1, 1},      // narrower than a pixel vector
    {1, 16, 2, 2, 16, 3, 3, 1, 1, 1, 1, 1, 1},     // 2×2 image
    {1, 8, 40, 37, 16, 3, 3, 1, 1, 1, 1, 1, 1},    // many tiles, rows ending mid-tile
    {9, 8, 10, 10, 48, 3, 3, 1, 1, 1, 1, 1, 1},    // batch ≥ 8: chunks evened out; 3 vectors
    {20, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1},  // many chunks
    {3, 32, 9, 9, 64, 3, 3, 2, 2, 0, 0, 1, 1},     // stride 2, unpadded, odd size
    {1, 16, 5, 70, 16, 3, 3, 2, 2, 1, 1, 1, 1},    // stride 2, rows wide enough for 16 × 16 blocks
    {1, 32, 4, 40, 16, 3, 3, 1, 2, 1, 0, 1, 1},    // stride 1 × 2, two channel blocks
};

}  // namespace

TEST_CASE("direct conv2d matches the definitions", "[conv][direct]") {
    uint64_t seed = 900;
    for (const Case& k : kCases) {
        const Conv2dShape s = shape_of(k);
        INFO(describe(k));
        REQUIRE(cpu::direct::fits(s, Pass::forward));
        REQUIRE(cpu::direct::fits(s, Pass::grad_weight));
        REQUIRE(cpu::direct::fits(s, Pass::grad_input) == (k.c % 8 == 0));
        const std::vector<float> x = random_floats(s.n * s.c * s.h * s.w, ++seed);
        const std::vector<float> w = random_floats(s.o * s.c * s.kh * s.kw, ++seed);
        const std::vector<float> b = random_floats(s.o, ++seed);
        const std::vector<float> dy = random_floats(s.n * s.o * s.oh * s.ow, ++seed);
        const Refs r = references(s, x, w, b, dy);
        const Outputs one = run_direct(s, x, w, b, dy, 1);
        check(one.out, r.out, "forward");
        if (k.c % 8 == 0) check(one.dx, r.dx, "grad_input");
        check(one.dw, r.dw, "grad_weight");
        for (int threads : {2, 3}) {
            INFO(threads << " threads");
            const Outputs many = run_direct(s, x, w, b, dy, threads);
            REQUIRE(std::memcmp(many.out.data(), one.out.data(), one.out.size() * 4) == 0);
            REQUIRE(std::memcmp(many.dx.data(), one.dx.data(), one.dx.size() * 4) == 0);
            REQUIRE(std::memcmp(many.dw.data(), one.dw.data(), one.dw.size() * 4) == 0);
        }
    }
}

TEST_CASE("direct conv2d: an empty batch gives a zero weight gradient", "[conv][direct]") {
    const Conv2dShape s = shape_of({0, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1});
    std::vector<float> w = random_floats(16 * 16 * 9, 1), dw(w.size(), 7.0f);
    cpu::direct::grad_weight(s, nullptr, nullptr, dw.data());
    for (float v : dw) REQUIRE(v == 0.0f);
}

TEST_CASE("the conv2d fronts take the direct kernels where fits says so", "[conv][direct]") {
    // The front's result is the direct kernel's, bit for bit, for a shape
    // that fits; one that does not (groups 2) still matches the reference.
    const Case k{2, 16, 10, 10, 16, 3, 3, 1, 1, 1, 1, 1, 1};
    const Conv2dShape s = shape_of(k);
    const std::vector<float> x = random_floats(s.n * s.c * s.h * s.w, 11);
    const std::vector<float> w = random_floats(s.o * s.c * 9, 12);
    const std::vector<float> dy = random_floats(s.n * s.o * s.oh * s.ow, 13);
    const std::vector<float> zero(size_t(s.o), 0.0f);
    const Outputs direct = run_direct(s, x, w, zero, dy, omp_get_max_threads());
    const Tensor tx = tensor_of(x, {s.n, s.c, s.h, s.w}), tw = tensor_of(w, {s.o, s.c, 3, 3});
    const Tensor tdy = tensor_of(dy, {s.n, s.o, s.oh, s.ow});
    const Tensor out = kernels::conv2d(tx, tw, {}, {1, 1}, {1, 1});
    const Conv2dGrads g =
        kernels::conv2d_backward(tdy, tx, tw, {1, 1}, {1, 1}, {1, 1}, 1, {true, true, false});
    REQUIRE(out.to_vector<float>() == direct.out);
    REQUIRE(g.input.to_vector<float>() == direct.dx);
    REQUIRE(g.weight.to_vector<float>() == direct.dw);
}

TEST_CASE("direct conv2d's rule", "[conv][direct]") {
    const Conv2dShape base = shape_of({2, 16, 8, 8, 16, 3, 3, 1, 1, 1, 1, 1, 1});
    for (Pass p : {Pass::forward, Pass::grad_input, Pass::grad_weight})
        REQUIRE(cpu::direct::fits(base, p));
    Conv2dShape s = base;
    s.groups = 2;  // grouped: im2col
    for (Pass p : {Pass::forward, Pass::grad_input, Pass::grad_weight})
        REQUIRE_FALSE(cpu::direct::fits(s, p));
    s = base;
    s.kh = s.kw = 1;  // 1×1: im2col's GEMM reads the input as it lies
    REQUIRE_FALSE(cpu::direct::fits(s, Pass::forward));
    s.sh = s.sw = 2;  // strided too
    REQUIRE_FALSE(cpu::direct::fits(s, Pass::forward));
    s = base;
    s.c = cpu::direct::kMaxChannels + 8;  // wide: the GEMM is as fast
    REQUIRE_FALSE(cpu::direct::fits(s, Pass::forward));
    s = base;
    s.o = 24;  // whole 8-row tiles, but not whole 16-lane vectors
    REQUIRE(cpu::direct::fits(s, Pass::forward));
    REQUIRE_FALSE(cpu::direct::fits(s, Pass::grad_weight));
    s = base;
    s.c = 12;  // grad_input's tiles are 8 input channels
    REQUIRE(cpu::direct::fits(s, Pass::forward));
    REQUIRE_FALSE(cpu::direct::fits(s, Pass::grad_input));
}

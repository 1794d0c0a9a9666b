// The depthwise conv2d kernels (kernels/cpu/conv_depthwise.cpp) against
// naive f64 loops written from the definitions, in f32 and f64: forward,
// grad_input and grad_weight over strides, paddings (also wider than half
// the kernel), dilations, channel multipliers, non-square kernels, images
// narrower than the kernel's reach; every output overwritten (NaN-poisoned
// buffers); bit-identical for 1, 2 and 3 threads; the fronts take this path
// for groups = C; and the rule itself.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "kernels/conv.h"
#include "kernels/cpu/conv_depthwise.h"
#include "support/support.h"

using namespace ember;
using namespace ember::kernels;

namespace {

struct Case {
    int64_t n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw;  // m: kernels per channel
};

Conv2dShape shape_of(const Case& k) {
    Conv2dShape s{k.n,  k.c,  k.h,  k.w,  k.c * k.m, k.kh, k.kw, k.sh,
                  k.sw, k.ph, k.pw, k.dh, k.dw,      k.c,  0,    0};
    s.oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
    s.ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
    return s;
}

std::string describe(const Case& k) {
    std::ostringstream os;
    os << "n" << k.n << " c" << k.c << " " << k.h << "x" << k.w << " m" << k.m << " k" << k.kh
       << "x" << k.kw << " stride " << k.sh << "," << k.sw << " pad " << k.ph << "," << k.pw
       << " dil " << k.dh << "," << k.dw;
    return os.str();
}

template <class T>
std::vector<T> random_values(int64_t count, uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    std::vector<T> v(static_cast<size_t>(count));
    for (T& x : v) x = T(dist(gen));
    return v;
}

// A reference value and the sum of its terms' magnitudes (what rounding scales with).
struct Ref {
    std::vector<double> value, mag;
    void add(size_t e, double term) {
        value[e] += term;
        mag[e] += std::abs(term);
    }
};

struct Refs {
    Ref out, dx, dw;
};

template <class T>
Refs references(const Conv2dShape& s, const std::vector<T>& x, const std::vector<T>& w,
                const std::vector<T>& b, const std::vector<T>& dy) {
    const int64_t m = s.o / s.c;
    Refs r;
    r.out = {std::vector<double>(dy.size(), 0.0), std::vector<double>(dy.size(), 0.0)};
    r.dx = {std::vector<double>(x.size(), 0.0), std::vector<double>(x.size(), 0.0)};
    r.dw = {std::vector<double>(w.size(), 0.0), std::vector<double>(w.size(), 0.0)};
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t o = 0; o < s.o; ++o)
            for (int64_t oy = 0; oy < s.oh; ++oy)
                for (int64_t ox = 0; ox < s.ow; ++ox) {
                    const size_t out = size_t(((n * s.o + o) * s.oh + oy) * s.ow + ox);
                    r.out.add(out, double(b[size_t(o)]));
                    for (int64_t i = 0; i < s.kh; ++i)
                        for (int64_t j = 0; j < s.kw; ++j) {
                            const int64_t y = oy * s.sh - s.ph + i * s.dh;
                            const int64_t xx = ox * s.sw - s.pw + j * s.dw;
                            if (y < 0 || y >= s.h || xx < 0 || xx >= s.w) continue;
                            const size_t in = size_t(((n * s.c + o / m) * s.h + y) * s.w + xx);
                            const size_t wi = size_t((o * s.kh + i) * s.kw + j);
                            r.out.add(out, double(w[wi]) * double(x[in]));
                            r.dx.add(in, double(dy[out]) * double(w[wi]));
                            r.dw.add(wi, double(dy[out]) * double(x[in]));
                        }
                }
    return r;
}

template <class T>
void check(const std::vector<T>& got, const Ref& want, const char* what) {
    // f32: sums of up to 64 terms per lane before the f64 flush; f64 much tighter.
    const double tol = sizeof(T) == 4 ? 1e-5 : 1e-14;
    REQUIRE(got.size() == want.value.size());
    for (size_t e = 0; e < got.size(); ++e) {
        const double err = std::abs(double(got[e]) - want.value[e]);
        if (!(err <= tol * want.mag[e] + 1e-300)) {
            INFO(what << " element " << e << ": got " << got[e] << ", want " << want.value[e]
                      << " (term magnitudes " << want.mag[e] << ")");
            REQUIRE(err <= tol * want.mag[e] + 1e-300);
        }
    }
}

template <class T>
struct Outputs {
    std::vector<T> out, dx, dw;
};

// The three kernels on `threads` threads, into NaN-poisoned buffers.
template <class T>
Outputs<T> run_depthwise(const Conv2dShape& s, const std::vector<T>& x, const std::vector<T>& w,
                         const std::vector<T>& b, const std::vector<T>& dy, int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    constexpr T nan = std::numeric_limits<T>::quiet_NaN();
    Outputs<T> r{std::vector<T>(dy.size(), nan), std::vector<T>(x.size(), nan),
                 std::vector<T>(w.size(), nan)};
    cpu::depthwise::forward(s, x.data(), w.data(), b.data(), r.out.data());
    cpu::depthwise::grad_input(s, dy.data(), w.data(), r.dx.data());
    cpu::depthwise::grad_weight(s, dy.data(), x.data(), r.dw.data());
    omp_set_num_threads(saved);
    return r;
}

const Case kCases[] = {
    // n, c, h, w, m, kh, kw, sh, sw, ph, pw, dh, dw
    {2, 8, 28, 28, 1, 3, 3, 1, 1, 1, 1, 1, 1},   // the common 3×3 depthwise
    {2, 6, 17, 15, 1, 3, 3, 2, 2, 1, 1, 1, 1},   // stride 2, odd sizes
    {1, 4, 19, 23, 2, 5, 3, 3, 2, 2, 1, 1, 1},   // multiplier 2, stride 3 × 2, non-square
    {2, 5, 12, 12, 3, 3, 3, 1, 1, 2, 2, 2, 2},   // multiplier 3, dilation 2
    {1, 3, 6, 5, 1, 5, 3, 1, 1, 3, 0, 1, 1},     // padding wider than half the kernel
    {1, 4, 3, 2, 1, 3, 3, 1, 1, 1, 1, 1, 1},     // image smaller than the kernel's reach
    {1, 2, 9, 40, 1, 7, 7, 1, 1, 3, 3, 1, 1},    // 7×7, wide rows
    {3, 8, 7, 7, 1, 1, 1, 1, 1, 0, 0, 1, 1},     // 1×1: a per-channel scale
    {2, 4, 11, 13, 1, 2, 2, 2, 2, 0, 0, 1, 1},   // even kernel, no padding
    {20, 6, 14, 14, 1, 3, 3, 1, 1, 1, 1, 1, 1},  // a longer batch for grad_weight's sums
    {1, 2, 5, 75, 1, 3, 3, 2, 2, 1, 1, 1, 1},    // stride 2, rows wide enough for 16-blocks
    {1, 2, 3, 1, 1, 5, 5, 1, 5, 2, 2, 1, 1},     // one column, stride 5: planes with no input
};

template <class T>
void check_cases() {
    uint64_t seed = 4100;
    for (const Case& k : kCases) {
        const Conv2dShape s = shape_of(k);
        INFO(describe(k) << " " << (sizeof(T) == 4 ? "f32" : "f64"));
        REQUIRE(cpu::depthwise::fits(s));
        const auto x = random_values<T>(s.n * s.c * s.h * s.w, ++seed);
        const auto w = random_values<T>(s.o * s.kh * s.kw, ++seed);
        const auto b = random_values<T>(s.o, ++seed);
        const auto dy = random_values<T>(s.n * s.o * s.oh * s.ow, ++seed);
        const Refs r = references(s, x, w, b, dy);
        const Outputs<T> one = run_depthwise(s, x, w, b, dy, 1);
        check(one.out, r.out, "forward");
        check(one.dx, r.dx, "grad_input");
        check(one.dw, r.dw, "grad_weight");
        for (int threads : {2, 3}) {
            INFO(threads << " threads");
            const Outputs<T> many = run_depthwise(s, x, w, b, dy, threads);
            REQUIRE(std::memcmp(many.out.data(), one.out.data(), one.out.size() * sizeof(T)) == 0);
            REQUIRE(std::memcmp(many.dx.data(), one.dx.data(), one.dx.size() * sizeof(T)) == 0);
            REQUIRE(std::memcmp(many.dw.data(), one.dw.data(), one.dw.size() * sizeof(T)) == 0);
        }
    }
}

}  // namespace

TEST_CASE("depthwise conv2d matches the definitions", "[conv][depthwise]") {
    check_cases<float>();
    check_cases<double>();
}

TEST_CASE("the conv2d fronts take the depthwise kernels for groups = C", "[conv][depthwise]") {
    // The fronts' results are the depthwise kernels', bit for bit.
    const Case k{2, 6, 10, 9, 2, 3, 3, 2, 1, 1, 1, 1, 1};
    const Conv2dShape s = shape_of(k);
    const auto x = random_values<float>(s.n * s.c * s.h * s.w, 21);
    const auto w = random_values<float>(s.o * 9, 22);
    const auto b = random_values<float>(s.o, 23);
    const auto dy = random_values<float>(s.n * s.o * s.oh * s.ow, 24);
    const Outputs<float> want = run_depthwise(s, x, w, b, dy, omp_get_max_threads());
    auto tensor_of = [](std::vector<float> v, const Shape& shape) {
        return from_blob(v.data(), shape).clone();
    };
    const Tensor tx = tensor_of(x, {s.n, s.c, s.h, s.w}), tw = tensor_of(w, {s.o, 1, 3, 3});
    const Tensor out = kernels::conv2d(tx, tw, tensor_of(b, {s.o}), {2, 1}, {1, 1}, {1, 1}, s.c);
    const Conv2dGrads g = kernels::conv2d_backward(tensor_of(dy, {s.n, s.o, s.oh, s.ow}), tx, tw,
                                                   {2, 1}, {1, 1}, {1, 1}, s.c);
    REQUIRE(out.to_vector<float>() == want.out);
    REQUIRE(g.input.to_vector<float>() == want.dx);
    REQUIRE(g.weight.to_vector<float>() == want.dw);
    REQUIRE(g.bias.defined());
}

TEST_CASE("depthwise conv2d's rule", "[conv][depthwise]") {
    Conv2dShape s = shape_of({2, 8, 8, 8, 1, 3, 3, 1, 1, 1, 1, 1, 1});
    REQUIRE(cpu::depthwise::fits(s));
    s.o = 16;  // two kernels per channel
    REQUIRE(cpu::depthwise::fits(s));
    s.groups = 4;  // grouped, not depthwise: im2col
    REQUIRE_FALSE(cpu::depthwise::fits(s));
    s = shape_of({2, 1, 8, 8, 1, 3, 3, 1, 1, 1, 1, 1, 1});
    REQUIRE_FALSE(cpu::depthwise::fits(s));  // one channel, groups 1: an ordinary conv
}

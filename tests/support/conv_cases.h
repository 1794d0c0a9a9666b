// What the CPU convolution kernel tests share (test_conv_direct.cpp,
// test_conv_nhwc.cpp, test_conv_nhwc_bf16.cpp): a conv's sizes as one line
// of a table, seeded inputs, a reference value that remembers its terms'
// magnitudes, and the channels-last passes' definitions.
#pragma once

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "support.h"

namespace ember::test {

/// A groups-1 conv: batch, input channels, image, output channels, kernel,
/// stride, padding, dilation.
struct ConvCase {
    int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
};

inline kernels::Conv2dShape shape_of(const ConvCase& k) {
    kernels::Conv2dShape s{k.n,  k.c,  k.h,  k.w,  k.o,  k.kh, k.kw, k.sh,
                           k.sw, k.ph, k.pw, k.dh, k.dw, 1,    0,    0};
    s.oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
    s.ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
    return s;
}

inline std::string describe(const ConvCase& k) {
    std::ostringstream os;
    os << "n" << k.n << " c" << k.c << " " << k.h << "x" << k.w << " o" << k.o << " k" << k.kh
       << "x" << k.kw << " stride " << k.sh << "," << k.sw << " pad " << k.ph << "," << k.pw
       << " dil " << k.dh << "," << k.dw;
    return os.str();
}

/// The channels-last kernels' cases (test_conv_nhwc.cpp, and in bf16
/// test_conv_nhwc_bf16.cpp): resnet8's layers, every tile width, strides,
/// paddings, dilation, odd channels, one-pixel rows, several chunks.
inline std::vector<ConvCase> channels_last_cases() {
    return {
        // n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw
        {2, 16, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1},  // resnet8's layer1: rows of two tiles
        {2, 16, 28, 28, 32, 3, 3, 2, 2, 1, 1, 1, 1},  // layer2's first conv: stride 2
        {3, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1},  // one 14-pixel tile per row
        {2, 32, 14, 14, 64, 3, 3, 2, 2, 1, 1, 1, 1},  // four output vectors
        {2, 64, 7, 7, 64, 3, 3, 1, 1, 1, 1, 1, 1},    // layer3
        {2, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1, 1, 1},   // the stem: one input channel
        {1, 8, 9, 23, 48, 3, 3, 1, 1, 1, 1, 1, 1},    // three vectors; 23 = 9 + 9 + 5 pixels
        {2, 16, 12, 12, 32, 1, 1, 2, 2, 0, 0, 1, 1},  // 1×1 strided shortcut, no padding
        {1, 12, 11, 13, 16, 3, 5, 3, 2, 2, 1, 1, 1},  // non-square kernel, stride 3 × 2
        {1, 8, 12, 12, 16, 3, 3, 1, 1, 2, 2, 2, 2},   // dilation 2
        {1, 5, 6, 5, 32, 5, 3, 1, 1, 3, 0, 1, 1},     // padding > kernel / 2, odd channels
        {2, 16, 3, 1, 16, 3, 3, 1, 1, 1, 1, 1, 1},    // one-pixel rows
        {1, 24, 4, 40, 64, 2, 2, 1, 1, 0, 0, 1, 1},   // even kernel; 40 = 7 + ... + 5 pixels
        {1, 16, 7, 9, 16, 1, 1, 3, 3, 0, 0, 1, 1},    // 1×1 at stride 3: phases no tap reaches
        {1, 32, 9, 8, 16, 2, 2, 2, 2, 0, 0, 1, 1},    // stride = kernel: one tap per phase
        {20, 16, 6, 6, 32, 3, 3, 1, 1, 1, 1, 1, 1},   // several grad_weight chunks
        {2, 13, 7, 8, 16, 1, 1, 2, 2, 0, 0, 1, 1},    // pointwise, odd channels gathered
        {2, 24, 5, 6, 32, 1, 1, 1, 1, 0, 0, 1, 1},    // pointwise at stride 1: 16 + 8 channels
    };
}

/// A conv through the fronts: input and weight shapes, stride and padding.
struct ConvFront {
    Shape x, w;
    Int2 stride, padding;
};

/// The channels-last kernels' front cases (test_conv_nhwc.cpp and
/// test_conv_nhwc_bf16.cpp): their shapes at stride 2 and 1×1, and one whose
/// grad_input they do not take (C = 8: through NCHW).
inline std::vector<ConvFront> channels_last_fronts() {
    return {{{3, 16, 9, 9}, {32, 16, 3, 3}, {2, 2}, {1, 1}},
            {{2, 32, 6, 5}, {16, 32, 1, 1}, {1, 1}, {0, 0}},
            {{2, 8, 7, 7}, {16, 8, 3, 3}, {1, 1}, {1, 1}}};
}

/// `count` floats uniform in [-1, 1), seeded.
inline std::vector<float> random_floats(int64_t count, uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = dist(gen);
    return v;
}

/// Reference values in f64 and the sums of their terms' magnitudes (what
/// rounding scales with).
struct Ref {
    std::vector<double> value, mag;
    explicit Ref(size_t n = 0) : value(n, 0.0), mag(n, 0.0) {}
    void add(size_t e, double term) {
        value[e] += term;
        mag[e] += std::abs(term);
    }
};

/// A channels-last conv's three passes from their definitions, in f64: out
/// [N, OH, OW, O], dx [N, H, W, C] and dw [O, C, kH, kW] from x [N, H, W, C],
/// w, bias (or null) and dy [N, OH, OW, O]; value(e) reads an element (f32,
/// or bf16 bits) as a double.
struct NhwcRefs {
    Ref out, dx, dw;
};
template <class T, class Value>
NhwcRefs nhwc_reference(const kernels::Conv2dShape& s, const std::vector<T>& x,
                        const std::vector<T>& w, const T* bias, const std::vector<T>& dy,
                        Value value) {
    NhwcRefs r{Ref(dy.size()), Ref(x.size()), Ref(w.size())};
    for (int64_t n = 0; n < s.n; ++n)
        for (int64_t oy = 0; oy < s.oh; ++oy)
            for (int64_t ox = 0; ox < s.ow; ++ox)
                for (int64_t o = 0; o < s.o; ++o) {
                    const size_t oe = size_t(((n * s.oh + oy) * s.ow + ox) * s.o + o);
                    if (bias) r.out.add(oe, value(bias[o]));
                    for (int64_t i = 0; i < s.kh; ++i)
                        for (int64_t j = 0; j < s.kw; ++j) {
                            const int64_t iy = oy * s.sh - s.ph + i * s.dh,
                                          ix = ox * s.sw - s.pw + j * s.dw;
                            if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                            for (int64_t c = 0; c < s.c; ++c) {
                                const size_t xe = size_t(((n * s.h + iy) * s.w + ix) * s.c + c);
                                const size_t we = size_t(((o * s.c + c) * s.kh + i) * s.kw + j);
                                r.out.add(oe, value(x[xe]) * value(w[we]));
                                r.dx.add(xe, value(dy[oe]) * value(w[we]));
                                r.dw.add(we, value(dy[oe]) * value(x[xe]));
                            }
                        }
                }
    return r;
}

/// got against want, each element within 3e-5 of its terms' magnitudes.
inline void check(const std::vector<float>& got, const Ref& want, const char* what) {
    REQUIRE(got.size() == want.value.size());
    for (size_t e = 0; e < got.size(); ++e) {
        const double err = std::abs(double(got[e]) - want.value[e]);
        if (!(err <= 3e-5 * want.mag[e] + 1e-30)) {
            INFO(what << " element " << e << ": got " << got[e] << ", want " << want.value[e]
                      << " (term magnitudes " << want.mag[e] << ")");
            REQUIRE(err <= 3e-5 * want.mag[e] + 1e-30);
        }
    }
}

}  // namespace ember::test

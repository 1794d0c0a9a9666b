// What the CPU convolution kernel tests share (test_conv_direct.cpp,
// test_conv_nhwc.cpp): a conv's sizes as one line of a table, seeded
// inputs, and a reference value that remembers its terms' magnitudes.
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

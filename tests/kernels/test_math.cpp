// The scalar math of kernels/math.h that is not an elementwise op of its own:
// exp_nonpositive, softmax's exp, against libm in f64 over its whole range.
#include <bit>
#include <cmath>
#include <cstdint>

#include "kernels/math.h"
#include "support/support.h"

using namespace ember;

TEST_CASE("math: exp_nonpositive is within 1.3 ulp of exp on [-87.3, 0]", "[math]") {
    // Every 97th float from -87.3 up to -0 (about 11 million of them).
    const uint32_t lo = std::bit_cast<uint32_t>(-87.3f), hi = std::bit_cast<uint32_t>(-0.0f);
    double worst = 0;
    float worst_at = 0;
    for (uint32_t bits = hi; bits <= lo; bits += 97) {
        const float x = std::bit_cast<float>(bits);
        const double want = std::exp(double(x));
        const float got = math::exp_nonpositive(x);
        const double ulp = double(std::nextafter(float(want), INFINITY)) - double(float(want));
        const double err = std::fabs(double(got) - want) / ulp;
        if (err > worst) worst = err, worst_at = x;
    }
    INFO("worst error " << worst << " ulp at x = " << worst_at);
    CHECK(worst < 1.3);
}

TEST_CASE("math: exp_nonpositive flushes below ln(FLT_MIN) and keeps NaN", "[math]") {
    CHECK(math::exp_nonpositive(0.0f) == 1.0f);
    CHECK(math::exp_nonpositive(-87.4f) == 0.0f);
    CHECK(math::exp_nonpositive(-INFINITY) == 0.0f);
    CHECK(std::isnan(math::exp_nonpositive(NAN)));
    CHECK(math::exp_nonpositive(-1.0) == std::exp(-1.0));
}

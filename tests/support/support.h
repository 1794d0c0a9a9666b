// Shared test oracles: check_close with a useful failure message, error
// assertions, and (from ops/oracle.h, shared with the benchmarks) seeded
// random inputs, f64 host copies and non-contiguous layouts.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ember/ember.h"
#include "ember/kernels.h"
#include "ops/oracle.h"

namespace ember::test {

/// Checks |actual - expected| <= atol + rtol * |expected| elementwise (NaNs
/// must match NaNs); on failure prints the shape, the first mismatches and the
/// worst relative error.
inline void check_close(const Tensor& actual, const std::vector<double>& expected,
                        double rtol = 1e-5, double atol = 1e-6) {
    REQUIRE(actual.numel() == int64_t(expected.size()));
    const CloseReport r = close_report(actual, expected, rtol, atol);
    INFO("shape " << shape_str(actual.shape()) << " dtype " << dtype_name(actual.dtype()) << ": "
                  << r.mismatches << " mismatches (rtol " << rtol << ", atol " << atol
                  << "), worst relative error " << r.worst << "\n"
                  << r.first);
    CHECK(r.ok());
}

inline void check_close(const Tensor& actual, const Tensor& expected, double rtol = 1e-5,
                        double atol = 1e-6) {
    INFO("expected shape " << shape_str(expected.shape()));
    REQUIRE(actual.shape() == expected.shape());
    check_close(actual, values(expected), rtol, atol);
}

/// Checks |got - want| <= rel * (|want| + max|want|) elementwise: a tolerance
/// scaled by the largest expected magnitude, for results summed with
/// cancellation (gradients, attention's outputs). got may be on any device.
inline void check_close_scaled(const Tensor& got, const Tensor& want, double rel) {
    REQUIRE(got.defined());
    REQUIRE(got.shape() == want.shape());
    const Tensor g = got.to(Device::cpu()).to(DType::f64),
                 w = want.to(Device::cpu()).to(DType::f64);
    double scale = 1e-30;
    for (double v : values(w)) scale = std::max(scale, std::abs(v));
    check_close(g, w, rel, rel * scale);
}

/// d/dv of sum(f(v) · r) by central differences in f64, element by element
/// of v (f64): the gradient a backward must give for the upstream gradient r.
template <class F>
std::vector<double> numeric_grad(const Tensor& v, const Tensor& r, F f, double h = 1e-6) {
    const std::vector<double> rv = values(r);
    std::vector<double> out;
    Tensor vp = v.clone();
    for (int64_t i = 0; i < v.numel(); ++i) {
        const Shape at = unravel(i, v.shape());
        const double v0 = v.at(at);
        double side[2];
        for (int s = 0; s < 2; ++s) {
            vp.set(at, s == 0 ? v0 + h : v0 - h);
            const std::vector<double> y = values(f(vp));
            side[s] = 0;
            for (size_t j = 0; j < y.size(); ++j) side[s] += y[j] * rv[j];
        }
        vp.set(at, v0);
        out.push_back((side[0] - side[1]) / (2 * h));
    }
    return out;
}

/// Requires that `expr` throws ember::Error whose message contains `substr`.
#define REQUIRE_THROWS_WITH_MSG(expr, substr) \
    REQUIRE_THROWS_WITH((expr), Catch::Matchers::Contains(substr))

}  // namespace ember::test

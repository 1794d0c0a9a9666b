// The oracles shared by the tests and the benchmarks, without Catch2: seeded
// random inputs, f64 host copies, non-contiguous layouts, per-dtype tolerances
// and the elementwise closeness check that check_close (tests/support/support.h) and
// the benchmark's validation both report through.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "kernels/factories.h"

namespace ember::test {

/// Seeded random tensor of `dtype`: floats uniform in [lo, hi); integers in
/// [lo, hi) truncated; bools from a coin flip.
inline Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo = -2.0,
                            double hi = 2.0) {
    Generator g(seed);
    if (dtype == DType::boolean) return randint(0, 2, shape, {DType::u8}, &g).to(DType::boolean);
    if (dtype == DType::u8) {  // unsigned: move the range to start at 0 or above
        lo = std::max(lo, 0.0);
        hi = std::max(hi, lo + 2);
    }
    if (!is_floating(dtype)) return randint(int64_t(lo), int64_t(hi), shape, {dtype}, &g);
    Tensor u = rand(shape, {DType::f64}, &g);
    // lo + (hi - lo) * u computed elementwise on the host.
    std::vector<double> v = u.to_vector<double>();
    for (double& x : v) x = lo + (hi - lo) * x;
    return from_vector(v, shape).to(dtype);
}

/// All elements as doubles, row-major.
inline std::vector<double> values(const Tensor& t) { return t.to_vector<double>(); }

/// Row-major multi-index of flat index i for `shape`.
inline Shape unravel(int64_t i, const Shape& shape) {
    Shape idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
    return idx;
}

/// A non-contiguous tensor with the same values as t: a transposed copy
/// transposed back (dims >= 2) or a strided slice of a larger buffer (1-d).
inline Tensor non_contiguous(const Tensor& t) {
    if (t.dim() >= 2 && t.size(-1) > 1 && t.size(-2) > 1) {
        const int64_t a = t.dim() - 2, b = t.dim() - 1;
        return t.transpose(a, b).contiguous().transpose(a, b);
    }
    if (t.dim() >= 1) {  // every other element of a buffer twice as wide
        Shape wide = t.shape();
        wide.back() *= 2;
        Tensor big = zeros(wide, {t.dtype(), t.device()});
        Tensor view = big.slice(-1, 0, wide.back(), 2);
        view.copy_(t);
        return view;
    }
    return t;  // 0-d: no layout to vary
}

/// Tolerances that fit a dtype's precision.
inline double rtol_for(DType t) {
    switch (t) {
        case DType::f16:
            return 2e-3;
        case DType::bf16:
            return 1.6e-2;
        case DType::f32:
            return 2e-5;
        default:
            return 1e-12;
    }
}

/// What comparing a result with its expected values found.
struct CloseReport {
    int64_t mismatches = 0;
    double worst = 0;   // largest relative error among the finite mismatches
    std::string first;  // the first few mismatches, one per line
    bool ok() const { return mismatches == 0; }
};

/// Compares |actual - expected| <= atol + rtol * |expected| elementwise (NaN
/// must meet NaN, an infinity the same infinity). `actual` must hold
/// expected.size() elements.
inline CloseReport close_report(const Tensor& actual, const std::vector<double>& expected,
                                double rtol, double atol) {
    const std::vector<double> got = values(actual);
    CloseReport r;
    std::ostringstream os;
    for (size_t i = 0; i < got.size(); ++i) {
        const double g = got[i], e = expected[i];
        bool ok;
        if (std::isnan(e))
            ok = std::isnan(g);
        else if (std::isinf(e))
            ok = g == e;
        else
            ok = std::abs(g - e) <= atol + rtol * std::abs(e);
        if (ok) continue;
        if (r.mismatches < 5)
            os << "  at " << shape_str(unravel(int64_t(i), actual.shape())) << ": got " << g
               << ", expected " << e << "\n";
        ++r.mismatches;
        if (std::isfinite(e))
            r.worst = std::max(r.worst, std::abs(g - e) / std::max(std::abs(e), 1e-300));
    }
    r.first = os.str();
    return r;
}

}  // namespace ember::test

// Reduce family: sum over the last dim, the first dim and all dims, mean, max
// with indices and var of a [4096, 4096] f32 matrix (64 MiB, past the caches).
// Bytes: input read + output written; the limit is the copy bandwidth
// (read + write) measured in the same run. FLOPs: about one per input element.
#include "kernels/reduce.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"

namespace ember::bench {

namespace {

namespace k = ember::kernels;

// Throws unless got is within a relative tolerance of the f64 reference want
// (scaled by `magnitude`, the size of the terms, for sums that cancel).
void expect_close(const char* what, int64_t at, double got, double want, double magnitude = 0) {
    const double tol = 1e-4 * std::max(std::abs(want), magnitude);
    EMBER_CHECK(std::abs(got - want) <= tol, "bench reduce: ", what, " wrong at ", at, ": got ",
                got, ", expected ", want);
}

// Checks the kernels on a sample of rows and columns against plain f64 loops.
void validate(const Tensor& x) {
    const int64_t rows = x.size(0), cols = x.size(1);
    const float* p = x.data<float>();
    const Tensor s1 = k::sum(x, {1}), s0 = k::sum(x, {0}), m1 = k::mean(x, {1});
    const Tensor v1 = k::var(x, {1});
    const ValuesIndices mx = k::max(x, 1);
    for (int64_t r = 0; r < rows; r += rows / 8) {
        double s = 0, best = -INFINITY, sq = 0;
        int64_t arg = 0;
        for (int64_t c = 0; c < cols; ++c) {
            const double v = p[r * cols + c];
            s += v;
            if (v > best) best = v, arg = c;
        }
        for (int64_t c = 0; c < cols; ++c)
            sq += (p[r * cols + c] - s / cols) * (p[r * cols + c] - s / cols);
        expect_close("sum(last dim)", r, s1.at({r}), s, double(cols));
        expect_close("mean(last dim)", r, m1.at({r}), s / double(cols), 1);
        expect_close("var(last dim)", r, v1.at({r}), sq / double(cols - 1));
        expect_close("max(last dim)", r, mx.values.at({r}), best);
        EMBER_CHECK(mx.indices.at({r}) == double(arg), "bench reduce: max index wrong at row ", r);
    }
    for (int64_t c = 0; c < cols; c += cols / 8) {
        double s = 0;
        for (int64_t r = 0; r < rows; ++r) s += p[r * cols + c];
        expect_close("sum(first dim)", c, s0.at({c}), s, double(rows));
    }
    double all = 0;
    for (int64_t i = 0; i < rows * cols; ++i) all += p[i];
    expect_close("sum(all)", 0, k::sum(x).item(), all, double(rows * cols));
}

}  // namespace

void run_reduce(const Options& o, Report& rep) {
    const double limit = measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    const int64_t side = o.quick ? 1024 : 4096, n = side * side;
    const Tensor x = rand({side, side});
    validate(x);

    struct Kernel {
        const char* name;
        std::function<void()> run;
        double out_bytes;  // per output element
        int64_t outputs;
    };
    const Tensor flat = x.view({n});
    const Kernel kernels[] = {
        {"sum(last dim)", [&] { (void)k::sum(x, {1}); }, 4, side},
        {"sum(first dim)", [&] { (void)k::sum(x, {0}); }, 4, side},
        {"sum(all)", [&] { (void)k::sum(flat); }, 4, 1},
        {"mean(last dim)", [&] { (void)k::mean(x, {1}); }, 4, side},
        {"max+index(last dim)", [&] { (void)k::max(x, 1); }, 4 + 8, side},
        {"var(last dim)", [&] { (void)k::var(x, {1}); }, 4, side},
    };
    for (const Kernel& kn : kernels) {
        const double ms = median_ms(kn.run, o.warmup, o.repeats);
        const double bytes = double(n) * 4 + kn.out_bytes * double(kn.outputs);
        const double gbps = bytes / (ms * 1e6);
        rep.add({"reduce", kn.name, shape_str(kn.outputs == 1 ? Shape{n} : Shape{side, side}), ms,
                 gbps, double(n) / (ms * 1e6), gbps / limit, lim});
    }
}

}  // namespace ember::bench

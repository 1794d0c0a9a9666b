// Softmax family: softmax and log_softmax over the last dim of f32 matrices
// with long rows ([4096, 4096]) and short rows ([32768, 512]).
// Bytes: 2 * 4 * numel (read x, write y); the limit is the copy bandwidth
// measured in the same run. FLOPs: about 15 per element (the exp). Each op
// gets two rows: the kernel into a reused output (as the copy limit is
// measured), then the front function, which also allocates a new output per
// call and pays its first-touch page faults.
#include "kernels/cpu/softmax.h"

#include <cmath>
#include <cstdio>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"
#include "kernels/front.h"
#include "kernels/softmax.h"

namespace ember::bench {

namespace {

// Checks a sample of rows of softmax / log_softmax against f64 loops.
void validate(const Tensor& x, const Tensor& y, bool log) {
    const int64_t rows = x.size(0), cols = x.size(1);
    const float* px = x.data<float>();
    const float* py = y.data<float>();
    for (int64_t r = 0; r < rows; r += std::max<int64_t>(1, rows / 8)) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(px[r * cols + c]));
        for (int64_t c = 0; c < cols; ++c) s += std::exp(px[r * cols + c] - m);
        for (int64_t c = 0; c < cols; ++c) {
            const double d = px[r * cols + c] - m;
            const double want = log ? d - std::log(s) : std::exp(d) / s;
            const double got = py[r * cols + c];
            EMBER_CHECK(std::abs(got - want) <= 1e-5 * std::abs(want) + 1e-7,
                        "bench softmax: ", log ? "log_softmax" : "softmax", " wrong at [", r, ", ",
                        c, "]: got ", got, ", expected ", want);
        }
    }
}

}  // namespace

void run_softmax(const Options& o, Report& rep) {
    const double limit = measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    const Shape shapes[] = {o.quick ? Shape{1024, 1024} : Shape{4096, 4096},
                            o.quick ? Shape{2048, 512} : Shape{32768, 512}};
    for (const Shape& shape : shapes) {
        const Tensor x = randn(shape);
        const double n = double(x.numel());
        // The kernel writes into an output allocated (and paged in) once, as
        // the copy limit does; the front rows add a fresh output per call.
        Tensor y = zeros(shape);
        const kernels::View vx = kernels::view_of(x), vy = kernels::view_of(y);
        const kernels::ReduceShape rows{shape[0], shape[1], 1};
        for (bool log : {false, true}) {
            const auto kernel = log ? kernels::cpu::log_softmax : kernels::cpu::softmax;
            const auto front = log ? kernels::log_softmax : kernels::softmax;
            kernel(vy, vx, rows);
            validate(x, y, log);
            validate(x, front(x, 1), log);
            const char* name = log ? "log_softmax(last dim)" : "softmax(last dim)";
            const double ms = median_ms([&] { kernel(vy, vx, rows); }, o.warmup, o.repeats);
            const double gbps = 2 * 4 * n / (ms * 1e6);
            rep.add({"softmax", name, shape_str(shape), ms, gbps, 15 * n / (ms * 1e6), gbps / limit,
                     lim});
            const double fms = median_ms([&] { (void)front(x, 1); }, o.warmup, o.repeats);
            const double fgbps = 2 * 4 * n / (fms * 1e6);
            rep.add({"softmax", "  front, new output", shape_str(shape), fms, fgbps,
                     15 * n / (fms * 1e6), fgbps / limit, lim});
        }
    }
}

}  // namespace ember::bench

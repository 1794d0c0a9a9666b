// Elementwise family: binary, scalar, broadcast, unary and where kernels on
// 16M f32 elements, each checked on a sample of elements against a double
// reference, then timed. Bytes per element (docs/elementwise.md): 12 for
// add/mul (two reads, one write), 8 for the scalar and row-broadcast adds and
// the unary ops (the scalar and the 16 KiB row stay in cache), 13 for where.
#include "kernels/cpu/elementwise.h"

#include <cmath>
#include <cstdio>
#include <functional>

#include "bench/bench.h"
#include "core/error.h"
#include "ember/ember.h"
#include "ember/kernels.h"
#include "kernels/elementwise.h"
#include "kernels/front.h"

namespace ember::bench {

namespace {

namespace K = ember::kernels;

struct Case {
    const char* kernel;
    Shape shape;
    double bytes_per_element;
    std::function<void(const Tensor& out)> run;  // writes the op's result into `out`
    std::function<double(int64_t)> reference;    // element i of the result, in double
};

// Checks about a thousand evenly spaced elements of `out` against the
// reference; a wrong kernel is not worth timing.
void validate(const Case& c, const Tensor& out) {
    const float* o = out.data<float>();
    const int64_t n = out.numel(), step = std::max<int64_t>(1, n / 1000);
    for (int64_t i = 0; i < n; i += step) {
        const double want = c.reference(i), got = o[i];
        EMBER_CHECK(std::abs(got - want) <= 1e-5 * std::abs(want) + 1e-6,
                    "bench elementwise: ", c.kernel, " is wrong at element ", i, ": got ", got,
                    ", expected ", want);
    }
}

// The CPU kernels write into a preallocated output, as the copy limit does:
// the front function adds a fresh 64 MiB allocation and its page faults to
// every call, which measures the allocator; one extra row shows that cost.
void unary_into(K::UnaryOp op, const Tensor& out, const Tensor& x) {
    K::cpu::unary(op, K::view_of(out), K::view_of(x));
}

}  // namespace

void run_elementwise(const Options& o, Report& rep) {
    const double limit = measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    const int64_t side = o.quick ? 1024 : 4096, n = side * side;
    const Shape shape = {n}, matrix = {side, side};

    Generator gen(2024);
    const Tensor a = randn(shape, {}, &gen), b = randn(shape, {}, &gen);
    const Tensor row = randn({side}, {}, &gen);
    const Tensor cond = K::gt(randn(shape, {}, &gen), 0.0);
    const float *pa = a.data<float>(), *pb = b.data<float>(), *pr = row.data<float>();
    const bool* pc = cond.data<bool>();
    const K::View va = K::view_of(a), vb = K::view_of(b), vc = K::view_of(cond);

    const std::vector<Case> cases = {
        {"add", shape, 12,
         [&](const Tensor& out) { K::cpu::binary(K::BinaryOp::add, K::view_of(out), va, vb); },
         [&](int64_t i) { return double(pa[i]) + pb[i]; }},
        {"mul", shape, 12,
         [&](const Tensor& out) { K::cpu::binary(K::BinaryOp::mul, K::view_of(out), va, vb); },
         [&](int64_t i) { return double(pa[i]) * pb[i]; }},
        {"add scalar", shape, 8,
         [&](const Tensor& out) {
             K::cpu::binary_scalar(K::BinaryOp::add, K::view_of(out), va, 2.0);
         },
         [&](int64_t i) { return double(pa[i]) + 2.0; }},
        {"add row broadcast", matrix, 8,
         [&](const Tensor& out) {
             const K::View r = K::broadcast_view(row, matrix, "bench");
             K::cpu::binary(K::BinaryOp::add, K::view_of(out), K::view_of(a.view(matrix)), r);
         },
         [&](int64_t i) { return double(pa[i]) + pr[i % side]; }},
        {"relu", shape, 8, [&](const Tensor& out) { unary_into(K::UnaryOp::relu, out, a); },
         [&](int64_t i) { return std::max(double(pa[i]), 0.0); }},
        // perf: exp, gelu and sigmoid call scalar libm (GCC vectorizes expf/tanhf only
        // with -ffast-math), so they are compute-bound on two cores, not memory-bound.
        {"exp", shape, 8, [&](const Tensor& out) { unary_into(K::UnaryOp::exp, out, a); },
         [&](int64_t i) { return std::exp(double(pa[i])); }},
        {"gelu(tanh)", shape, 8,
         [&](const Tensor& out) { unary_into(K::UnaryOp::gelu_tanh, out, a); },
         [&](int64_t i) {
             const double x = pa[i];
             return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
         }},
        {"sigmoid", shape, 8, [&](const Tensor& out) { unary_into(K::UnaryOp::sigmoid, out, a); },
         [&](int64_t i) { return 1 / (1 + std::exp(-double(pa[i]))); }},
        {"where", shape, 13, [&](const Tensor& out) { K::cpu::where(K::view_of(out), vc, va, vb); },
         [&](int64_t i) { return double(pc[i] ? pa[i] : pb[i]); }},
    };

    for (const Case& c : cases) {
        const Tensor out = full(c.shape, NAN);  // poisoned, and its pages touched once
        c.run(out);
        validate(c, out);
        const double ms = median_ms([&] { c.run(out); }, o.warmup, o.repeats);
        const double gbps = double(n) * c.bytes_per_element / (ms * 1e6);
        rep.add({"elementwise", c.kernel, shape_str(c.shape), ms, gbps, -1, gbps / limit, lim});
    }
    {  // The same add through the front function, which allocates its output each call.
        validate(cases[0], K::add(a, b));
        const double ms = median_ms([&] { (void)K::add(a, b); }, o.warmup, o.repeats);
        const double gbps = double(n) * 12 / (ms * 1e6);
        rep.add({"elementwise", "add (front, allocates)", shape_str(shape), ms, gbps, -1,
                 gbps / limit, lim});
    }
}

}  // namespace ember::bench

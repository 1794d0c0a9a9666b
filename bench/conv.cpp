// conv family: conv2d forward on ResNet-like f32 shapes; conv2d_backward's
// input and weight gradients on the 3×3 64→64 and the depthwise one; and
// every pass of resnet8's convolutions at its training batch (128), also on
// channels-last operands in f32 and in bf16 (against the bf16 peak: the
// VDPBF16PS tile timed in the same run); on a GPU also bench/gpu_linalg.cpp's
// rows (cuDNN, both layouts, f32 and bf16).
// FLOPs 2·N·O·OH·OW·(C/groups)·kH·kW for each (forward, grad_input,
// grad_weight); the limit is the 1024³ f32 matmul rate measured in the same
// run (the GEMM the convolution reduces to), and for the depthwise conv,
// which is memory-bound, the copy rate (bytes: the input and output planes
// each pass reads and writes once). Each forward shape has two rows: the
// front (which allocates a fresh output, page faults included) and the CPU
// kernel writing into a reused buffer; the backward rows time the front.
#include "kernels/conv.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"
#include "kernels/cpu/conv.h"
#include "kernels/matmul.h"

namespace ember::bench {

namespace {

struct ConvShape {
    const char* name;
    int64_t n, c, h, w, o, k, stride, pad, groups;
};

int64_t out_size(const ConvShape& s, int64_t in) { return (in + 2 * s.pad - s.k) / s.stride + 1; }

// Relative to the terms' magnitudes: f32 sums, and bf16 results (rounded once).
constexpr double kF32Tol = 1e-5, kBf16Tol = 0x1p-8 + 1e-5;

// Checks sampled outputs of y = conv2d(x, w, b) (f32 NCHW) against f64 sums.
void validate(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
              const ConvShape& s, double tol = kF32Tol) {
    const int64_t oh = y.size(2), ow = y.size(3), cg = s.c / s.groups, og = s.o / s.groups;
    const float *px = x.data<float>(), *pw = w.data<float>(), *pb = b.data<float>(),
                *py = y.data<float>();
    for (int t = 0; t < 32; ++t) {
        const int64_t n = (t * 7) % s.n, o = (t * 13 + 1) % s.o, oy = (t * 5 + 2) % oh,
                      ox = (t * 11) % ow;
        double want = pb[o], mag = std::abs(want);
        for (int64_t c = 0; c < cg; ++c)
            for (int64_t i = 0; i < s.k; ++i)
                for (int64_t j = 0; j < s.k; ++j) {
                    const int64_t iy = oy * s.stride - s.pad + i, ix = ox * s.stride - s.pad + j;
                    if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                    const int64_t ch = (o / og) * cg + c;
                    const double v = double(pw[((o * cg + c) * s.k + i) * s.k + j]) *
                                     double(px[((n * s.c + ch) * s.h + iy) * s.w + ix]);
                    want += v;
                    mag += std::abs(v);
                }
        const double got = py[((n * s.o + o) * oh + oy) * ow + ox];
        if (std::abs(got - want) > tol * mag + 1e-6)
            EMBER_FAIL("bench conv: ", s.name, " is wrong at [", n, ", ", o, ", ", oy, ", ", ox,
                       "]: got ", got, ", expected ", want);
    }
}

// Checks sampled elements of grad_input and grad_weight of conv2d_backward(dy,
// x, w) (stride s.stride, padding s.pad, s.groups groups) against f64 sums by definition.
void validate_backward(const Tensor& dx, const Tensor& dw, const Tensor& dy, const Tensor& x,
                       const Tensor& w, const ConvShape& s, double tol = kF32Tol) {
    const int64_t oh = dy.size(2), ow = dy.size(3), k = s.k;
    const int64_t cg = s.c / s.groups, og = s.o / s.groups;
    const float *py = dy.data<float>(), *px = x.data<float>(), *pw = w.data<float>();
    auto check = [&](const char* what, double got, double want, double mag) {
        if (std::abs(got - want) > tol * mag + 1e-6)
            EMBER_FAIL("bench conv: ", what, " of ", s.name, " is wrong: got ", got, ", expected ",
                       want);
    };
    for (int t = 0; t < 16; ++t) {
        // d x[n, c, y, xx] = Σ_{o of c's group, i, j} dy[n, o, oy, ox] · w[o, c mod cg, i, j]
        // over the outputs (oy, ox) whose tap (i, j) reads (y, xx).
        const int64_t n = (t * 7) % s.n, c = (t * 13 + 1) % s.c, y = (t * 5 + 2) % s.h,
                      xx = (t * 11) % s.w;
        double want = 0, mag = 0;
        for (int64_t o = c / cg * og; o < (c / cg + 1) * og; ++o)
            for (int64_t i = 0; i < k; ++i)
                for (int64_t j = 0; j < k; ++j) {
                    // Outputs whose tap (i, j) lands on (y, xx): oy·stride − pad + i = y.
                    const int64_t ry = y + s.pad - i, rx = xx + s.pad - j;
                    if (ry < 0 || rx < 0 || ry % s.stride || rx % s.stride) continue;
                    const int64_t oy = ry / s.stride, ox = rx / s.stride;
                    if (oy >= oh || ox >= ow) continue;
                    const double v = double(py[((n * s.o + o) * oh + oy) * ow + ox]) *
                                     double(pw[((o * cg + c % cg) * k + i) * k + j]);
                    want += v;
                    mag += std::abs(v);
                }
        check("grad_input", dx.data<float>()[((n * s.c + c) * s.h + y) * s.w + xx], want, mag);
        // d w[o, c, i, j] = Σ_{n, oy, ox} dy[n, o, oy, ox] · x[n, o's group·cg + c,
        // oy·stride − pad + i, ox·stride − pad + j].
        const int64_t o = (t * 3 + 5) % s.o, i = t % k, j = (t / k) % k, cw = (t * 5) % cg;
        const int64_t cin = o / og * cg + cw;
        want = mag = 0;
        for (int64_t m = 0; m < s.n; ++m)
            for (int64_t oy = 0; oy < oh; ++oy)
                for (int64_t ox = 0; ox < ow; ++ox) {
                    const int64_t iy = oy * s.stride - s.pad + i, ix = ox * s.stride - s.pad + j;
                    if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                    const double v = double(py[((m * s.o + o) * oh + oy) * ow + ox]) *
                                     double(px[((m * s.c + cin) * s.h + iy) * s.w + ix]);
                    want += v;
                    mag += std::abs(v);
                }
        check("grad_weight", dw.data<float>()[((o * cg + cw) * k + i) * k + j], want, mag);
    }
}

// What a row is judged against: the same-run GEMM rate, or for a depthwise
// conv (kH·kW multiply-adds per element moved: memory-bound) the copy rate.
struct Limits {
    double matmul = 0, copy = 0, bf16 = 0;  // GFLOP/s, GB/s, GFLOP/s
    std::string matmul_label, copy_label, bf16_label;
};

bool depthwise(const ConvShape& s) { return s.groups > 1 && s.groups == s.c; }

// A row of `flop` FLOPs moving `floats` f32 values in `ms`.
Row conv_row(const std::string& kernel, const std::string& shape, const Timing& ms, double flop,
             double floats, const ConvShape& s, const Limits& lim) {
    const double gflops = flop / (ms * 1e6), gbps = floats * 4 / (ms * 1e6);
    Row r = depthwise(s)
                ? Row{"conv", kernel, shape, ms, gbps, gflops, gbps / lim.copy, lim.copy_label}
                : Row{"conv", kernel, shape, ms, -1, gflops, gflops / lim.matmul, lim.matmul_label};
    r.spread = ms.spread;
    return r;
}

// Rows for conv2d_backward's grad_input and grad_weight, each asked for alone;
// with channels_last, also each on channels-last operands.
void run_backward(const ConvShape& s, const Limits& lim, const Options& o, Report& rep,
                  bool channels_last = false) {
    const int64_t oh = out_size(s, s.h), ow = out_size(s, s.w);
    const Tensor x = rand({s.n, s.c, s.h, s.w}), w = rand({s.o, s.c / s.groups, s.k, s.k});
    const Tensor dy = rand({s.n, s.o, oh, ow});
    const Tensor xl = x.contiguous(MemoryFormat::channels_last),
                 dyl = dy.contiguous(MemoryFormat::channels_last);
    auto grads = [&](bool input, bool weight, bool last = false) {
        return kernels::conv2d_backward(last ? dyl : dy, last ? xl : x, w, {s.stride, s.stride},
                                        {s.pad, s.pad}, {1, 1}, s.groups, {input, weight, false});
    };
    validate_backward(grads(true, false).input, grads(false, true).weight, dy, x, w, s);
    if (channels_last)
        validate_backward(grads(true, false, true).input.contiguous(),
                          grads(false, true, true).weight, dy, x, w, s);
    const double flop = 2.0 * double(s.n * s.o * oh * ow) * double(s.c / s.groups * s.k * s.k);
    // Both passes read grad_out and one of input / weight, and write the other.
    const double floats = double(s.n * s.o * oh * ow + s.n * s.c * s.h * s.w);
    std::vector<std::function<void()>> timed = {[&] { (void)grads(true, false); },
                                                [&] { (void)grads(false, true); }};
    if (channels_last) {
        timed.push_back([&] { (void)grads(true, false, true); });
        timed.push_back([&] { (void)grads(false, true, true); });
    }
    const std::vector<Timing> t = interleaved_median_ms(timed, o);
    const char* what[] = {"conv2d_backward input ", "conv2d_backward weight ",
                          "  channels_last input ", "  channels_last weight "};
    for (size_t i = 0; i < t.size(); ++i)
        rep.add(conv_row(std::string(what[i]) + s.name, shape_str({s.n, s.c, s.h, s.w}), t[i], flop,
                         floats, s, lim));
}

// Rows for conv2d's forward: the front (a fresh output) and the CPU kernel
// writing into a reused buffer; with channels_last, also the front on a
// channels-last input (its result channels-last too).
void run_forward(const ConvShape& s, const Limits& lim, const Options& o, Report& rep,
                 bool channels_last = false) {
    const Tensor x = rand({s.n, s.c, s.h, s.w}), w = rand({s.o, s.c / s.groups, s.k, s.k});
    const Tensor bias = rand({s.o});
    auto run = [&] {
        return kernels::conv2d(x, w, bias, {s.stride, s.stride}, {s.pad, s.pad}, {1, 1}, s.groups);
    };
    validate(run(), x, w, bias, s);
    const int64_t oh = out_size(s, s.h), ow = out_size(s, s.w);
    const double flop = 2.0 * double(s.n * s.o * oh * ow) * double(s.c / s.groups * s.k * s.k);
    Tensor y = empty({s.n, s.o, oh, ow});
    const kernels::Conv2dShape cs{.n = s.n,
                                  .c = s.c,
                                  .h = s.h,
                                  .w = s.w,
                                  .o = s.o,
                                  .kh = s.k,
                                  .kw = s.k,
                                  .sh = s.stride,
                                  .sw = s.stride,
                                  .ph = s.pad,
                                  .pw = s.pad,
                                  .dh = 1,
                                  .dw = 1,
                                  .groups = s.groups,
                                  .oh = oh,
                                  .ow = ow};
    auto kernel = [&] {
        kernels::cpu::conv2d(cs, DType::f32, x.data_ptr(), w.data_ptr(), bias.data_ptr(),
                             y.data_ptr());
    };
    kernel();
    validate(y, x, w, bias, s);
    const Tensor xl = x.contiguous(MemoryFormat::channels_last);
    auto run_last = [&] {
        return kernels::conv2d(xl, w, bias, {s.stride, s.stride}, {s.pad, s.pad}, {1, 1}, s.groups);
    };
    if (channels_last) validate(run_last().contiguous(), x, w, bias, s);
    std::vector<std::function<void()>> timed = {[&] { (void)run(); }, kernel};
    if (channels_last) timed.push_back([&] { (void)run_last(); });
    const std::vector<Timing> t = interleaved_median_ms(timed, o);
    const Timing ms = t[0], kms = t[1];
    const double floats = double(s.n * s.c * s.h * s.w + s.n * s.o * oh * ow);
    rep.add(conv_row(std::string("conv2d ") + s.name, shape_str({s.n, s.c, s.h, s.w}), ms, flop,
                     floats, s, lim));
    rep.add(conv_row("  cpu kernel, reused out", shape_str({s.n, s.o, oh, ow}), kms, flop, floats,
                     s, lim));
    if (channels_last)
        rep.add(conv_row(std::string("  channels_last forward ") + s.name,
                         shape_str({s.n, s.c, s.h, s.w}), t[2], flop, floats, s, lim));
}

// bf16 rows of a conv on channels-last operands (what resnet8 runs under
// --amp bf16): forward, grad_input and grad_weight, each checked at sampled
// elements first, against the bf16 limit.
void run_bf16(const ConvShape& s, const Limits& lim, const Options& o, Report& rep) {
    const int64_t oh = out_size(s, s.h), ow = out_size(s, s.w);
    const Tensor x = rand({s.n, s.c, s.h, s.w}).to(DType::bf16),
                 w = rand({s.o, s.c, s.k, s.k}).to(DType::bf16), b = rand({s.o}).to(DType::bf16),
                 dy = rand({s.n, s.o, oh, ow}).to(DType::bf16);
    const Tensor xl = x.contiguous(MemoryFormat::channels_last),
                 dyl = dy.contiguous(MemoryFormat::channels_last);
    const Int2 stride{s.stride, s.stride}, pad{s.pad, s.pad};
    auto forward = [&] { return kernels::conv2d(xl, w, b, stride, pad); };
    auto grads = [&](bool input, bool weight) {
        return kernels::conv2d_backward(dyl, xl, w, stride, pad, {1, 1}, 1,
                                        {input, weight, false});
    };
    auto f32 = [](const Tensor& t) { return t.to(DType::f32).contiguous(); };
    validate(f32(forward()), f32(x), f32(w), f32(b), s, kBf16Tol);
    validate_backward(f32(grads(true, false).input), f32(grads(false, true).weight), f32(dy),
                      f32(x), f32(w), s, kBf16Tol);
    const std::vector<Timing> t = interleaved_median_ms(
        {[&] { (void)forward(); }, [&] { (void)grads(true, false); },
         [&] { (void)grads(false, true); }},
        o);
    const double flop = 2.0 * double(s.n * s.o * oh * ow) * double(s.c * s.k * s.k);
    const char* what[] = {"  bf16 channels_last forward ", "  bf16 channels_last input ",
                          "  bf16 channels_last weight "};
    for (size_t i = 0; i < t.size(); ++i) {
        Row r{"conv", std::string(what[i]) + s.name, shape_str({s.n, s.c, s.h, s.w}), t[i], -1,
              flop / (t[i] * 1e6), flop / (t[i] * 1e6) / lim.bf16, lim.bf16_label};
        r.spread = t[i].spread;
        rep.add(r);
    }
}

}  // namespace

void run_conv(const Options& o, Report& rep) {
    // The limit: ember's f32 GEMM at 1024³ (512³ when quick), now.
    const int64_t side = o.quick ? 512 : 1024;
    const Tensor a = rand({side, side}), b = rand({side, side});
    const Timing mm_ms = median_ms([&] { (void)kernels::matmul(a, b); }, o.warmup, o.repeats);
    const double mm = 2.0 * double(side) * double(side) * double(side) / (mm_ms * 1e6);
    Limits lim{.matmul = mm, .matmul_label = limit_label("matmul", mm, "GFLOP/s")};
    rep.add({"conv", "matmul f32 (limit)", shape_str({side, side, side}), mm_ms, -1, mm, 1.0,
             lim.matmul_label}, mm_ms);
    lim.copy = measure_copy_gbps(o);
    lim.copy_label = limit_label("copy", lim.copy, "GB/s");

    const int64_t n = o.quick ? 2 : 32;
    const ConvShape shapes[] = {
        {"3x3 64->64", n, 64, 56, 56, 64, 3, 1, 1, 1},
        {"3x3 s2 16->32", n, 16, 32, 32, 32, 3, 2, 1, 1},
        {"1x1 64->256", n, 64, 56, 56, 256, 1, 1, 0, 1},
        {"1x1 256->64", n, 256, 56, 56, 64, 1, 1, 0, 1},
        {"1x1 s2 128->256", n, 128, 28, 28, 256, 1, 2, 0, 1},
        {"3x3 depthwise 64", n, 64, 56, 56, 64, 3, 1, 1, 64},
    };
    for (const ConvShape& s : shapes) run_forward(s, lim, o, rep);
    for (const ConvShape& s : shapes)
        if (&s == &shapes[0] || depthwise(s)) run_backward(s, lim, o, rep);
    // resnet8's convolutions at its training batch: every pass, one row each.
    const int64_t rn = o.quick ? 2 : 128;
    const ConvShape resnet8[] = {
        {"resnet8 3x3 16->16", rn, 16, 28, 28, 16, 3, 1, 1, 1},
        {"resnet8 3x3 s2 16->32", rn, 16, 28, 28, 32, 3, 2, 1, 1},
        {"resnet8 3x3 32->32", rn, 32, 14, 14, 32, 3, 1, 1, 1},
        {"resnet8 3x3 s2 32->64", rn, 32, 14, 14, 64, 3, 2, 1, 1},
        {"resnet8 3x3 64->64", rn, 64, 7, 7, 64, 3, 1, 1, 1},
        {"resnet8 1x1 s2 16->32", rn, 16, 28, 28, 32, 1, 2, 0, 1},
        {"resnet8 1x1 s2 32->64", rn, 32, 14, 14, 64, 1, 2, 0, 1},
    };
    for (const ConvShape& s : resnet8) {
        run_forward(s, lim, o, rep, true);
        run_backward(s, lim, o, rep, true);
    }
    // The same in bf16, against the bf16 peak measured now (the f32 GEMM
    // where the CPU emulates bf16: no faster than f32).
    if (cpu_bf16_native()) {
        const Tensor values = randn({64, 64}).to(DType::bf16);
        const int64_t iterations = o.quick ? 500 : 10000;
        double flop = 0;
        const Timing peak_ms =
            median_ms([&] {
                flop = bf16_peak_flop(reinterpret_cast<const uint16_t*>(values.data<BFloat16>()),
                                      values.numel(), iterations);
            },
                      o.warmup, o.repeats);
        lim.bf16 = flop / (peak_ms * 1e6);
        lim.bf16_label = limit_label("bf16 peak", lim.bf16, "GFLOP/s");
        rep.add({"conv", "bf16 tile peak (limit)", "-", peak_ms, -1, lim.bf16, 1.0,
                 lim.bf16_label},
                peak_ms);
    } else {
        lim.bf16 = lim.matmul;
        lim.bf16_label = lim.matmul_label + " (bf16 emulated)";
    }
    for (const ConvShape& s : resnet8)
        if (kernels::cpu::conv2d_channels_last_fits(
                {s.n, s.c, s.h, s.w, s.o, s.k, s.k, s.stride, s.stride, s.pad, s.pad, 1, 1, 1,
                 out_size(s, s.h), out_size(s, s.w)},
                DType::bf16))
            run_bf16(s, lim, o, rep);
    if (const auto gpu = bench_gpu()) run_conv_gpu(*gpu, o, rep);
}

}  // namespace ember::bench

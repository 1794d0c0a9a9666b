// conv family: conv2d forward (im2col + GEMM) on ResNet-like f32 shapes.
// FLOPs 2·N·O·OH·OW·(C/groups)·kH·kW; the limit is the 1024³ f32 matmul
// rate measured in the same run (the GEMM the convolution reduces to). Each
// shape has two rows: the front (which allocates a fresh output, page faults
// included) and the CPU kernel writing into a reused buffer.
#include "kernels/conv.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "bench/bench.h"
#include "ember.h"
#include "kernels/cpu/conv.h"
#include "kernels/matmul.h"

namespace ember::bench {

namespace {

struct ConvShape {
    const char* name;
    int64_t n, c, h, w, o, k, stride, pad, groups;
};

int64_t out_size(const ConvShape& s, int64_t in) { return (in + 2 * s.pad - s.k) / s.stride + 1; }

// Checks sampled outputs of y = conv2d(x, w, b) against f64 sums.
void validate(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
              const ConvShape& s) {
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
        if (std::abs(got - want) > 1e-5 * mag + 1e-6)
            EMBER_FAIL("bench conv: ", s.name, " is wrong at [", n, ", ", o, ", ", oy, ", ", ox,
                       "]: got ", got, ", expected ", want);
    }
}

}  // namespace

void run_conv(const Options& o, Report& rep) {
    // The limit: ember's f32 GEMM at 1024³ (512³ when quick), now.
    const int64_t side = o.quick ? 512 : 1024;
    const Tensor a = rand({side, side}), b = rand({side, side});
    const double mm_ms = median_ms([&] { (void)kernels::matmul(a, b); }, o.warmup, o.repeats);
    const double mm = 2.0 * double(side) * double(side) * double(side) / (mm_ms * 1e6);
    const std::string lim = limit_label("matmul", mm, "GFLOP/s");
    rep.add({"conv", "matmul f32 (limit)", shape_str({side, side, side}), mm_ms, -1, mm, 1.0, lim});

    const int64_t n = o.quick ? 2 : 32;
    const ConvShape shapes[] = {
        {"3x3 64->64", n, 64, 56, 56, 64, 3, 1, 1, 1},
        {"3x3 s2 16->32", n, 16, 32, 32, 32, 3, 2, 1, 1},
        {"1x1 64->256", n, 64, 56, 56, 256, 1, 1, 0, 1},
        {"1x1 256->64", n, 256, 56, 56, 64, 1, 1, 0, 1},
        {"1x1 s2 128->256", n, 128, 28, 28, 256, 1, 2, 0, 1},
        {"3x3 depthwise 64", n, 64, 56, 56, 64, 3, 1, 1, 64},
    };
    for (const ConvShape& s : shapes) {
        const Tensor x = rand({s.n, s.c, s.h, s.w}), w = rand({s.o, s.c / s.groups, s.k, s.k});
        const Tensor bias = rand({s.o});
        auto run = [&] {
            return kernels::conv2d(x, w, bias, {s.stride, s.stride}, {s.pad, s.pad}, {1, 1},
                                   s.groups);
        };
        validate(run(), x, w, bias, s);
        const int64_t oh = out_size(s, s.h), ow = out_size(s, s.w);
        const double flop = 2.0 * double(s.n * s.o * oh * ow) * double(s.c / s.groups * s.k * s.k);
        Tensor y = empty({s.n, s.o, oh, ow});
        const kernels::cpu::Conv2dShape cs{.n = s.n,
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
        const std::vector<double> t = interleaved_median_ms({[&] { (void)run(); }, kernel}, o);
        const double ms = t[0], kms = t[1];
        rep.add({"conv", std::string("conv2d ") + s.name, shape_str({s.n, s.c, s.h, s.w}), ms, -1,
                 flop / (ms * 1e6), flop / (ms * 1e6) / mm, lim});
        rep.add({"conv", "  cpu kernel, reused out", shape_str({s.n, s.o, oh, ow}), kms, -1,
                 flop / (kms * 1e6), flop / (kms * 1e6) / mm, lim});
    }
}

}  // namespace ember::bench

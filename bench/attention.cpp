// attention family: scaled dot-product attention on the CPU, forward and
// backward, the fused kernel (kernels/cpu/attention.cpp) beside the
// composite path (batched GEMMs and softmax pieces, kernels/attention_composite.cpp)
// on the same inputs, at the default gpt's shape ([16, 4, 256, 32], causal)
// and at T = 1024 and 4096. Each shape is checked first: the two paths' out,
// lse and gradients agree. FLOPs: 2·B·H·pairs·(D + Dv) forward (pairs: the
// (row, key) pairs the causal mask keeps), 2.5× that backward; the limit is
// ember's f32 GEMM at 1024³ measured in the same run. Each row's note gives
// the call's peak of tensor memory: O(T·D) fused, O(T²) composite. With a
// GPU, also bench/attention_gpu.cpp's rows (only those: --device cuda).
#include <cmath>
#include <cstdio>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"

namespace ember::bench {

namespace {

struct Shape4 {
    int64_t b, h, t, d;
    bool causal;
};

double pairs(const Shape4& s) {
    return s.causal ? double(s.t) * double(s.t + 1) / 2 : double(s.t) * double(s.t);
}

// Peak bytes of tensor memory one call of f holds beyond what exists before it.
size_t peak_bytes(const std::function<void()>& f) {
    reset_peak_memory_stats();
    const size_t before = memory_stats().allocated_bytes;
    f();
    return memory_stats().peak_allocated_bytes - before;
}

// The largest |a − b| / (1 + |b|) over the elements.
double worst(const Tensor& a, const Tensor& b) {
    const std::vector<double> x = a.contiguous().to_vector<double>(),
                              y = b.contiguous().to_vector<double>();
    double w = 0;
    for (size_t i = 0; i < x.size(); ++i) w = std::max(w, std::abs(x[i] - y[i]) / (1 + std::abs(y[i])));
    return w;
}

}  // namespace

void run_attention(const Options& o, Report& rep) {
    if (o.device == "cuda") {  // the GPU rows only
        const auto gpu = bench_gpu();
        if (!gpu) EMBER_FAIL("bench attention --device cuda: no CUDA device");
        return run_attention_gpu(*gpu, o, rep);
    }
    const int64_t side = o.quick ? 256 : 1024;
    const Tensor ga = randn({side, side}), gb = randn({side, side});
    const double peak =
        2.0 * double(side * side * side) / median_ms([&] { (void)kernels::matmul(ga, gb); },
                                                     o.warmup, o.repeats) / 1e6;
    const std::string limit = limit_label("GEMM", peak, "GFLOP/s");
    const std::vector<Shape4> shapes =
        o.quick ? std::vector<Shape4>{{2, 2, 64, 32, true}, {1, 2, 256, 64, true}}
                : std::vector<Shape4>{{16, 4, 256, 32, true}, {4, 4, 1024, 64, true},
                                      {1, 4, 4096, 64, true}, {4, 4, 1024, 64, false}};
    for (const Shape4& s : shapes) {
        manual_seed(7);
        const Tensor q = randn({s.b, s.h, s.t, s.d}), k = randn({s.b, s.h, s.t, s.d}),
                     v = randn({s.b, s.h, s.t, s.d}), g = randn({s.b, s.h, s.t, s.d});
        kernels::AttentionArgs args;
        args.causal = s.causal;
        args.scale = 1.0 / std::sqrt(double(s.d));
        // Checked first: the two paths agree.
        const kernels::AttentionForward f = kernels::attention_forward(q, k, v, args);
        const kernels::AttentionForward c = kernels::attention_forward_composite(q, k, v, args);
        const kernels::AttentionGrads df = kernels::attention_backward(g, q, k, v, f.out, f.lse, args);
        const kernels::AttentionGrads dc =
            kernels::attention_backward_composite(g, q, k, v, c.out, c.lse, args);
        const double err = std::max({worst(f.out, c.out), worst(f.lse, c.lse), worst(df.q, dc.q),
                                     worst(df.k, dc.k), worst(df.v, dc.v)});
        if (!(err < 1e-3))
            EMBER_FAIL("bench attention: the fused and composite paths differ by ", err, " at [",
                       s.b, ", ", s.h, ", ", s.t, ", ", s.d, "]");
        char shape[96];
        std::snprintf(shape, sizeof shape, "[%lld, %lld, %lld, %lld]%s", (long long)s.b,
                      (long long)s.h, (long long)s.t, (long long)s.d, s.causal ? " causal" : "");
        const double fwd_flops = 2.0 * double(s.b * s.h) * pairs(s) * double(2 * s.d);
        struct Pass {
            const char* name;
            std::function<void()> run;
            double flops;
        };
        const Pass passes[] = {
            {"fused forward", [&] { (void)kernels::attention_forward(q, k, v, args); }, fwd_flops},
            {"composite forward", [&] { (void)kernels::attention_forward_composite(q, k, v, args); },
             fwd_flops},
            {"fused backward",
             [&] { (void)kernels::attention_backward(g, q, k, v, f.out, f.lse, args); },
             2.5 * fwd_flops},
            {"composite backward",
             [&] { (void)kernels::attention_backward_composite(g, q, k, v, c.out, c.lse, args); },
             2.5 * fwd_flops},
        };
        for (int i = 0; i < 4; i += 2) {  // fused and composite timed in turn
            const std::vector<Timing> ms =
                interleaved_median_ms({passes[i].run, passes[i + 1].run}, o);
            for (int j = 0; j < 2; ++j) {
                const Pass& p = passes[i + j];
                const double gflops = p.flops / ms[size_t(j)] / 1e6;
                char note[96];
                std::snprintf(note, sizeof note, "peak %.1f MB", double(peak_bytes(p.run)) / 1e6);
                rep.add({"attention", p.name, shape, ms[size_t(j)], -1, gflops, gflops / peak,
                         limit, note}, ms[size_t(j)]);
            }
        }
    }
    if (const auto gpu = bench_gpu()) run_attention_gpu(*gpu, o, rep);
}

}  // namespace ember::bench

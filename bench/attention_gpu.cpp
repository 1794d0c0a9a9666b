// attention family on a GPU: the fused CUDA kernels (kernels/cuda/attention*.cu)
// at B·H = 16·16, T in {512, ..., 8192}, D in {64, 128}, causal and not,
// bf16: forward and backward TFLOP/s against the bf16 GEMM rate measured
// first in the same run (8192³; the tensor cores' practical peak). FLOPs
// count the visible (row, key) pairs: forward 4·B·H·pairs·D, backward 2.5×
// that (the convention FlashAttention's papers and PyTorch report in; the
// kernels do 3.5×, recomputing S and dP for dQ). Decode rows: one query row
// per head against a cache of T keys, GB/s of K and V against the device
// copy. Each shape is checked first at T = 512 against the composite path.
// tools/device/torch_peer.py times F.scaled_dot_product_attention (its flash
// backend) on the same rows.
#include <cmath>
#include <cstdio>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"

namespace ember::bench {

namespace {

std::string shape4(int64_t b, int64_t h, int64_t t, int64_t d, bool causal) {
    char s[96];
    std::snprintf(s, sizeof s, "[%lld, %lld, %lld, %lld]%s", (long long)b, (long long)h,
                  (long long)t, (long long)d, causal ? " causal" : "");
    return s;
}

double worst(const Tensor& a, const Tensor& b) {
    const std::vector<double> x = a.to(Device::cpu()).contiguous().to_vector<double>(),
                              y = b.to(Device::cpu()).contiguous().to_vector<double>();
    double w = 0, m = 1e-30;
    for (double v : y) m = std::max(m, std::abs(v));
    for (size_t i = 0; i < x.size(); ++i) w = std::max(w, std::abs(x[i] - y[i]));
    return w / m;
}

// The fused and composite paths agree at this shape (T = 512, B·H = 2·2).
void check_shape(Device gpu, int64_t d, bool causal) {
    manual_seed(11);
    const TensorOptions on{DType::bf16, gpu};
    const Tensor q = randn({2, 2, 512, d}, on), k = randn({2, 2, 512, d}, on),
                 v = randn({2, 2, 512, d}, on), g = randn({2, 2, 512, d}, on);
    kernels::AttentionArgs a;
    a.causal = causal;
    a.scale = 1.0 / std::sqrt(double(d));
    const kernels::AttentionForward f = kernels::attention_forward(q, k, v, a);
    const kernels::AttentionForward c = kernels::attention_forward_composite(q, k, v, a);
    const kernels::AttentionGrads df = kernels::attention_backward(g, q, k, v, f.out, f.lse, a);
    const kernels::AttentionGrads dc = kernels::attention_backward_composite(g, q, k, v, c.out, c.lse, a);
    const double err = std::max({worst(f.out, c.out), worst(f.lse, c.lse), worst(df.q, dc.q),
                                 worst(df.k, dc.k), worst(df.v, dc.v)});
    if (!(err < 3e-2))
        EMBER_FAIL("bench attention: the fused CUDA kernels and the composite path differ by ",
                   err, " (relative to the largest entry) at D = ", d, causal ? ", causal" : "");
}

}  // namespace

void run_attention_gpu(Device gpu, const Options& o, Report& rep) {
    // The limit: a dense bf16 GEMM.
    const int64_t side = o.quick ? 1024 : 8192;
    const Tensor ga = randn({side, side}, {DType::bf16, gpu}), gb = randn({side, side}, {DType::bf16, gpu});
    const double peak = 2.0 * std::pow(double(side), 3) /
                        (double(gpu_median_ms(gpu, [&] { (void)kernels::matmul(ga, gb); }, o)) * 1e6);
    const std::string limit = limit_label("bf16 GEMM", peak, "GFLOP/s");
    const double copy = measure_gpu_copy_gbps(gpu, o);
    const std::string copy_limit = limit_label("copy", copy, "GB/s");
    const int64_t b = o.quick ? 2 : 16, h = o.quick ? 2 : 16;
    const std::vector<int64_t> lengths =
        o.quick ? std::vector<int64_t>{512} : std::vector<int64_t>{512, 1024, 2048, 4096, 8192};
    for (int64_t d : {64, 128})
        for (bool causal : {true, false}) {
            check_shape(gpu, d, causal);
            for (int64_t t : lengths) {
                manual_seed(7);
                const TensorOptions on{DType::bf16, gpu};
                const Tensor q = randn({b, h, t, d}, on), k = randn({b, h, t, d}, on),
                             v = randn({b, h, t, d}, on), g = randn({b, h, t, d}, on);
                kernels::AttentionArgs a;
                a.causal = causal;
                a.scale = 1.0 / std::sqrt(double(d));
                const kernels::AttentionForward f = kernels::attention_forward(q, k, v, a);
                const double pairs = causal ? double(t) * double(t + 1) / 2 : double(t) * double(t);
                const double flops = 4.0 * double(b * h) * pairs * double(d);
                const Timing fwd =
                    gpu_median_ms(gpu, [&] { (void)kernels::attention_forward(q, k, v, a); }, o);
                const Timing bwd = gpu_median_ms(
                    gpu, [&] { (void)kernels::attention_backward(g, q, k, v, f.out, f.lse, a); }, o);
                for (const auto& [name, ms, fl] :
                     {std::tuple{"attention forward bf16", fwd, flops},
                      std::tuple{"attention backward bf16", bwd, 2.5 * flops}}) {
                    const double gflops = fl / (double(ms) * 1e6);
                    Row r{"attention", name, shape4(b, h, t, d, causal), ms, -1, gflops,
                          gflops / peak, limit};
                    r.device = "cuda";
                    rep.add(r, ms);
                }
            }
        }
    // Decode: one new row per head against a cache of T keys (memory-bound).
    for (int64_t t : o.quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{1024, 8192, 65536}) {
        const TensorOptions on{DType::bf16, gpu};
        const Tensor q = randn({8, 16, 1, 128}, on), k = randn({8, 16, t, 128}, on),
                     v = randn({8, 16, t, 128}, on);
        kernels::AttentionArgs a;
        a.scale = 1.0 / std::sqrt(128.0);
        const Timing ms = gpu_median_ms(gpu, [&] { (void)kernels::attention_forward(q, k, v, a); }, o);
        const double bytes = 2.0 * double(k.numel()) * 2;
        const double gbps = bytes / (double(ms) * 1e6);
        Row r{"attention", "attention decode bf16", shape4(8, 16, t, 128, false), ms, gbps, -1,
              gbps / copy, copy_limit};
        r.device = "cuda";
        rep.add(r, ms);
    }
}

}  // namespace ember::bench

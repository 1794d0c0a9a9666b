// GPU rows of the matmul and conv families (cuBLAS and cuDNN through ember's
// fronts), added by run_matmul and run_conv when a GPU is present.
//
// matmul: square GEMMs in f32 (TF32 off, as ember's default), f32 with TF32
// allowed, and bf16 (f32 accumulation), and the linear layer's cuBLASLt
// epilogues beside the same work unfused; the limit is the bf16 8192³ GEMM
// measured first in the same run (the GPU's practical bf16 peak), so every
// row reads as a fraction of it.
// conv: ResNet-50 layers at batch 64, forward and both gradients, in f32 and
// bf16, NCHW and channels-last (cuDNN's NHWC formats); the limit is the
// same-dtype 4096³ GEMM rate measured in the same run.
// Each result is checked at sampled entries against f64 sums of the operands
// as stored before it is timed. Times: CUDA events around the call, the L2
// flushed before each (gpu_median_ms).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "core/cuda_context.h"
#include "ember/ember.h"
#include "ember/kernels.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"

namespace ember::bench {

namespace {

// Relative tolerance of a sampled check: bf16 operands are exact in f32 but the
// bf16 result carries 8 bits; TF32 rounds the operands to 10.
double tolerance(DType t, bool tf32) { return t == DType::bf16 ? 1e-2 : tf32 ? 5e-3 : 1e-4; }

void check_sample(double got, double want, double mag, double tol, const std::string& what) {
    if (std::abs(got - want) > tol * mag + 1e-6)
        EMBER_FAIL("bench (cuda): ", what, " is wrong: got ", got, ", expected ", want);
}

// c = a·b at sampled entries, against f64 sums of host copies of the rows
// and columns they use.
void validate_gemm(const Tensor& c, const Tensor& a, const Tensor& b, double tol,
                   const std::string& what) {
    const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
    auto host = [](const Tensor& t) {
        return t.to(Device::cpu()).to(DType::f64).to_vector<double>();
    };
    for (int s = 0; s < 16; ++s) {
        const int64_t i = (s * 131 + 3) % m, j = (s * 71 + 5) % n;
        const std::vector<double> row = host(a.select(0, i)), col = host(b.select(1, j));
        double want = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
            const double x = row[size_t(p)] * col[size_t(p)];
            want += x;
            mag += std::abs(x);
        }
        check_sample(host(c.select(0, i).select(0, j))[0], want, mag, tol, what);
    }
}

struct GemmCase {
    const char* name;
    DType dtype;
    bool tf32;
};

// Restores TF32's switch however the rows end.
struct Tf32Scope {
    bool saved = allow_tf32();
    explicit Tf32Scope(bool on) { set_allow_tf32(on); }
    ~Tf32Scope() { set_allow_tf32(saved); }
};

Timing gemm_ms(Device gpu, const Options& o, int64_t side, const GemmCase& g, bool check) {
    const Tf32Scope tf32(g.tf32);
    const Tensor a = randn({side, side}).to(g.dtype).to(gpu);
    const Tensor b = randn({side, side}).to(g.dtype).to(gpu);
    if (check)
        validate_gemm(kernels::matmul(a, b), a, b, tolerance(g.dtype, g.tf32),
                      std::string(g.name) + " " + std::to_string(side));
    return gpu_median_ms(
        gpu, [&] { (void)kernels::matmul(a, b); }, o);
}

// |got − want| ≤ tol·max|want| over every element (host copies in f64): two
// ways of computing the same values agree.
void check_agree(const Tensor& got, const Tensor& want, double tol, const std::string& what) {
    const std::vector<double> a = got.to(Device::cpu()).to(DType::f64).to_vector<double>();
    const std::vector<double> b = want.to(Device::cpu()).to(DType::f64).to_vector<double>();
    double big = 1e-30, worst = 0;
    for (size_t i = 0; i < b.size(); ++i) big = std::max(big, std::abs(b[i]));
    for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    if (a.size() != b.size() || worst > tol * big)
        EMBER_FAIL("bench (cuda): ", what, " differs from the unfused ops by ", worst / big,
                   " of the largest value");
}

// The linear layer's rows: cuBLASLt with the bias (and ReLU) in the GEMM's
// epilogue, and the weight gradient with the bias gradient in it, each
// beside the same work unfused (the GEMM, then a separate bias pass), as a
// fraction of the bf16 limit.
void linear_rows(Device gpu, const Options& o, Report& rep, double peak, const std::string& lim) {
    struct Case {
        DType dt;
        int64_t m, k, n;
    };
    const Case cases[] = {
        {DType::bf16, o.quick ? 512 : 8192, o.quick ? 256 : 4096, o.quick ? 256 : 4096},
        {DType::f32, 128, 784, 512}};  // the mlp's first layer
    for (const Case& c : cases) {
        const Tensor x = randn({c.m, c.k}).to(c.dt).to(gpu), w = randn({c.n, c.k}).to(c.dt).to(gpu);
        const Tensor b = randn({c.n}).to(c.dt).to(gpu), g = randn({c.m, c.n}).to(c.dt).to(gpu);
        const double tol = tolerance(c.dt, false);
        const std::string dt = dtype_name(c.dt);
        check_agree(kernels::linear(x, w, b), kernels::add(kernels::matmul(x, w.t()), b), tol,
                    "linear+bias " + dt);
        check_agree(kernels::linear_relu(x, w, b), kernels::relu(kernels::linear(x, w, b)), tol,
                    "linear_relu " + dt);
        const kernels::LinearWeightGrads d = kernels::linear_weight_grad(g, x, true);
        check_agree(d.weight, kernels::matmul(g.t(), x), tol, "linear_weight_grad " + dt);
        check_agree(d.bias, kernels::sum(g, {0}), tol, "linear_weight_grad bias " + dt);
        const struct {
            std::string what;
            std::function<void()> call;
        } passes[] = {
            {"linear+bias", [&] { (void)kernels::linear(x, w, b); }},
            {"linear+bias unfused", [&] { (void)kernels::add(kernels::matmul(x, w.t()), b); }},
            {"linear_relu", [&] { (void)kernels::linear_relu(x, w, b); }},
            {"linear_weight_grad+bias", [&] { (void)kernels::linear_weight_grad(g, x, true); }},
            {"linear_weight_grad+bias unfused", [&] {
                 (void)kernels::matmul(g.t(), x);
                 (void)kernels::sum(g, {0});
             }}};
        const double flop = 2.0 * double(c.m) * double(c.n) * double(c.k);
        for (const auto& p : passes) {
            const Timing ms = gpu_median_ms(gpu, p.call, o);
            const double gflops = flop / (ms * 1e6);
            Row row{"matmul",
                    p.what + " " + dt,
                    shape_str({c.m, c.k}) + " " + shape_str({c.n, c.k}),
                    ms,
                    -1,
                    gflops,
                    gflops / peak,
                    lim};
            row.device = "cuda";
            rep.add(row, ms);
        }
    }
}

struct ConvLayer {
    const char* name;
    int64_t c, hw, o, k, stride, pad;
};

}  // namespace

void run_matmul_gpu(Device gpu, const Options& o, Report& rep) {
    const int64_t peak_side = o.quick ? 1024 : 8192;
    const GemmCase bf16{"matmul bf16", DType::bf16, false};
    const Timing peak_ms = gemm_ms(gpu, o, peak_side, bf16, true);
    const double peak_flop = 2.0 * std::pow(double(peak_side), 3);
    const double peak = peak_flop / (peak_ms * 1e6);
    const std::string lim =
        limit_label(("bf16 " + std::to_string(peak_side) + "^3").c_str(), peak, "GFLOP/s");
    Row r{"matmul",
          "matmul bf16 (limit)",
          shape_str({peak_side, peak_side, peak_side}),
          peak_ms,
          -1,
          peak,
          1.0,
          lim};
    r.device = "cuda";
    rep.add(r, peak_ms);
    const GemmCase cases[] = {{"matmul f32", DType::f32, false},
                              {"matmul f32, TF32", DType::f32, true},
                              {"matmul bf16", DType::bf16, false}};
    for (int64_t side : {o.quick ? int64_t(512) : int64_t(4096), peak_side})
        for (const GemmCase& g : cases) {
            if (side == peak_side && g.dtype == DType::bf16) continue;  // the limit row
            const Timing ms = gemm_ms(gpu, o, side, g, true);
            const double gflops = 2.0 * std::pow(double(side), 3) / (ms * 1e6);
            Row row{"matmul",      g.name, shape_str({side, side, side}), ms, -1, gflops,
                    gflops / peak, lim};
            row.device = "cuda";
            rep.add(row, ms);
        }
    linear_rows(gpu, o, rep, peak, lim);
}

void run_conv_gpu(Device gpu, const Options& o, Report& rep) {
    const int64_t n = o.quick ? 4 : 64;
    // ResNet-50's stages (3×3 at each width, a 1×1 bottleneck, a strided 3×3).
    const ConvLayer layers[] = {{"3x3 64->64", 64, 56, 64, 3, 1, 1},
                                {"1x1 256->64", 256, 56, 64, 1, 1, 0},
                                {"3x3 s2 128->128", 128, 56, 128, 3, 2, 1},
                                {"3x3 256->256", 256, 14, 256, 3, 1, 1}};
    for (DType dt : {DType::f32, DType::bf16}) {
        const GemmCase g{"gemm", dt, false};
        const double gemm = 2.0 * std::pow(4096.0, 3) / (gemm_ms(gpu, o, 4096, g, false) * 1e6);
        const std::string lim =
            limit_label((std::string(dtype_name(dt)) + " GEMM").c_str(), gemm, "GFLOP/s");
        for (const ConvLayer& l : layers)
            for (MemoryFormat f : {MemoryFormat::contiguous, MemoryFormat::channels_last}) {
                const Tensor x = randn({n, l.c, l.hw, l.hw}).to(dt).to(gpu).contiguous(f);
                const Tensor w = randn({l.o, l.c, l.k, l.k}).to(dt).to(gpu);
                const Int2 st{l.stride, l.stride}, pd{l.pad, l.pad};
                const Tensor y = kernels::conv2d(x, w, {}, st, pd);
                const Tensor dy = randn(y.shape()).to(dt).to(gpu).contiguous(f);
                // One sampled output against f64 sums over one image's host copy
                // (the others: tests/cuda/test_cuda_conv.cpp).
                {
                    const int64_t img = 1 % n, oo = l.o / 3, oy = y.size(2) / 2, ox = y.size(3) / 3;
                    const Tensor xc = x.select(0, img).to(Device::cpu()).to(DType::f64);
                    const Tensor wc = w.select(0, oo).to(Device::cpu()).to(DType::f64);
                    double want = 0, mag = 0;
                    for (int64_t c = 0; c < l.c; ++c)
                        for (int64_t i = 0; i < l.k; ++i)
                            for (int64_t j = 0; j < l.k; ++j) {
                                const int64_t iy = oy * l.stride - l.pad + i,
                                              ix = ox * l.stride - l.pad + j;
                                if (iy < 0 || iy >= l.hw || ix < 0 || ix >= l.hw) continue;
                                const double t = xc.at({c, iy, ix}) * wc.at({c, i, j});
                                want += t;
                                mag += std::abs(t);
                            }
                    const Tensor got = y.select(0, img).select(0, oo).to(Device::cpu());
                    check_sample(got.at({oy, ox}), want, mag, tolerance(dt, false),
                                 std::string("conv2d ") + l.name);
                }
                const double flop =
                    2.0 * double(n * l.o * y.size(2) * y.size(3)) * double(l.c * l.k * l.k);
                const std::string layout =
                    f == MemoryFormat::channels_last ? ", channels_last" : "";
                const std::string shape = shape_str({n, l.c, l.hw, l.hw});
                auto grads = [&](bool input, bool weight) {
                    return kernels::conv2d_backward(dy, x, w, st, pd, {1, 1}, 1,
                                                    {input, weight, false});
                };
                const struct {
                    const char* what;
                    std::function<void()> call;
                } passes[] = {{"conv2d ", [&] { (void)kernels::conv2d(x, w, {}, st, pd); }},
                              {"conv2d_backward input ", [&] { (void)grads(true, false); }},
                              {"conv2d_backward weight ", [&] { (void)grads(false, true); }}};
                for (const auto& p : passes) {
                    p.call();  // cuDNN's tuning (benchmark mode) happens once, untimed
                    const Timing ms = gpu_median_ms(gpu, p.call, o);
                    const double gflops = flop / (ms * 1e6);
                    Row row{"conv",
                            std::string(p.what) + l.name + " " + dtype_name(dt) + layout,
                            shape,
                            ms,
                            -1,
                            gflops,
                            gflops / gemm,
                            lim};
                    row.device = "cuda";
                    rep.add(row, ms);
                }
            }
    }
}

}  // namespace ember::bench

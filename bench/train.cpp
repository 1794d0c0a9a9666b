// train family: one training step (forward, backward, plain SGD update:
// optim::SGD at lr 0.01, one fused pass over the parameters) of
// the reference models on CPU (mlp, resnet8 in both layouts, gpt), beside
// the same step's matmuls/convolutions alone (kernel calls on buffers of the
// same shapes) timed in the same run.
// step / GEMMs-alone is the engine's overhead: allocation, elementwise ops,
// copies and graph bookkeeping. Target for mlp at batch 256: <= 1.3x.
// FLOPs count the GEMMs only: 2·B·in·out per linear for the forward, the
// weight gradient and (not for the first layer) the input gradient.
// --breakdown adds the step op by op (kernels/profile.h), each conv's and
// GEMM's rate against the GEMM peak measured in the same run. --amp bf16
// runs each step's forward and loss under autocast to bf16 (as `ember train
// --amp bf16`) and the GEMMs alone on bf16 buffers: rows "<model> bf16 …".
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <vector>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"
#include "kernels/conv.h"
#include "kernels/matmul.h"

namespace ember::bench {

namespace {

// The step's forward and loss under autocast to bf16 (--amp bf16).
bool bf16_steps(const Options& o) { return o.amp == "bf16"; }

// A GEMMs-alone buffer of normal values: f32, or bf16 with --amp bf16
// (what autocast gives the step's products).
Tensor buffer(const Shape& shape, const Options& o, MemoryFormat format = MemoryFormat::contiguous) {
    const Tensor t = randn(shape).contiguous(format);
    return bf16_steps(o) ? t.to(DType::bf16) : t;
}

// One step; returns the loss (validated finite by the caller). A language
// model's logits [B, T, V] are scored against tokens [B, T], row by row.
double train_step(nn::Module& model, optim::SGD& opt, const Tensor& x, const Tensor& y, bool bf16) {
    Tensor loss;
    {
        amp::autocast scope(DType::bf16, bf16);
        const Tensor out = model(x);
        loss = out.dim() == 3 ? cross_entropy(out.reshape({-1, out.size(-1)}), y.reshape({-1}))
                              : cross_entropy(out, y);
    }
    opt.zero_grad();
    loss.backward();
    opt.step();
    return loss.item();
}

// Runs a few steps first: the loss must be finite and fall on a fixed batch.
void validate(nn::Module& model, optim::SGD& opt, const Tensor& x, const Tensor& y,
              const char* name, bool bf16) {
    const double first = train_step(model, opt, x, y, bf16);
    double last = first;
    for (int i = 0; i < 4; ++i) last = train_step(model, opt, x, y, bf16);
    if (!std::isfinite(last) || !(last < first))
        EMBER_FAIL("bench train: ", name, " loss did not fall on a fixed batch: ", first, " -> ",
                   last);
}

std::string mb(size_t bytes) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f MB", double(bytes) / 1e6);
    return buf;
}

// `--breakdown`: o.repeats steps under the op profiler (kernels/profile.h),
// one row per op and signature with its time per step, slowest first; ops
// with FLOPs (convs, GEMMs) against the GEMM peak. Ops under 0.5 % of the
// step are summed into one row; what no op accounts for (autograd's
// bookkeeping, allocation, the Python-free glue) is the last row.
void report_breakdown(const char* model_name, nn::Module& model, optim::SGD& opt, const Tensor& x,
                      const Tensor& y, double peak, const Options& o, Report& report) {
    const bool bf16 = bf16_steps(o);
    train_step(model, opt, x, y, bf16);  // warm: caches, the allocator's pools
    kernels::Profiler prof;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.repeats; ++i) train_step(model, opt, x, y, bf16);
    const double step_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / o.repeats;
    const std::string prefix = std::string(model_name) + " | ";
    double small_s = 0;
    int small_n = 0;
    for (const kernels::OpTime& r : prof.rows()) {
        const double s = r.seconds / o.repeats;
        if (s < 0.005 * step_s) {
            small_s += s;
            small_n += 1;
            continue;
        }
        char note[96];
        std::snprintf(note, sizeof note, "%.1f%% of the step; %lld call(s)/step",
                      100.0 * s / step_s, static_cast<long long>(r.calls / o.repeats));
        const double gflops = r.flops > 0 ? r.flops / r.seconds / 1e9 : -1;
        report.add({"train", prefix + r.name, r.signature, s * 1e3, -1, gflops,
                    gflops > 0 ? gflops / peak : -1,
                    gflops > 0 ? limit_label("GEMM peak", peak, "GFLOP/s") : "", note});
    }
    char note[96];
    std::snprintf(note, sizeof note, "%d signature(s), each under 0.5%% of the step", small_n);
    report.add({"train", prefix + "other ops", "", small_s * 1e3, -1, -1, -1, "", note});
    const double outside = step_s - prof.total_seconds() / o.repeats;
    std::snprintf(note, sizeof note, "%.1f%% of the step: autograd, allocation, glue",
                  100.0 * outside / step_s);
    report.add({"train", prefix + "outside ops", "", outside * 1e3, -1, -1, -1, "", note});
}

// Times the step and the GEMMs; adds the two rows (named "<model> bf16 …"
// with --amp bf16).
void report_pair(const char* model_name, const std::string& shape, nn::Module& model,
                 const Tensor& x, const Tensor& y, const std::function<void()>& gemms,
                 double gemm_flops, const Options& o, Report& report) {
    const bool bf16 = bf16_steps(o);
    const std::string name = std::string(model_name) + (bf16 ? " bf16" : "");
    optim::SGD opt(model.parameters(), {.lr = 0.01});
    validate(model, opt, x, y, name.c_str(), bf16);
    opt.zero_grad();  // the step's own memory: activations, gradients, temporaries
    reset_peak_memory_stats();
    const size_t before = memory_stats().allocated_bytes;
    train_step(model, opt, x, y, bf16);
    const size_t peak = memory_stats().peak_allocated_bytes - before;

    // The same step under the profiler (kernels/profile.h), each run its own
    // trace: what --profile costs.
    const std::vector<Timing> ms = interleaved_median_ms(
        {[&] { train_step(model, opt, x, y, bf16); }, gemms,
         [&] {
             kernels::Profiler prof;
             train_step(model, opt, x, y, bf16);
         }},
        o);
    const Timing step_ms = ms[0], gemm_ms = ms[1], profiled_ms = ms[2];
    char ratio[96];
    std::snprintf(ratio, sizeof ratio, "step/GEMMs %.2fx; step peak %s over weights + data",
                  step_ms / gemm_ms, mb(peak).c_str());
    Row step{"train", name + " step", shape, step_ms, -1,
             gemm_flops / step_ms / 1e6, gemm_ms / step_ms,
             limit_label("GEMMs alone", gemm_ms, "ms"), ratio};
    step.bound = true;  // a step does its GEMMs and more: it cannot be faster
    report.add(step, step_ms);
    report.add({"train", name + " GEMMs alone", shape, gemm_ms, -1,
                gemm_flops / gemm_ms / 1e6, -1, "", ""}, gemm_ms);
    char cost[96];
    std::snprintf(cost, sizeof cost, "profiler on: %+.1f%% of the step", 100.0 * (profiled_ms / step_ms - 1));
    report.add({"train", name + " step, profiled", shape, profiled_ms, -1, -1,
                step_ms / profiled_ms, limit_label("step unprofiled", step_ms, "ms"), cost},
               profiled_ms);
    if (o.breakdown)
        report_breakdown(name.c_str(), model, opt, x, y, measure_gemm_gflops(Device::cpu(), o), o, report);
}

void run_mlp(const Options& o, Report& report) {
    const int64_t batch = o.quick ? 32 : 256;
    manual_seed(1);
    auto model = nn::mlp();
    const Tensor x = randn({batch, 784});
    const Tensor y = randint(0, 10, {batch});
    // The step's GEMMs on buffers of the same shapes.
    const std::vector<std::pair<int64_t, int64_t>> layers = {{784, 512}, {512, 256}, {256, 10}};
    std::vector<Tensor> acts, weights, grads;
    double flops = 0;
    for (size_t l = 0; l < layers.size(); ++l) {
        auto [in, out] = layers[l];
        acts.push_back(buffer({batch, in}, o));
        weights.push_back(buffer({out, in}, o));
        grads.push_back(buffer({batch, out}, o));
        flops += 2.0 * double(batch * in * out) * (l == 0 ? 2 : 3);
    }
    auto gemms = [&] {
        for (size_t l = 0; l < layers.size(); ++l) {
            kernels::matmul(acts[l], weights[l].t());          // forward
            kernels::matmul(grads[l].t(), acts[l]);            // weight gradient
            if (l > 0) kernels::matmul(grads[l], weights[l]);  // input gradient
        }
    };
    report_pair("mlp", "batch " + std::to_string(batch), *model, x, y, gemms, flops, o, report);
}

struct ConvCall {
    int64_t c, o, h, k, stride, pad;  // input [N, c, h, h], kernel k×k
};

// resnet8's step; with channels_last, on a channels-last batch (every
// activation and activation gradient then channels-last).
void run_resnet8(const Options& o, Report& report, bool channels_last) {
    const int64_t batch = o.quick ? 8 : 128;
    const MemoryFormat format =
        channels_last ? MemoryFormat::channels_last : MemoryFormat::contiguous;
    manual_seed(2);
    nn::ResNet8 model;
    const Tensor x = randn({batch, 1, 28, 28}).contiguous(format);
    const Tensor y = randint(0, 10, {batch});
    // resnet8's convolutions (nn/models.cpp): stem, three blocks, two 1×1 shortcuts.
    const std::vector<ConvCall> convs = {
        {1, 16, 28, 3, 1, 1},  {16, 16, 28, 3, 1, 1}, {16, 16, 28, 3, 1, 1},
        {16, 32, 28, 3, 2, 1}, {32, 32, 14, 3, 1, 1}, {16, 32, 28, 1, 2, 0},
        {32, 64, 14, 3, 2, 1}, {64, 64, 7, 3, 1, 1},  {32, 64, 14, 1, 2, 0}};
    struct Buffers {
        Tensor in, w, dy;
        ConvCall c;
    };
    std::vector<Buffers> bufs;
    double flops = 0;
    for (const ConvCall& c : convs) {
        const int64_t oh = (c.h + 2 * c.pad - c.k) / c.stride + 1;
        bufs.push_back({buffer({batch, c.c, c.h, c.h}, o, format), buffer({c.o, c.c, c.k, c.k}, o),
                        buffer({batch, c.o, oh, oh}, o, format),
                        c});
        const double f = 2.0 * double(batch * c.o * oh * oh * c.c * c.k * c.k);
        flops += f * (c.c == 1 ? 2 : 3);  // the stem's input needs no gradient
    }
    auto gemms = [&] {
        for (const Buffers& b : bufs) {
            kernels::conv2d(b.in, b.w, {}, {b.c.stride, b.c.stride}, {b.c.pad, b.c.pad});
            kernels::conv2d_backward(b.dy, b.in, b.w, {b.c.stride, b.c.stride}, {b.c.pad, b.c.pad},
                                     {1, 1}, 1, {b.c.c != 1, true, false});
        }
    };
    report_pair(channels_last ? "resnet8 channels_last" : "resnet8",
                "batch " + std::to_string(batch), model, x, y, gemms, flops, o, report);
}

// The default gpt of `ember train` (4 blocks, 4 heads, width 128, context
// 256, 113 tokens: fortunes' characters) at batch 16; the GEMMs alone are
// its linear layers' (attention is the fused kernel's, not a GEMM).
void run_gpt(const Options& o, Report& report) {
    const int64_t batch = o.quick ? 4 : 16, vocab = 113;
    const nn::GPTConfig c{.vocab_size = vocab, .block_size = o.quick ? 32 : 256, .layers = 4,
                          .heads = 4, .embd = 128};
    manual_seed(3);
    nn::GPT model(c);
    const int64_t rows = batch * c.block_size, C = c.embd;
    const Tensor x = randint(0, vocab, {batch, c.block_size});
    const Tensor y = randint(0, vocab, {batch, c.block_size});
    // qkv, attention projection, fc, projection per block; the tied head.
    std::vector<std::pair<int64_t, int64_t>> layers;
    for (int64_t l = 0; l < c.layers; ++l)
        for (auto io : {std::pair{C, 3 * C}, std::pair{C, C}, std::pair{C, 4 * C}, std::pair{4 * C, C}})
            layers.push_back(io);
    layers.push_back({C, vocab});
    std::vector<Tensor> acts, weights, grads;
    double flops = 0;
    for (auto [in, out] : layers) {
        acts.push_back(buffer({rows, in}, o));
        weights.push_back(buffer({out, in}, o));
        grads.push_back(buffer({rows, out}, o));
        flops += 2.0 * double(rows * in * out) * 3;
    }
    auto gemms = [&] {
        for (size_t l = 0; l < layers.size(); ++l) {
            kernels::matmul(acts[l], weights[l].t());
            kernels::matmul(grads[l].t(), acts[l]);
            kernels::matmul(grads[l], weights[l]);
        }
    };
    report_pair("gpt", "batch " + std::to_string(batch) + " x " + std::to_string(c.block_size),
                model, x, y, gemms, flops, o, report);
}

}  // namespace

void run_train(const Options& o, Report& report) {
    const auto wanted = [&](const char* name) { return o.model.empty() || o.model == name; };
    EMBER_CHECK(o.model.empty() || wanted("mlp") || wanted("resnet8") ||
                    wanted("resnet8_channels_last") || wanted("gpt"),
                "bench train: unknown --model '", o.model,
                "' (mlp, resnet8, resnet8_channels_last, gpt)");
    if (wanted("mlp")) run_mlp(o, report);
    if (wanted("resnet8")) run_resnet8(o, report, false);
    if (wanted("resnet8_channels_last")) run_resnet8(o, report, true);
    if (wanted("gpt")) run_gpt(o, report);
}

}  // namespace ember::bench

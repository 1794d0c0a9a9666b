// The benchmark driver: option parsing, the family list, timing and printing.
#include "bench/bench.h"

#include <CLI/CLI.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/cpu_load.h"
#include "core/cuda_stream.h"
#include "core/error.h"
#include "ember/ember.h"
#include "ember/kernels.h"
#include "kernels/copy.h"

namespace ember::bench {

// Families, each in bench/<family>.cpp.
void run_copy(const Options&, Report&);
void run_elementwise(const Options&, Report&);
void run_reduce(const Options&, Report&);
void run_softmax(const Options&, Report&);
void run_attention(const Options&, Report&);
void run_nn(const Options&, Report&);
void run_matmul(const Options&, Report&);
void run_conv(const Options&, Report&);
void run_loader(const Options&, Report&);
void run_train(const Options&, Report&);
void run_optim(const Options&, Report&);
void run_allreduce(const Options&, Report&);

const std::vector<Family>& families() {
    static const std::vector<Family> list = {
        {"copy", "memory copy limit, contiguous() and casts", run_copy},
        {"elementwise", "binary and unary elementwise ops", run_elementwise},
        {"reduce", "sum, mean, max, var over rows and columns", run_reduce},
        {"softmax", "softmax and log_softmax over the last dim", run_softmax},
        {"attention", "scaled dot-product attention: the fused CPU kernel beside the composite ops",
         run_attention},
        {"nn", "norms, cross-entropy, pooling, embedding and dropout, forward and backward",
         run_nn},
        {"matmul", "matmul against Eigen on the same buffers", run_matmul},
        {"conv", "conv2d on ResNet-like shapes", run_conv},
        {"loader", "data loader on Fashion-MNIST: workers, trainer wait", run_loader},
        {"optim", "fused optimizer steps over 10M and 100M parameters", run_optim},
        {"train", "one training step of mlp, resnet8 and gpt vs its GEMMs alone", run_train},
        {"allreduce", "all-reduce bus bandwidth and DDP in backward (run under mpirun)",
         run_allreduce},
    };
    return list;
}

namespace {

}  // namespace

Timing timing_of(std::vector<double> t) {
    std::sort(t.begin(), t.end());
    const double median = t[t.size() / 2];
    return {median, median > 0 ? (t.back() - t.front()) / median : 0};
}

Timing median_ms(const std::function<void()>& f, int warmup, int repeats) {
    for (int i = 0; i < warmup; ++i) f();
    std::vector<double> t;
    for (int i = 0; i < std::max(1, repeats); ++i) {
        const auto a = std::chrono::steady_clock::now();
        f();
        const auto b = std::chrono::steady_clock::now();
        t.push_back(std::chrono::duration<double, std::milli>(b - a).count());
    }
    return timing_of(std::move(t));
}

std::vector<Timing> interleaved_median_ms(const std::vector<std::function<void()>>& fs,
                                          const Options& o) {
    for (int i = 0; i < o.warmup; ++i)
        for (const auto& f : fs) f();
    std::vector<std::vector<double>> t(fs.size());
    for (int i = 0; i < std::max(1, o.repeats); ++i)
        for (size_t j = 0; j < fs.size(); ++j) {
            const auto start = std::chrono::steady_clock::now();
            fs[j]();
            const auto end = std::chrono::steady_clock::now();
            t[j].push_back(std::chrono::duration<double, std::milli>(end - start).count());
        }
    std::vector<Timing> med;
    for (auto& v : t) med.push_back(timing_of(std::move(v)));
    return med;
}

std::string limit_label(const char* what, double value, const char* unit) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%s %.1f %s", what, value, unit);
    return buf;
}

double measure_copy_gbps(const Options& o) {
    const int64_t n = o.quick ? (int64_t(1) << 20) : (int64_t(1) << 24);
    Tensor a = rand({n}), b = empty({n});
    const double ms = median_ms([&] { kernels::copy(b, a); }, o.warmup, o.repeats);
    return 2.0 * double(n) * 4 / (ms * 1e6);
}

std::optional<Device> bench_gpu() {
    if (cuda_device_count() == 0) return std::nullopt;
    return Device::cuda(0);
}

Timing gpu_median_ms(Device device, const std::function<void()>& f, const Options& o) {
    const size_t l2 = CudaContext::of(device).properties().l2_bytes;
    Tensor flush = empty({int64_t(2 * l2 / 4 + 1)}, {DType::f32, device});
    CudaEvent start(device, true), end(device, true);
    for (int i = 0; i < o.warmup; ++i) f();
    std::vector<double> t;
    for (int i = 0; i < std::max(1, o.repeats); ++i) {
        kernels::fill(flush, double(i));  // evicts the inputs from L2
        start.record(current_stream(device));
        f();
        end.record(current_stream(device));
        end.synchronize();
        t.push_back(CudaEvent::elapsed_ms(start, end));
    }
    return timing_of(std::move(t));
}

double measure_gpu_copy_gbps(Device device, const Options& o) {
    const int64_t n = o.quick ? (int64_t(1) << 22) : (int64_t(1) << 28);  // 1 GiB of f32
    Tensor a = zeros({n}, {DType::f32, device}), b = empty({n}, {DType::f32, device});
    const double ms = gpu_median_ms(device, [&] { kernels::copy(b, a); }, o);
    return 2.0 * double(n) * 4 / (ms * 1e6);
}

double measure_gemm_gflops(Device device, const Options& o) {
    const int64_t side = o.quick ? 256 : 1024;
    const Tensor a = randn({side, side}, {DType::f32, device}), b = randn({side, side}, {DType::f32, device});
    const auto gemm = [&] { (void)kernels::matmul(a, b); };
    const double ms = device.is_cuda() ? double(gpu_median_ms(device, gemm, o))
                                       : double(median_ms(gemm, o.warmup, o.repeats));
    return 2.0 * double(side * side * side) / ms / 1e6;
}

kernels::MachineLimits measure_limits(Device device, const Options& o) {
    return {.device = device.str(),
            .gemm_gflops = measure_gemm_gflops(device, o),
            .copy_gbps = device.is_cuda() ? measure_gpu_copy_gbps(device, o) : measure_copy_gbps(o)};
}

// A row past a limit that bounds its work (a training step faster than its
// GEMMs alone, a GEMM faster than the GEMM peak) measured something else
// than it claims: the limit was timed while the machine was busier, or the
// work is miscounted. (Rows against a peer or a copy rate may pass theirs.)
static bool unreliable(const Row& r) { return r.bound && r.fraction > 1.0; }

void Report::print_table(std::FILE* out) const {
    if (!load.empty()) std::fprintf(out, "# CPU load at the start: %s\n", load.c_str());
    std::fprintf(out, "%-10s %-7s %-22s %-22s %10s %7s %10s %10s %8s  %s\n", "family", "device", "kernel",
                "shape", "ms", "spread", "GB/s", "GFLOP/s", "launches", "of limit");
    for (const Row& r : rows_) {
        char gb[32] = "-", gf[32] = "-", la[32] = "-", fr[96] = "", sp[32] = "-";
        if (r.gbps >= 0) std::snprintf(gb, sizeof gb, "%.1f", r.gbps);
        if (r.gflops >= 0) std::snprintf(gf, sizeof gf, "%.1f", r.gflops);
        if (r.launches >= 0) std::snprintf(la, sizeof la, "%lld", (long long)r.launches);
        if (r.spread >= 0) std::snprintf(sp, sizeof sp, "%.0f%%", 100 * r.spread);
        if (r.fraction >= 0)
            std::snprintf(fr, sizeof fr, "%5.1f%% of %s", 100 * r.fraction, r.limit.c_str());
        std::string note = r.note;
        if (unreliable(r))
            note += std::string(note.empty() ? "" : "; ") + "UNRELIABLE: above its limit (" +
                    (load.empty() ? "load not measured" : load) + ")";
        std::fprintf(out, "%-10s %-7s %-22s %-22s %10.3f %7s %10s %10s %8s  %s%s%s\n", r.family.c_str(),
                    r.device.c_str(), r.kernel.c_str(), r.shape.c_str(), r.ms, sp, gb, gf, la, fr,
                    note.empty() ? "" : "  ", note.c_str());
    }
}

void Report::print_json() const {
    std::printf("[\n");
    for (size_t i = 0; i < rows_.size(); ++i) {
        const Row& r = rows_[i];
        std::printf(
            "  {\"family\": \"%s\", \"device\": \"%s\", \"kernel\": \"%s\", \"shape\": \"%s\", "
            "\"ms\": %.6f, \"spread\": %.4f, \"gbps\": %.3f, \"gflops\": %.3f, "
            "\"launches\": %lld, \"fraction\": %.4f, \"limit\": \"%s\", \"note\": \"%s\", "
            "\"unreliable\": %s, \"load\": \"%s\"}%s\n",
            r.family.c_str(), r.device.c_str(), r.kernel.c_str(), r.shape.c_str(), r.ms, r.spread,
            r.gbps, r.gflops, (long long)r.launches, r.fraction, r.limit.c_str(), r.note.c_str(),
            unreliable(r) ? "true" : "false", load.c_str(), i + 1 < rows_.size() ? "," : "");
    }
    std::printf("]\n");
}

void add_options(CLI::App& app, Options& o) {
    app.add_option("families", o.filters, "Families to run (default: all)");
    app.add_option("--repeats", o.repeats, "Timed runs per kernel (median reported)")
        ->check(CLI::Range(1, 1000));
    app.add_option("--warmup", o.warmup, "Untimed runs first")->check(CLI::Range(0, 100));
    app.add_flag("--json", o.json, "Print JSON instead of a table");
    app.add_flag("--quick", o.quick, "Small shapes (a smoke test, not a measurement)");
    app.add_option("--model", o.model,
                   "train family: only this model (mlp, resnet8, resnet8_channels_last, gpt)");
    app.add_option("--amp", o.amp,
                   "train family: bf16 runs each step under autocast to bf16 and its GEMMs alone in "
                   "bf16 (rows named '<model> bf16 ...')")
        ->check(CLI::IsMember({"off", "bf16"}))
        ->capture_default_str();
    app.add_flag("--breakdown", o.breakdown,
                 "train: the step's time op by op (each conv and GEMM against the GEMM peak)");
    app.add_option("--device", o.device,
                   "allreduce: where the tensors live, cpu (MPI) or cuda (NCCL, one GPU per rank); "
                   "attention: cuda runs only the GPU rows")
        ->check(CLI::IsMember({"cpu", "cuda"}))
        ->capture_default_str();
}

int run(const Options& o) {
    for (const std::string& f : o.filters) {
        const bool known = std::any_of(families().begin(), families().end(),
                                       [&](const Family& fam) { return f == fam.name; });
        if (!known) {
            std::string names;
            for (const Family& fam : families()) names += std::string(" ") + fam.name;
            EMBER_FAIL("bench: unknown family '", f, "' (known:", names, ")");
        }
    }
    Report report;
    // A shared machine: fewer threads than cores where other processes keep
    // some busy (as ember train does; OMP_NUM_THREADS chooses for itself),
    // and the load in the report.
    const CpuLoad load = measure_cpu_load();
    report.load = load_str(load);
    if (!std::getenv("OMP_NUM_THREADS")) {
        const int threads = threads_for_load(load);
        if (threads < omp_get_max_threads()) {
            omp_set_num_threads(threads);
            report.load += ", so " + std::to_string(threads) + " OpenMP thread(s)";
        }
    }
    for (const Family& fam : families()) {
        if (!o.filters.empty() &&
            std::find(o.filters.begin(), o.filters.end(), fam.name) == o.filters.end())
            continue;
        fam.run(o, report);
    }
    if (dist::launch_info_from_env().rank != 0) return 0;  // under mpirun: rank 0 reports
    if (o.json)
        report.print_json();
    else
        report.print_table();
    return 0;
}

}  // namespace ember::bench

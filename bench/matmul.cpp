// matmul family: ember's matmul against Eigen called directly on the same
// buffers in the same run (the limit). FLOPs 2·M·N·K per matrix; bytes are
// not the limit here. Rows: square and tall-times-wide GEMMs (front, kernel
// into a reused buffer, transposed right operand read in place), the same in
// bf16 against the bf16 dot-product peak timed beside them, and a batch of
// small matrices; on a GPU also bench/gpu_linalg.cpp's rows.
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/gemm_bf16_tile.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "bench/bench.h"
#include "core/settings.h"
#include "ember/ember.h"
#include "ember/kernels.h"
#include "kernels/front.h"
#include "kernels/matmul.h"

// GCC 12 false positive inside Eigen's AVX-512 packing (see kernels/cpu/matmul.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

namespace ember::bench {

namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;

// Checks c[b] = a[b] · b[b] at sampled entries against f64 dot products; a,
// c contiguous [B, M, K] / [B, M, N]; b is [B, K, N] with element strides
// (sk, sn) inside a matrix (a transposed view has sk = 1).
void validate(const Tensor& c, const Tensor& a, const Tensor& b, const char* what) {
    const int64_t nb = c.dim() == 3 ? c.size(0) : 1, m = a.size(-2), k = a.size(-1), n = c.size(-1);
    const int64_t sk = b.stride(-2), sn = b.stride(-1), sb = b.dim() == 3 ? b.stride(0) : 0;
    const float *pa = a.data<float>(), *pb = b.data<float>(), *pc = c.data<float>();
    for (int s = 0; s < 64; ++s) {
        const int64_t t = (s * 7) % nb, i = (s * 131 + 3) % m, j = (s * 71 + 5) % n;
        double want = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
            const double x = double(pa[(t * m + i) * k + p]) * double(pb[t * sb + p * sk + j * sn]);
            want += x;
            mag += std::abs(x);
        }
        const double got = pc[(t * m + i) * n + j];
        if (std::abs(got - want) > 1e-5 * mag + 1e-6)
            EMBER_FAIL("bench matmul: ", what, " is wrong at [", t, ", ", i, ", ", j, "]: got ",
                       got, ", expected ", want);
    }
}

std::string mnk(int64_t m, int64_t n, int64_t k) {
    return std::to_string(m) + "x" + std::to_string(k) + " @ " + std::to_string(k) + "x" +
           std::to_string(n);
}

// Rows for one GEMM shape: Eigen direct (the limit), ember's matmul (which
// allocates its output), the CPU kernel into a reused buffer, and matmul with
// a transposed right operand against Eigen on the same column-major buffer.
void gemm_rows(const Options& o, Report& rep, int64_t m, int64_t n, int64_t k) {
    const Tensor a = rand({m, k}), b = rand({k, n}), bt = rand({n, k});
    Tensor c = empty({m, n}), d = empty({m, n});
    Eigen::Map<const RowMat> A(a.data<float>(), m, k), B(b.data<float>(), k, n);
    Eigen::Map<const ColMat> Bt(bt.data<float>(), k, n);  // bt read as its transpose
    Eigen::Map<RowMat> C(c.data<float>(), m, n);
    const kernels::View vd = kernels::view_of(d), va = kernels::view_of(a),
                        vb = kernels::view_of(b);
    const double flop = 2.0 * double(m) * double(n) * double(k);

    C.noalias() = A * B;
    validate(c, a, b, "Eigen direct");
    validate(kernels::matmul(a, b), a, b, "ember matmul");
    kernels::cpu::matmul(vd, va, vb);
    validate(d, a, b, "cpu::matmul");
    validate(kernels::matmul(a, bt.t()), a, bt.t(), "ember matmul(a, b.t())");

    const std::vector<Timing> ms = interleaved_median_ms(
        {[&] { C.noalias() = A * B; }, [&] { (void)kernels::matmul(a, b); },
         [&] { kernels::cpu::matmul(vd, va, vb); }, [&] { C.noalias() = A * Bt; },
         [&] { (void)kernels::matmul(a, bt.t()); }},
        o);
    const std::string lim = limit_label("Eigen", flop / (ms[0] * 1e6), "GFLOP/s");
    const std::string lim_t = limit_label("Eigen", flop / (ms[3] * 1e6), "GFLOP/s");
    const std::string shape = mnk(m, n, k);
    auto row = [&](const char* kernel, const Timing& t, double limit_ms, const std::string& limit) {
        Row r{"matmul", kernel, shape, t, -1, flop / (t * 1e6), limit_ms / t, limit};
        rep.add(r, t);
    };
    row("Eigen direct (limit)", ms[0], ms[0], lim);
    row("matmul f32", ms[1], ms[0], lim);
    row("  cpu kernel, reused out", ms[2], ms[0], lim);
    row("matmul f32, b.t()", ms[4], ms[3], lim_t);
}

// Checks a bf16 c = a · b (all bf16, contiguous, b [K, N] with element
// strides (sk, sn)) at sampled entries against f64 sums of the bf16 values:
// f32 sums and one bf16 rounding.
void validate_bf16(const Tensor& c, const Tensor& a, const Tensor& b, const char* what) {
    const int64_t m = a.size(0), k = a.size(1), n = c.size(1), sk = b.stride(0), sn = b.stride(1);
    const BFloat16 *pa = a.data<BFloat16>(), *pb = b.data<BFloat16>(), *pc = c.data<BFloat16>();
    for (int s = 0; s < 64; ++s) {
        const int64_t i = (s * 131 + 3) % m, j = (s * 71 + 5) % n;
        double want = 0, mag = 0;
        for (int64_t p = 0; p < k; ++p) {
            const double x = double(float(pa[i * k + p])) * double(float(pb[p * sk + j * sn]));
            want += x;
            mag += std::abs(x);
        }
        const double got = float(pc[i * n + j]);
        if (std::abs(got - want) > std::ldexp(std::abs(want), -8) + 1e-5 * mag + 1e-6)
            EMBER_FAIL("bench matmul: ", what, " is wrong at [", i, ", ", j, "]: got ", got,
                       ", expected ", want);
    }
}

}  // namespace

double bf16_peak_flop(const uint16_t* values, int64_t count, int64_t iterations) {
    double flop = 0;
    float sink = 0;
#pragma omp parallel reduction(+ : flop)
    {
        float s = 0;
        flop += kernels::cpu::bf16_peak_loop(iterations, values, count, &s);
#pragma omp atomic
        sink += s;
    }
    volatile float keep = sink;  // the sums are used
    (void)keep;
    return flop;
}

namespace {

// bf16 rows for one GEMM shape (bf16 operands and result of normal values,
// f32 sums): ember's matmul, the CPU kernel into a reused buffer, a
// transposed right operand read in place — against the bf16 peak (the
// native tile on L1-resident operands drawn from a, on every thread: the
// GEMM's instruction mix on its data without its cache misses, packing or
// epilogue) timed interleaved with them. Where the CPU multiplies bf16 by its f32
// emulation, against ember's f32 matmul of the same shape instead.
void bf16_rows(const Options& o, Report& rep, int64_t m, int64_t n, int64_t k) {
    const Tensor a = randn({m, k}).to(DType::bf16), b = randn({k, n}).to(DType::bf16),
                 bt = randn({n, k}).to(DType::bf16), a32 = randn({m, k}), b32 = randn({k, n});
    Tensor d = empty({m, n}, {DType::bf16});
    const kernels::View vd = kernels::view_of(d), va = kernels::view_of(a),
                        vb = kernels::view_of(b);
    validate_bf16(kernels::matmul(a, b), a, b, "ember matmul bf16");
    kernels::cpu::matmul(vd, va, vb);
    validate_bf16(d, a, b, "cpu::matmul bf16");
    validate_bf16(kernels::matmul(a, bt.t()), a, bt.t(), "ember matmul bf16 (a, b.t())");

    const bool native = cpu_bf16_native();
    const int64_t iterations = o.quick ? 500 : 10000;  // tiles per thread (~4 ms at 10000)
    double peak_flop = 0;
    const std::function<void()> limit =
        native ? std::function<void()>([&] {
                     peak_flop = bf16_peak_flop(
                         reinterpret_cast<const uint16_t*>(a.data<BFloat16>()), a.numel(),
                         iterations);
                 })
               : std::function<void()>([&] { (void)kernels::matmul(a32, b32); });
    const std::vector<Timing> ms = interleaved_median_ms(
        {limit, [&] { (void)kernels::matmul(a, b); }, [&] { kernels::cpu::matmul(vd, va, vb); },
         [&] { (void)kernels::matmul(a, bt.t()); }},
        o);
    const double flop = 2.0 * double(m) * double(n) * double(k);
    const double limit_gflops = (native ? peak_flop : flop) / (ms[0] * 1e6);
    const std::string lim = limit_label(native ? "bf16 peak" : "f32 matmul", limit_gflops, "GFLOP/s");
    const std::string shape = mnk(m, n, k);
    auto row = [&](const char* kernel, const Timing& t, double gflops) {
        Row r{"matmul", kernel, shape, t, -1, gflops, gflops / limit_gflops, lim};
        r.bound = native;
        rep.add(r, t);
    };
    if (native)
        row("bf16 tile peak (limit)", ms[0], limit_gflops);
    else
        row("matmul f32 (limit; bf16 emulated)", ms[0], limit_gflops);
    row("matmul bf16", ms[1], flop / (ms[1] * 1e6));
    row("  cpu kernel, reused out", ms[2], flop / (ms[2] * 1e6));
    row("matmul bf16, b.t()", ms[3], flop / (ms[3] * 1e6));
}

// A batch of small matrices: ember's bmm against the better of two direct
// Eigen loops (sequential with Eigen threading each product, or one matrix
// per OpenMP thread).
void batched_rows(const Options& o, Report& rep, int64_t nb, int64_t s) {
    const Tensor a = rand({nb, s, s}), b = rand({nb, s, s});
    Tensor c = empty({nb, s, s});
    auto product = [&](int64_t t) {
        Eigen::Map<const RowMat> A(a.data<float>() + t * s * s, s, s),
            B(b.data<float>() + t * s * s, s, s);
        Eigen::Map<RowMat> C(c.data<float>() + t * s * s, s, s);
        C.noalias() = A * B;
    };
    auto sequential = [&] {
        for (int64_t t = 0; t < nb; ++t) product(t);
    };
    auto per_thread = [&] {
#pragma omp parallel for schedule(static)
        for (int64_t t = 0; t < nb; ++t) product(t);
    };
    per_thread();
    validate(c, a, b, "Eigen batched loop");
    validate(kernels::bmm(a, b), a, b, "ember bmm");

    const double flop = 2.0 * double(nb) * double(s) * double(s) * double(s);
    const std::string shape = shape_str({nb, s, s}) + " @ " + shape_str({nb, s, s});
    const std::vector<Timing> ms =
        interleaved_median_ms({sequential, per_thread, [&] { (void)kernels::bmm(a, b); }}, o);
    const Timing seq_ms = ms[0], par_ms = ms[1];
    const double best = std::min(seq_ms.ms, par_ms.ms);
    const std::string lim = limit_label("Eigen loop", flop / (best * 1e6), "GFLOP/s");
    auto row = [&](const char* kernel, const Timing& t) {
        Row r{"matmul", kernel, shape, t, -1, flop / (t * 1e6), best / t, lim};
        rep.add(r, t);
    };
    row("Eigen loop, sequential", seq_ms);
    row("Eigen loop, omp batch", par_ms);
    row("bmm f32", ms[2]);
}

}  // namespace

void run_matmul(const Options& o, Report& rep) {
    if (o.quick) {
        gemm_rows(o, rep, 256, 256, 256);
        gemm_rows(o, rep, 512, 256, 512);
        bf16_rows(o, rep, 256, 256, 256);
        batched_rows(o, rep, 8, 128);
        if (const auto gpu = bench_gpu()) run_matmul_gpu(*gpu, o, rep);
        return;
    }
    gemm_rows(o, rep, 1024, 1024, 1024);
    gemm_rows(o, rep, 4096, 1024, 4096);
    bf16_rows(o, rep, 1024, 1024, 1024);
    bf16_rows(o, rep, 4096, 1024, 4096);
    batched_rows(o, rep, 64, 256);
    if (const auto gpu = bench_gpu()) run_matmul_gpu(*gpu, o, rep);
}

}  // namespace ember::bench

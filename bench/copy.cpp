// Copy family: the memory-copy limit itself, contiguous() of a transposed
// matrix, and dtype casts, on the CPU and (when present) the GPU. Bytes per
// element: sizeof(src) + sizeof(dst).
#include "kernels/copy.h"

#include <cstdio>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"

namespace ember::bench {

namespace {

const DType kCasts[][2] = {{DType::f32, DType::bf16},
                           {DType::bf16, DType::f32},
                           {DType::f32, DType::f16},
                           {DType::f32, DType::f64},
                           {DType::i64, DType::f32}};

// The GPU's result must equal the CPU's bit for bit (both run math::cast):
// a wrong kernel is not worth timing.
void validate_equal(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
    const int64_t wrong =
        int64_t(kernels::sum(kernels::ne(gpu.to(Device::cpu()), cpu)).item());
    EMBER_CHECK(wrong == 0, "bench copy: ", what, " on ", gpu.device(), " differs from the CPU in ",
                wrong, " elements");
}

void run_copy_gpu(Device d, const Options& o, Report& rep) {
    const double limit = measure_gpu_copy_gbps(d, o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    const int64_t n = o.quick ? (int64_t(1) << 20) : (int64_t(1) << 26);  // 256 MiB of f32
    Row limit_row{"copy", "memcpy (limit)", shape_str({n}), 0, limit, -1, 1.0, lim};
    limit_row.ms = 2.0 * double(n) * 4 / (limit * 1e6);
    limit_row.device = d.str();
    rep.add(limit_row);
    for (const auto& c : kCasts) {
        const Tensor host = rand({n}).to(c[0]);
        const Tensor src = host.to(d), dst = empty({n}, {c[1], d});
        kernels::copy(dst, src);
        validate_equal(dst, kernels::cast(host, c[1]), std::string("cast to ") + dtype_name(c[1]));
        const Timing ms = gpu_median_ms(d, [&] { kernels::copy(dst, src); }, o);
        const double gbps = double(n) * double(dtype_size(c[0]) + dtype_size(c[1])) / (ms * 1e6);
        Row r{"copy", std::string("cast ") + dtype_name(c[0]) + "->" + dtype_name(c[1]),
              shape_str({n}), ms, gbps, -1, gbps / limit, lim};
        r.device = d.str();
        rep.add(r, ms);
    }
    const int64_t side = o.quick ? 1024 : 8192;
    const Tensor host = rand({side, side}), m = host.to(d), mt = m.t();
    validate_equal(kernels::contiguous(mt), kernels::contiguous(host.t()), "contiguous(transpose)");
    const Timing ms = gpu_median_ms(d, [&] { (void)kernels::contiguous(mt); }, o);
    const double gbps = 2.0 * double(side * side) * 4 / (ms * 1e6);
    Row r{"copy", "contiguous(transpose)", shape_str({side, side}), ms, gbps, -1, gbps / limit, lim};
    r.device = d.str();
    r.note = "allocates its output";
    rep.add(r, ms);
}

}  // namespace

void run_copy(const Options& o, Report& rep) {
    const double limit = measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    const int64_t n = o.quick ? (int64_t(1) << 20) : (int64_t(1) << 24);
    rep.add({"copy", "memcpy (limit)", shape_str({n}), 2.0 * n * 4 / (limit * 1e6), limit, -1, 1.0,
             lim});

    for (const auto& c : kCasts) {
        Tensor src = rand({n}).to(c[0]);
        Tensor dst = empty({n}, {c[1]});
        // Correctness of every cast pair is pinned by tests/kernels/test_copy.cpp.
        const Timing ms = median_ms([&] { kernels::copy(dst, src); }, o.warmup, o.repeats);
        const double gbps = double(n) * double(dtype_size(c[0]) + dtype_size(c[1])) / (ms * 1e6);
        rep.add({"copy", std::string("cast ") + dtype_name(c[0]) + "->" + dtype_name(c[1]),
                 shape_str({n}), ms, gbps, -1, gbps / limit, lim}, ms);
    }
    const int64_t side = o.quick ? 1024 : 4096;
    Tensor m = rand({side, side});
    Tensor mt = m.t();
    const Timing ms = median_ms([&] { (void)mt.contiguous(); }, o.warmup, o.repeats);
    const double gbps = 2.0 * double(side * side) * 4 / (ms * 1e6);
    rep.add({"copy", "contiguous(transpose)", shape_str({side, side}), ms, gbps, -1, gbps / limit,
             lim}, ms);
    if (const auto gpu = bench_gpu()) run_copy_gpu(*gpu, o, rep);
}

}  // namespace ember::bench

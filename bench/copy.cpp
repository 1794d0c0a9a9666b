// Copy family: the memory-copy limit itself, contiguous() of a transposed
// matrix, and dtype casts. Bytes per element: sizeof(src) + sizeof(dst).
#include "kernels/copy.h"

#include <cstdio>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"

namespace ember::bench {

void run_copy(const Options& o, Report& rep) {
    const double limit = measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    const int64_t n = o.quick ? (int64_t(1) << 20) : (int64_t(1) << 24);
    rep.add({"copy", "memcpy (limit)", shape_str({n}), 2.0 * n * 4 / (limit * 1e6), limit, -1, 1.0,
             lim});

    const DType casts[][2] = {{DType::f32, DType::bf16},
                              {DType::bf16, DType::f32},
                              {DType::f32, DType::f16},
                              {DType::f32, DType::f64},
                              {DType::i64, DType::f32}};
    for (const auto& c : casts) {
        Tensor src = rand({n}).to(c[0]);
        Tensor dst = empty({n}, {c[1]});
        // Correctness of every cast pair is pinned by tests/kernels/test_copy.cpp.
        const double ms = median_ms([&] { kernels::copy(dst, src); }, o.warmup, o.repeats);
        const double gbps = double(n) * double(dtype_size(c[0]) + dtype_size(c[1])) / (ms * 1e6);
        rep.add({"copy", std::string("cast ") + dtype_name(c[0]) + "->" + dtype_name(c[1]),
                 shape_str({n}), ms, gbps, -1, gbps / limit, lim});
    }
    const int64_t side = o.quick ? 1024 : 4096;
    Tensor m = rand({side, side});
    Tensor mt = m.t();
    const double ms = median_ms([&] { (void)mt.contiguous(); }, o.warmup, o.repeats);
    const double gbps = 2.0 * double(side * side) * 4 / (ms * 1e6);
    rep.add({"copy", "contiguous(transpose)", shape_str({side, side}), ms, gbps, -1, gbps / limit,
             lim});
}

}  // namespace ember::bench

// CPU dropout: the mask from the Philox stream (kernels/random_math.h), the
// output scaled by 1 / (1 − p); the backward scales the gradient by the mask.
//
// Math:  keep_i = U_i >= p with U_i = math::uniform_at<float>(seed, first, i);
//        y_i = keep_i·x_i / (1 − p); grad_x_i = keep_i·grad_y_i / (1 − p)
//        (1 / (1 − p) rounded once to the accumulation type, then multiplied).
// Dtypes: f32, f64, f16, bf16 (f16/bf16 scaled in f32); mask u8.
// Cost:  forward reads n·sizeof(T), writes n·(sizeof(T) + 1) bytes and runs a
//        Philox block (10 rounds) per element; backward is elementwise.
//        Every element is independent: same result for any thread count.
//        Test: tests/kernels/test_dropout.cpp.
#include "kernels/cpu/dropout.h"

#include <omp.h>

#include "kernels/cpu/loop.h"
#include "kernels/dropout_args.h"
#include "kernels/random_math.h"

namespace ember::kernels::cpu {

void dropout_forward(const View& out, const View& mask, const View& x, double p, uint64_t seed,
                     uint64_t first_block) {
    EMBER_INTERNAL_ASSERT(dropout_forward_views(out, mask, x));
    visit_floating(x.dtype, "dropout_forward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        const T* in = x.ptr<const T>();
        T* o = out.ptr<T>();
        uint8_t* m = mask.ptr<uint8_t>();
        const int64_t n = x.numel();
        const A scale = A(1 / (1 - p));
        const bool parallel = n >= kParallelGrain / 4 && !omp_in_parallel();
        if (p == 0) {  // every U_i >= 0: all kept, scale 1
#pragma omp parallel for schedule(static) if (parallel)
            for (int64_t i = 0; i < n; ++i) o[i] = in[i], m[i] = 1;
            return;
        }
        // perf: uniform_at runs a Philox block per element (4 elements share
        // one); it is the one definition of the stream, which the mask must match.
#pragma omp parallel for schedule(static) if (parallel)
        for (int64_t i = 0; i < n; ++i) {
            const bool keep = math::dropout_keep(math::uniform_at<float>(seed, first_block, i), p);
            o[i] = math::DropoutScale<T>{scale}(in[i], keep);
            m[i] = keep;
        }
    });
}

void dropout_backward(const View& grad_x, const View& grad_y, const View& mask, double p) {
    EMBER_INTERNAL_ASSERT(dropout_backward_views(grad_x, grad_y, mask));
    visit_floating(grad_y.dtype, "dropout_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        const T* g = grad_y.ptr<const T>();
        const uint8_t* m = mask.ptr<const uint8_t>();
        T* o = grad_x.ptr<T>();
        const int64_t n = grad_y.numel();
        const math::DropoutScale<T> apply{A(1 / (1 - p))};
#pragma omp parallel for schedule(static) if (n >= kParallelGrain && !omp_in_parallel())
        for (int64_t i = 0; i < n; ++i) o[i] = apply(g[i], m[i]);
    });
}

}  // namespace ember::kernels::cpu

// Elementwise family: one row per op-table entry (tests/ops/entries_elementwise.cpp)
// — unary ops, binary ops with a tensor and with a scalar (and add with a row
// broadcast), comparisons, where, clamp and the activation backwards — on 16M
// f32 elements, each checked against its f64 reference first. Bytes: every
// input read once and the output written once (12 per element for add, 8 for
// the scalar and unary forms, 13 for where; the scalar and the 16 KiB row stay
// in cache); the limit is the copy bandwidth measured in the same run. Where a
// GPU is present, every entry also gets a GPU row (all have CUDA kernels).
// perf: the transcendental ops (exp, log, sigmoid, tanh, gelu, pow, the gelu
// backwards) call scalar libm (GCC vectorizes expf/tanhf only with
// -ffast-math), so they are compute-bound on two cores, not memory-bound.
#include "bench/op_rows.h"

namespace ember::bench {

void run_elementwise(const Options& o, Report& rep) {
    using F = test::Family;
    run_op_rows("elementwise",
                {F::unary, F::binary, F::compare, F::where, F::clamp, F::activation_backward}, o,
                rep);
}

}  // namespace ember::bench

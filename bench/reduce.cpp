// Reduce family: one row per op-table entry (tests/ops/entries_reduce.cpp) —
// sum over the last dim, the first dim and all dims; mean, amax, amin, norm,
// var and std over the last dim — of a [4096, 4096] f32 matrix (64 MiB, past
// the caches), each checked against its f64 reference first. Bytes: input read
// + output written; the limit is the copy bandwidth measured in the same run.
// FLOPs: one per input element (sum, mean, amax, amin), two (norm), four (var, std).
#include "bench/op_rows.h"

namespace ember::bench {

void run_reduce(const Options& o, Report& rep) {
    run_op_rows("reduce", {test::Family::reduce}, o, rep);
}

}  // namespace ember::bench

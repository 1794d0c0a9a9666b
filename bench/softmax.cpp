// Softmax family: one row per op-table entry and shape (tests/ops/entries_reduce.cpp):
// softmax and log_softmax over the last dim of f32 matrices with long rows
// ([4096, 4096]) and short rows ([32768, 512]), and their backwards on the
// long rows, each checked against its f64 reference first. Bytes: each input
// read once and the output written once (2 * 4 * numel forward, 3 * 4 * numel
// backward); the limit is the copy bandwidth measured in the same run. FLOPs:
// five per element forward (max, subtract, exp, add, divide), four backward.
#include "bench/op_rows.h"

namespace ember::bench {

void run_softmax(const Options& o, Report& rep) {
    run_op_rows("softmax", {test::Family::softmax}, o, rep);
}

}  // namespace ember::bench

// Benchmark rows from the op table (tests/ops/op_table.h): each family file
// (bench/elementwise.cpp, reduce.cpp, softmax.cpp) names the table families
// it reports; a new entry in the table gets its row with no code here.
#pragma once

#include <initializer_list>

#include "bench/bench.h"
#include "ops/op_table.h"

namespace ember::bench {

/// Times every entry of `families` on each of its bench cases (f32, through
/// the front function) after checking it against the entry's f64 reference,
/// and adds one row per case to `rep` under the benchmark family `name`; on a
/// machine with a GPU, a GPU row too for each entry with a CUDA kernel.
void run_op_rows(const char* name, std::initializer_list<test::Family> families, const Options& o,
                 Report& rep);

}  // namespace ember::bench

// Benchmarks for the reduce family.
#include "bench/bench.h"

namespace ember::bench {

void run_reduce(const Options&, Report&) {}

}  // namespace ember::bench

// Benchmarks for the elementwise family.
#include "bench/bench.h"

namespace ember::bench {

void run_elementwise(const Options&, Report&) {}

}  // namespace ember::bench

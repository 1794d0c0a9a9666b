// Benchmarks for the matmul family.
#include "bench/bench.h"

namespace ember::bench {

void run_matmul(const Options&, Report&) {}

}  // namespace ember::bench

// Benchmarks for the conv family.
#include "bench/bench.h"

namespace ember::bench {

void run_conv(const Options&, Report&) {}

}  // namespace ember::bench

// Benchmarks for the softmax family.
#include "bench/bench.h"

namespace ember::bench {

void run_softmax(const Options&, Report&) {}

}  // namespace ember::bench

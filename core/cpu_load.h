// How busy the other processes keep this process's cores, measured from the
// kernel's per-CPU counters over a short window, and the OpenMP thread count
// that stays fast under that load. OpenMP threads wait for each other at
// every parallel region's end: when another process holds one of the cores,
// the thread that shares it arrives late at every barrier and a step can take
// ten times as long (measured: the mlp on 2 cores, one of them busy, at 2,653
// samples/s with 2 threads and 31,490 with 1). docs/train.md, "Threads".
#pragma once

#include <string>

namespace ember {

struct CpuLoad {
    int cores = 1;            ///< CPUs this process may run on (its affinity mask)
    double busy = 0;          ///< of them, the cores' worth kept busy by other processes
    double window_s = 0;      ///< how long it was measured (0: not measured)
};

/// Measures the load other processes put on this process's CPUs over
/// `seconds` (sleeping the while; the CPU time this process's own threads
/// spend meanwhile is subtracted). Where /proc/stat cannot be read the
/// result says busy 0, window 0.
CpuLoad measure_cpu_load(double seconds = 0.3);

/// The OpenMP threads to use under `load`: one per core no other process
/// keeps busy (a core counts as busy from half of it on), at least 1.
int threads_for_load(const CpuLoad& load);

/// "1.0 of 2 cores busy with other processes": for the start table and
/// the benchmark report.
std::string load_str(const CpuLoad& load);

}  // namespace ember

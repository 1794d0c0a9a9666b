// What a Profiler recorded, as a file and as a table (docs/profiling.md):
// the Chrome trace event JSON that Perfetto (ui.perfetto.dev) and
// chrome://tracing open, read back by `ember profile`, and the text summary
// of it — the ops by self time with their calls, time, share of the step
// and achieved GFLOP/s and GB/s against the machine's limits.
//
//     Profiler prof;
//     ... // steps, each inside a ProfileRange("step", "step 7")
//     Trace t = take_trace(prof, {.title = "my model"});
//     write_chrome_trace(t, "trace.json");
//     std::cout << summarize(t);
#pragma once

#include <string>
#include <vector>

#include "profile.h"

namespace ember::kernels {

/// The limits a summary judges achieved rates against, measured on the
/// machine as `ember bench` measures them; 0 where not measured.
struct MachineLimits {
    std::string device;      ///< where they were measured: "cpu", "cuda:0"
    double gemm_gflops = 0;  ///< f32 GEMM at 1024³ (ember's matmul)
    double copy_gbps = 0;    ///< memory copy, bytes read + written
};

/// What a trace file holds besides its events.
struct TraceInfo {
    std::string title;     ///< "ember train --model mlp", the process's name in the viewer
    MachineLimits limits;  ///< for the summary's fractions
};

struct Trace {
    TraceInfo info;
    std::vector<std::string> tracks;  ///< Profiler::tracks(): the host thread, CUDA streams
    std::vector<TraceEvent> events;
    std::vector<CounterEvent> counters;
};

/// The profiler's events so far (waiting for CUDA ops' times) with `info`,
/// their times rounded to the nanosecond (as a trace file holds them).
Trace take_trace(Profiler& prof, TraceInfo info);

/// The Chrome trace event JSON of `t`: "X" complete events (ts and dur in
/// µs; op shapes, device, FLOPs and bytes in args), "C" counters for memory,
/// "M" metadata naming the process and each track, and `otherData.ember`
/// with the info. Written atomically.
void write_chrome_trace(const Trace& t, const std::string& path);
std::string chrome_trace_json(const Trace& t);

/// Reads a trace written by write_chrome_trace. An Error for a file that is
/// not one (or is larger than 1 GiB).
Trace read_chrome_trace(const std::string& path);

struct SummaryOptions {
    int top = 20;           ///< rows shown; the rest are summed in one
    bool by_shape = false;  ///< one row per op and signature, not per op
};

/// The text summary. Its time is that of the "step" ranges (the whole
/// trace when it has none); each row is one op (or named range) with its
/// self time — its time less that of the spans inside it — so the rows add
/// up to the step time exactly, the time outside every op and range being
/// a row of its own.
std::string summarize(const Trace& t, const SummaryOptions& options = {});

}  // namespace ember::kernels

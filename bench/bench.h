// `ember bench`: one micro-benchmark per kernel family. Each validates against
// a reference first, then times (warm-up excluded, median of repeats, data
// larger than the caches) and reports time, achieved GB/s or GFLOP/s and the
// fraction of a limit measured in the same run (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "kernels/profile_trace.h"

namespace CLI {
class App;
}

namespace ember::bench {

struct Options {
    std::vector<std::string> filters;  // family names to run; empty = all
    int repeats = 7;
    int warmup = 2;
    bool json = false;
    bool quick = false;          // smaller shapes, for smoke tests
    bool breakdown = false;      // train family: each op's share of the step too
    std::string model;           // train family: only this model's rows ("": all)
    std::string device = "cpu";  // allreduce: cpu (MPI) or cuda (NCCL); attention: cuda = GPU rows only
    std::string amp = "off";     // train family: off, or bf16 (steps under autocast, GEMMs in bf16)
};

/// A measured time: the median of the timed runs, and their spread
/// ((slowest − fastest) / median), which a row reports beside it.
struct Timing {
    double ms = 0;
    double spread = 0;
    operator double() const { return ms; }  // where only the median is wanted
};

/// The median of timed runs (ms, one or more) and their spread: (slowest −
/// fastest) / median.
Timing timing_of(std::vector<double> runs);

/// One line of the report.
struct Row {
    std::string family;
    std::string kernel;
    std::string shape;
    double ms = 0;               // median time
    double gbps = -1;            // achieved bytes/s / 1e9, or -1
    double gflops = -1;          // achieved flops/s / 1e9, or -1
    double fraction = -1;        // of `limit`, or -1
    std::string limit;           // what the fraction is of, e.g. "copy 62.1 GB/s"
    std::string note;            // anything else worth a column, e.g. "peak host 12.3 MB"
    std::string device = "cpu";  // where it ran
    int64_t launches = -1;       // kernel launches per call, measured (core/launch_count.h), or -1
    double spread = -1;          // (slowest − fastest) / median of the timed runs, or -1
    bool bound = false;          // `limit` bounds this row's work (its GEMMs, the GEMM peak): past it, unreliable
};

class Report {
  public:
    /// The load other processes put on the CPUs when the run began
    /// (core/cpu_load.h), printed above the rows; rows beyond 100 % of their
    /// limit are marked unreliable with it.
    std::string load;
    void add(Row r) { rows_.push_back(std::move(r)); }
    /// A row whose time is `t`: its spread goes with it.
    void add(Row r, const Timing& t) {
        r.spread = t.spread;
        add(std::move(r));
    }
    const std::vector<Row>& rows() const { return rows_; }
    void print_table(std::FILE* out = stdout) const;
    void print_json() const;

  private:
    std::vector<Row> rows_;
};

/// A benchmark family: fills the report with its rows.
struct Family {
    const char* name;
    const char* description;
    void (*run)(const Options&, Report&);
};

/// Every family, in report order (a plain list in bench/bench.cpp).
const std::vector<Family>& families();

/// Median wall time of f() in milliseconds over `repeats` runs after `warmup` runs.
Timing median_ms(const std::function<void()>& f, int warmup, int repeats);

/// Median times in ms of each function, timed in turn within every repeat so
/// that a change in machine load (a shared box) hits all of them alike.
std::vector<Timing> interleaved_median_ms(const std::vector<std::function<void()>>& fs,
                                          const Options& o);

/// The GPU the benchmarks also time, when one is present: cuda:0.
std::optional<Device> bench_gpu();

/// Median time in ms of f(), whose work is queued on `device`'s current
/// stream, measured with CUDA events around each run. Before each run the L2
/// is flushed (a fill of twice its size, outside the timed span), so inputs
/// come from device memory as in a training step.
Timing gpu_median_ms(Device device, const std::function<void()>& f, const Options& o);

/// Device-memory copy bandwidth of `device` in GB/s (bytes read + written),
/// measured now: the limit of the memory-bound GPU rows.
double measure_gpu_copy_gbps(Device device, const Options& o);
/// The GPU rows of the matmul and conv families (bench/gpu_linalg.cpp).
void run_matmul_gpu(Device gpu, const Options& o, Report& rep);
void run_conv_gpu(Device gpu, const Options& o, Report& rep);
/// The fused CUDA attention's rows (bench/attention_gpu.cpp).
void run_attention_gpu(Device gpu, const Options& o, Report& rep);

/// "copy 46.5 GB/s": the label of a limit in the report.
std::string limit_label(const char* what, double value, const char* unit);

/// The bf16 peak's work once (bench/matmul.cpp): the native VDPBF16PS tile
/// on L1-resident operands drawn from `values` (`count` bf16 bits; the
/// instruction's clock depends on its data), `iterations` tiles on every
/// thread. Returns the FLOPs done. Needs AVX512_BF16 (cpu_bf16_native()).
double bf16_peak_flop(const uint16_t* values, int64_t count, int64_t iterations);

/// Host memory-copy bandwidth in GB/s (bytes read + written), measured now:
/// the limit elementwise CPU kernels are judged against.
double measure_copy_gbps(const Options& o);
/// ember's f32 matmul at 1024³ (256³ when quick) on `device` in GFLOP/s,
/// measured now: the GEMM peak that GEMMs and convolutions are judged against.
double measure_gemm_gflops(Device device, const Options& o);
/// Both limits of `device` (the copy on the GPU, or the host's), for a
/// profile's summary (kernels/profile_trace.h).
kernels::MachineLimits measure_limits(Device device, const Options& o);

void add_options(CLI::App& app, Options& o);
int run(const Options& o);

}  // namespace ember::bench

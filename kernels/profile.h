// The profiler (docs/profiling.md; docs/tips.md #18: measure, then
// optimize). While a Profiler is installed on a thread, every op that thread
// dispatches (kernels/dispatch.h, the op scope) is recorded with its name,
// its tensors' dtypes and shapes, its device, FLOPs and bytes; so are the
// named ranges the layers above open (ProfileRange: autograd's backward
// nodes, the optimizer step, the loader's waits, DDP's all-reduces,
// checkpoint writes, the trainer's steps), and the memory ember holds, as
// counters (the first op on a device starts a new peak there:
// reset_peak_memory_stats). Off, the cost is one branch per op and per range.
//
//     ember::Profiler prof;                    // installed until it goes out of scope
//     for (int i = 0; i < 10; ++i) train_step(model, x, y);
//     write_chrome_trace(prof, "trace.json");  // kernels/profile_trace.h: Perfetto opens it
//     for (const auto& r : prof.rows()) ...    // per op and signature, slowest first
//
// CPU ops are timed on the host around the kernel call. A CUDA op gets two
// events: its launch on the host thread, and its run on the GPU, timed by
// CUDA events recorded on the op's stream around the launch — nothing
// synchronizes per op; the times are read when events() or rows() is first
// asked for after the ops (which waits for them). Only the outermost op is
// recorded when one op's kernel dispatches another.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../core/cuda_context.h"

namespace ember::kernels {

struct OpCall;

/// One op with one signature: its calls, total time and total FLOPs.
struct OpTime {
    std::string name;       ///< "conv2d"
    std::string signature;  ///< "f32 [128, 16, 28, 28], f32 [128, 16, 28, 28], ..." (outputs first)
    int64_t calls = 0;
    double seconds = 0;  ///< on the GPU for a CUDA op, else on the host
    double flops = 0;    ///< as the front counted them; 0 where it does not
};

/// One span of time the profiler saw.
struct TraceEvent {
    std::string name;       ///< "matmul", "backward: matmul", "optimizer.step", "step 20"
    std::string category;   ///< "op", "backward", "optimizer", "loader", "comm", "checkpoint", "step", ...
    std::string signature;  ///< ops: "f32 [8, 3], f32 [8, 5], f32 [5, 3]" (outputs first)
    std::string device;     ///< ops: "cpu", "cuda:0"
    double start_us = 0;    ///< since the profiler started
    double dur_us = 0;
    int track = 0;          ///< an index into Profiler::tracks(): 0 is the host thread
    double flops = 0;       ///< ops: as the front counted them (0: not counted)
    double bytes = 0;       ///< ops: what its tensors occupy, the least it moves
};

/// A sample of counters at one time: "memory cpu" with {"allocated MB", x}, ...
struct CounterEvent {
    std::string name;
    double ts_us = 0;
    std::vector<std::pair<std::string, double>> values;
};

class Profiler {
  public:
    /// Installs this profiler on the calling thread (the previous one, if
    /// any, is restored when this one is destroyed) and starts its clock.
    Profiler();
    ~Profiler();
    Profiler(const Profiler&) = delete;
    Profiler& operator=(const Profiler&) = delete;

    /// Every span so far, in the order they ended (CUDA ops' GPU times read
    /// first, waiting for them).
    const std::vector<TraceEvent>& events();
    const std::vector<CounterEvent>& counters() const { return counters_; }
    /// The timelines events lie on: "host thread", then one per CUDA stream
    /// ("cuda:0 stream 0x..."), in order of first use.
    const std::vector<std::string>& tracks() const { return tracks_; }

    /// The ops so far aggregated per name and signature, the largest total
    /// time first.
    std::vector<OpTime> rows();
    /// Sum of every op's time.
    double total_seconds();
    /// Forgets every event and counter (the clock keeps running).
    void clear();

    /// Microseconds since the profiler started.
    double now_us() const;
    /// A span measured by the caller, on the host thread.
    void add(TraceEvent e);
    /// A counter sample now.
    void counter(std::string name, std::vector<std::pair<std::string, double>> values);

    /// The calling thread's installed profiler, or null.
    static Profiler* active();
    /// Runs `op` (the CPU kernel call of `call`) and records it, unless an op
    /// is already being recorded on this thread (then just runs it).
    void time(const OpCall& call, const std::function<void()>& op);
    /// Runs `launch` (the CUDA kernel call of `call`, queued on `stream`) and
    /// records its launch and, with CUDA events, its run on the GPU.
    void time_cuda(const OpCall& call, StreamRef stream, const std::function<void()>& launch);

  private:
    struct Pending;   // a CUDA op whose GPU time is not read yet
    struct GpuClock;  // a device's reference event and its host time
    void resolve();
    void sample_memory(Device device);
    int stream_track(StreamRef stream);
    TraceEvent op_event(const OpCall& call, double start_us, double dur_us) const;

    std::chrono::steady_clock::time_point start_;
    std::vector<TraceEvent> events_;
    std::vector<CounterEvent> counters_;
    std::vector<std::string> tracks_{"host thread"};
    std::map<CUstream_st*, int> stream_tracks_;
    std::vector<std::unique_ptr<Pending>> pending_;
    std::map<int, std::unique_ptr<GpuClock>> gpu_clocks_;  // per CUDA device index
    std::map<int, size_t> last_allocated_;  // per device: 0 the CPU, 1 + k cuda:k
    Profiler* previous_;
    bool busy_ = false;
};

/// A named span on the installed profiler, from construction to
/// destruction: `ProfileRange r("optimizer", "optimizer.step");`. Without a
/// profiler it is one branch and keeps nothing; `name` is copied (prefixed
/// by `prefix`) only when one is installed.
class ProfileRange {
  public:
    ProfileRange(const char* category, std::string_view name, std::string_view prefix = {});
    ~ProfileRange();
    ProfileRange(const ProfileRange&) = delete;
    ProfileRange& operator=(const ProfileRange&) = delete;

  private:
    Profiler* prof_;
    const char* category_ = nullptr;
    std::string name_;
    double start_us_ = 0;
};

}  // namespace ember::kernels

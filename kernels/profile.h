// Per-op timing (the engine's own profiler, docs/tips.md #18; measure, then
// optimize): while an OpProfiler is installed on a thread, every op that
// thread dispatches (kernels/dispatch.h) is timed and added to a row keyed by
// the op's name and its tensors' dtypes and shapes, so the layers of a model
// come out as separate rows. `ember bench train --breakdown` prints them.
//
//     kernels::OpProfiler prof;        // installed until it goes out of scope
//     train_step(model, x, y);
//     for (const auto& r : prof.rows()) ...   // slowest first
//
// CPU ops are timed on the host around the kernel call. A CUDA op is timed
// from before its launch to the end of a stream synchronization after it:
// profiling serializes the GPU with the host (not counted as a host sync),
// so it is for finding where time goes, not for measuring overlap.
// Only the outermost op is timed when one op's kernel dispatches another.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ember::kernels {

struct OpCall;

/// One op with one signature: its calls, total time and total FLOPs.
struct OpTime {
    std::string name;       ///< "conv2d"
    std::string signature;  ///< "f32 [128, 16, 28, 28], f32 [128, 16, 28, 28], ..." (outputs first)
    int64_t calls = 0;
    double seconds = 0;
    double flops = 0;  ///< as the front counted them; 0 where it does not
};

class OpProfiler {
  public:
    /// Installs this profiler on the calling thread (the previous one, if
    /// any, is restored when this one is destroyed).
    OpProfiler();
    ~OpProfiler();
    OpProfiler(const OpProfiler&) = delete;
    OpProfiler& operator=(const OpProfiler&) = delete;

    /// The rows so far, the largest total time first.
    std::vector<OpTime> rows() const;
    /// Sum of every row's time.
    double total_seconds() const;
    void clear() { rows_.clear(); }

    /// The calling thread's installed profiler, or null.
    static OpProfiler* active();
    /// Runs `op` (the kernel call of `call`) and adds its time to its row,
    /// unless an op is already being timed on this thread (then just runs it).
    void time(const OpCall& call, const std::function<void()>& op);

  private:
    std::map<std::string, OpTime> rows_;  // keyed by name + signature
    OpProfiler* previous_;
    bool busy_ = false;
};

}  // namespace ember::kernels

// CUDA streams and events that ember or a user creates: what the data loader
// needs to copy batches to the GPU on their own stream while the compute
// stream runs (docs/tips.md #3). The types exist in every build; creating one without
// the CUDA backend is an error. Kernels take a StreamRef (core/cuda_context.h).
#pragma once

#include <cstddef>
#include <memory>

#include "cuda_context.h"
#include "device.h"

namespace ember {

/// A CUDA stream of its own (non-blocking with respect to the default stream).
class CudaStream {
public:
    explicit CudaStream(Device device);
    ~CudaStream();
    CudaStream(const CudaStream&) = delete;
    CudaStream& operator=(const CudaStream&) = delete;

    Device device() const { return device_; }
    /// The stream as kernels, copies and events take it.
    StreamRef ref() const { return {device_, handle_}; }
    /// Queues a copy of nbytes (host <-> device, either direction) on this
    /// stream and returns. From pinned host memory the copy is truly
    /// asynchronous; the memory must stay untouched until it completes.
    void copy_async(void* dst, const void* src, size_t nbytes) const;
    /// True when everything queued on the stream has finished; never blocks.
    bool query() const;
    /// Blocks until everything queued has finished, then checks the
    /// device's error flag (as ember::synchronize(ref())).
    void synchronize() const;

private:
    Device device_;
    CUstream_st* handle_ = nullptr;
};

/// A CUDA event: a point in a stream that other streams or the host can wait for.
class CudaEvent {
public:
    /// An event on `device`; with `timing`, it also records a timestamp
    /// (elapsed_ms), which costs a little when recorded.
    explicit CudaEvent(Device device, bool timing = false);
    ~CudaEvent();
    CudaEvent(const CudaEvent&) = delete;
    CudaEvent& operator=(const CudaEvent&) = delete;

    /// Marks the point after everything queued so far on `stream`.
    void record(StreamRef stream);
    /// Makes `stream` wait for this point before its later work, without
    /// blocking the host: e.g. the consumer's current stream
    /// (current_stream(device)), where ember's kernels for it are queued.
    void wait(StreamRef stream) const;
    /// Blocks the host until the point is reached, then checks the device's
    /// error flag (Note [Device error flag]).
    void synchronize() const;
    /// True when the point has been reached (or the event was never
    /// recorded); never blocks.
    bool query() const;
    /// Milliseconds from `start` to `end` (both timing events, recorded and
    /// reached; synchronize on `end` first).
    static double elapsed_ms(const CudaEvent& start, const CudaEvent& end);

private:
    Device device_;
    void* handle_ = nullptr;
};

}  // namespace ember

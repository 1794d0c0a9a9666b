// The per-device CUDA context: this thread's current stream on each device,
// the device's properties, its library handles and workspace, the slot where
// device memory comes from, and its kernel error flag (core/error_flag.h).
// Kernels take a StreamRef, never an `int device`, and never launch on a
// stream nobody chose. The declarations exist in every build; without the
// CUDA backend, asking for a context is an error (core/no_cuda.cpp).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "allocator.h"
#include "caching_allocator.h"
#include "device.h"
#include "error_flag.h"
#include "settings.h"

struct CUstream_st;  // CUDA's stream type: cudaStream_t is CUstream_st*

namespace ember {

/// A CUDA stream as kernels and copies take it: the device it belongs to and
/// CUDA's handle. A null handle is the device's legacy default stream. Does
/// not own the stream; cheap to copy.
struct StreamRef {
    Device device = Device::cuda(0);
    CUstream_st* handle = nullptr;
    friend bool operator==(const StreamRef&, const StreamRef&) = default;
};

/// This thread's current stream on `device` (a CUDA device): where ember's
/// kernels and copies for that device are queued. The device's legacy default
/// stream unless set_current_stream or a StreamGuard chose another.
StreamRef current_stream(Device device);
/// Makes `stream` this thread's current stream on its device.
void set_current_stream(StreamRef stream);

/// Makes `stream` current on its device for the lifetime of the guard, then
/// restores the stream that was current before.
class StreamGuard {
public:
    explicit StreamGuard(StreamRef stream);
    ~StreamGuard();
    StreamGuard(const StreamGuard&) = delete;
    StreamGuard& operator=(const StreamGuard&) = delete;

private:
    StreamRef previous_;
};

/// Makes `device` the CUDA runtime's current device for the lifetime of the
/// guard and restores the previous one after (nothing for the CPU, and
/// nothing when it is already current).
class DeviceGuard {
public:
    explicit DeviceGuard(Device device);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard&) = delete;
    DeviceGuard& operator=(const DeviceGuard&) = delete;

private:
    int previous_ = -1;  // the device to restore; -1: nothing to restore
};

/// Blocks the host until everything queued on `stream` has run, then turns a
/// raised kernel error flag of its device into an ember::Error (Note [Device
/// error flag]).
void synchronize(StreamRef stream);
/// Blocks until every stream of `device` is idle, then checks its error flag.
void synchronize(Device device);

// The process-wide switches (sync-debug, TF32, cuDNN's benchmark and
// deterministic modes) are declared in core/settings.h, included above.

/// Writes the algorithm choices cached on every CUDA device to `path`
/// (atomically: the old file or the new, never a mix), tagged with the
/// device's name. Returns the number of entries written.
size_t save_conv_algorithms(const std::string& path);
/// Reads a file written by save_conv_algorithms into the cache of every CUDA
/// device whose name matches an entry's (entries of other GPUs are skipped),
/// so that a second run does not time again. An Error naming the file and the
/// line for anything malformed, in which case nothing is loaded. Returns the
/// number of (device, entry) pairs loaded.
size_t load_conv_algorithms(const std::string& path);
/// Forgets every cached choice on every device.
void clear_conv_algorithms();

/// The CUDA libraries this build uses and the driver it found, e.g.
/// "runtime 13.0, driver 13.0, cuBLAS 13.1.0, cuDNN 9.19.0" ("driver none"
/// when no driver is installed; "" in a build without CUDA).
std::string cuda_versions();

/// What ember reads off a CUDA device (CudaContext::properties() keeps it).
struct CudaDeviceProperties {
    std::string name;
    int major = 0, minor = 0;             ///< compute capability
    int sm_count = 0;                     ///< multiprocessors
    size_t total_memory = 0;              ///< bytes of device memory
    size_t l2_bytes = 0;                  ///< L2 cache size
    size_t shared_per_block = 0;          ///< shared memory a block gets by default
    size_t shared_per_block_optin = 0;    ///< ... and after raising its dynamic limit
};

/// Reads the properties of cuda:index without creating its context (for
/// listings such as `ember info`); an Error when there is no such device.
CudaDeviceProperties cuda_device_properties(int index);

/// One CUDA device's context, created on first use and kept for the life of
/// the process. Thread-safe. Everything a kernel launcher or a library call
/// needs beyond its arguments lives here, not in globals of its own.
class CudaContext {
public:
    /// The context of cuda:index; an Error when there is no such device.
    static CudaContext& of(int index);
    static CudaContext& of(Device device) { return of(device.index); }
    ~CudaContext();
    CudaContext(const CudaContext&) = delete;
    CudaContext& operator=(const CudaContext&) = delete;

    Device device() const { return Device::cuda(index_); }
    const CudaDeviceProperties& properties() const { return properties_; }

    /// Device memory for a storage, from the caching allocator for use on
    /// this thread's current stream (core/caching_allocator.h; a plain
    /// cudaMalloc with EMBER_CUDA_ALLOC=direct); the deleter returns it. An
    /// Error naming the request and the statistics when the device is out of
    /// memory even after the cache was released.
    Allocation allocate(size_t nbytes);
    /// Marks memory from allocate() as used on `stream` too: it is not reused
    /// until the work queued there before its free has finished.
    void record_stream(void* p, StreamRef stream);
    /// The caching allocator's counters (all zero with EMBER_CUDA_ALLOC=direct).
    CacheStats memory_stats();
    /// Gives every wholly free cached segment back to the driver.
    void empty_cache();

    /// This thread's cuBLAS handle for the device (a cublasHandle_t), created
    /// on first use and bound to `stream` and to the device's workspace.
    void* blas_handle(StreamRef stream);
    /// This thread's cuBLASLt handle for the device (a cublasLtHandle_t),
    /// created on first use; cuBLASLt takes the stream and the workspace
    /// (blas_workspace) with every call.
    void* blas_lt_handle();
    /// The workspace of cuBLAS and cuBLASLt calls queued on `stream`: its
    /// address and size in bytes.
    std::pair<void*, size_t> blas_workspace(StreamRef stream);
    /// This thread's cuDNN handle (a cudnnHandle_t), created on first use and
    /// bound to `stream`; an Error in a build without cuDNN.
    void* dnn_handle(StreamRef stream);
    /// A device buffer of at least `nbytes` for library workspaces, reserved
    /// for work queued on `stream` (grown when a larger one is asked for).
    void* workspace(size_t nbytes, StreamRef stream);
    /// Frees what the context keeps for `stream` (its workspace), after the
    /// work queued on it has finished: called when a CudaStream is destroyed,
    /// so a new stream at the same address starts afresh. Never throws.
    void release_stream(StreamRef stream) noexcept;

    /// The device's kernel error flag (Note [Device error flag]).
    ErrorFlag& error_flag() { return *error_flag_; }

private:
    explicit CudaContext(int index);
    struct Resources;  // handles and workspaces, behind a mutex (core/cuda_context.cpp)

    int index_;
    CudaDeviceProperties properties_;
    std::unique_ptr<ErrorFlag> error_flag_;
    std::unique_ptr<Resources> resources_;
    std::unique_ptr<CachingAllocator> cache_;  // null: EMBER_CUDA_ALLOC=direct
};

/// cuda:N's caching-allocator statistics and cache release (PyTorch's
/// torch.cuda.memory_stats / empty_cache).
CacheStats cuda_memory_stats(Device device);
void cuda_empty_cache(Device device);

}  // namespace ember

// The per-device CUDA context (core/cuda_context.h): current streams, device
// guards, synchronization with the error-flag check, sync-debug mode, device
// memory, library handles and workspaces.
#include "core/cuda_context.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#if EMBER_WITH_CUDNN
#include <cudnn.h>
#endif

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/cuda_check.h"

namespace ember {

namespace {

constexpr int kMaxDevices = 64;
constexpr size_t kBlasWorkspace = size_t(32) << 20;  // cuBLAS's advice for Hopper

// Per thread and device, as PyTorch's getCurrentCUDAStream: null is the
// legacy default stream.
thread_local CUstream_st* t_current[kMaxDevices] = {};

void check_index(int index) {
    static const int n = cuda_device_count();  // devices do not come and go within a process
    EMBER_CHECK(index >= 0 && index < n && index < kMaxDevices, "cuda:", index,
                " is not available (", n, " CUDA device(s) found)");
}

}  // namespace

StreamRef current_stream(Device device) {
    EMBER_CHECK(device.is_cuda(), "current_stream: expected a CUDA device, got ", device);
    check_index(device.index);
    return {device, t_current[device.index]};
}

void set_current_stream(StreamRef stream) {
    EMBER_CHECK(stream.device.is_cuda(), "set_current_stream: expected a CUDA stream, got one on ",
                stream.device);
    check_index(stream.device.index);
    t_current[stream.device.index] = stream.handle;
}

StreamGuard::StreamGuard(StreamRef stream) : previous_(current_stream(stream.device)) {
    set_current_stream(stream);
}

StreamGuard::~StreamGuard() { t_current[previous_.device.index] = previous_.handle; }

DeviceGuard::DeviceGuard(Device device) {
    if (!device.is_cuda()) return;
    int now = -1;
    EMBER_CUDA_CHECK(cudaGetDevice(&now));
    if (now == device.index) return;
    EMBER_CUDA_CHECK(cudaSetDevice(device.index));
    previous_ = now;
}

DeviceGuard::~DeviceGuard() {
    if (previous_ >= 0) cudaSetDevice(previous_);  // destructors do not throw
}

void synchronize(StreamRef stream) {
    const DeviceGuard guard(stream.device);
    EMBER_CUDA_CHECK(cudaStreamSynchronize(stream.handle));
    CudaContext::of(stream.device).error_flag().check();
}

void synchronize(Device device) {
    EMBER_CHECK(device.is_cuda(), "synchronize: expected a CUDA device, got ", device);
    const DeviceGuard guard(device);
    EMBER_CUDA_CHECK(cudaDeviceSynchronize());
    CudaContext::of(device).error_flag().check();
}

std::string cuda_versions() {
    int runtime = 0, driver = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    (void)cudaDriverGetVersion(&driver);
    int blas[3] = {0, 0, 0};
    (void)cublasGetProperty(MAJOR_VERSION, &blas[0]);
    (void)cublasGetProperty(MINOR_VERSION, &blas[1]);
    (void)cublasGetProperty(PATCH_LEVEL, &blas[2]);
    auto major_minor = [](int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); };
    std::string s = "runtime " + major_minor(runtime) + ", driver " +
                    (driver ? major_minor(driver) : std::string("none")) + ", cuBLAS " +
                    std::to_string(blas[0]) + "." + std::to_string(blas[1]) + "." +
                    std::to_string(blas[2]);
#if EMBER_WITH_CUDNN
    const size_t dnn = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
    s += ", cuDNN " + std::to_string(dnn / 10000) + "." + std::to_string(dnn % 10000 / 100) + "." +
         std::to_string(dnn % 100);
#else
    s += ", cuDNN not built in";
#endif
    return s;
}

// ---- The context ----

struct CudaContext::Resources {
    struct Buffer {
        void* ptr = nullptr;
        size_t bytes = 0;
    };
    std::mutex mutex;
    std::map<std::thread::id, cublasHandle_t> blas;  // one per thread: handles are not thread-safe
    std::map<std::thread::id, cublasLtHandle_t> blas_lt;
#if EMBER_WITH_CUDNN
    std::map<std::thread::id, cudnnHandle_t> dnn;
#endif
    std::map<CUstream_st*, Buffer> workspaces;       // one per stream: work on two streams may overlap
};

CudaContext& CudaContext::of(int index) {
    check_index(index);
    // Created once and never destroyed: at exit the CUDA runtime may already
    // be gone when static destructors would run.
    static std::mutex mutex;
    static auto* contexts = new std::vector<CudaContext*>(kMaxDevices, nullptr);
    std::lock_guard<std::mutex> lock(mutex);
    CudaContext*& c = (*contexts)[size_t(index)];
    if (!c) c = new CudaContext(index);
    return *c;
}

CudaDeviceProperties cuda_device_properties(int index) {
    check_index(index);
    cudaDeviceProp p{};
    EMBER_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
    return {p.name,
            p.major,
            p.minor,
            p.multiProcessorCount,
            p.totalGlobalMem,
            size_t(p.l2CacheSize),
            p.sharedMemPerBlock,
            p.sharedMemPerBlockOptin};
}

namespace {

// The CUDA driver under the caching allocator: each call on the context's
// device; out of memory is a null pointer (the allocator retries), any other
// failure an Error.
class CudaDeviceMemory final : public DeviceMemory {
  public:
    explicit CudaDeviceMemory(int index) : index_(index) {}
    void* malloc(size_t bytes) override {
        const DeviceGuard guard(Device::cuda(index_));
        void* p = nullptr;
        const cudaError_t e = cudaMalloc(&p, bytes);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            return nullptr;
        }
        EMBER_CUDA_CHECK(e);
        return p;
    }
    void free(void* p) override {
        const DeviceGuard guard(Device::cuda(index_));
        cudaFree(p);  // runs from deleters: never throws
    }
    size_t free_bytes() override {
        const DeviceGuard guard(Device::cuda(index_));
        size_t free = 0, total = 0;
        (void)cudaMemGetInfo(&free, &total);
        return free;
    }
    Event record(Stream stream) override {
        const DeviceGuard guard(Device::cuda(index_));
        cudaEvent_t e = nullptr;
        EMBER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        EMBER_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream)));
        return e;
    }
    bool query(Event e) override {
        const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
        if (r == cudaErrorNotReady) {
            (void)cudaGetLastError();
            return false;
        }
        EMBER_CUDA_CHECK(r);
        return true;
    }
    void destroy(Event e) override { cudaEventDestroy(static_cast<cudaEvent_t>(e)); }
    std::string name() const override { return "cuda:" + std::to_string(index_); }

  private:
    int index_;
};

bool direct_allocation() {
    const char* v = std::getenv("EMBER_CUDA_ALLOC");
    return v != nullptr && std::strcmp(v, "direct") == 0;
}

}  // namespace

CudaContext::CudaContext(int index)
    : index_(index), properties_(cuda_device_properties(index)),
      resources_(std::make_unique<Resources>()) {
    if (!direct_allocation())
        cache_ = std::make_unique<CachingAllocator>(std::make_unique<CudaDeviceMemory>(index));
    const DeviceGuard guard(device());
    // The error flag: pinned host memory the device writes through unified
    // addressing (Note [Device error flag]).
    void* flag = nullptr;
    EMBER_CUDA_CHECK(cudaHostAlloc(&flag, sizeof(ErrorFlagState),
                                   cudaHostAllocMapped | cudaHostAllocPortable));
    void* on_device = nullptr;
    const cudaError_t e = cudaHostGetDevicePointer(&on_device, flag, 0);
    if (e != cudaSuccess || on_device != flag) {
        cudaFreeHost(flag);
        EMBER_FAIL("cuda:", index, ": pinned host memory is not addressable from the device at ",
                   "the same address (", cudaGetErrorString(e), "); ember needs unified addressing");
    }
    std::memset(flag, 0, sizeof(ErrorFlagState));
    error_flag_ = std::make_unique<ErrorFlag>(static_cast<ErrorFlagState*>(flag),
                                              device().str(),
                                              [](ErrorFlagState* s) { cudaFreeHost(s); });
}

CudaContext::~CudaContext() = default;  // never runs: contexts live as long as the process

Allocation CudaContext::allocate(size_t nbytes) {
    if (nbytes == 0) return {nullptr, {}};
    if (cache_) {
        void* p = cache_->allocate(nbytes, current_stream(device()).handle);
        CachingAllocator* cache = cache_.get();  // contexts live as long as the process
        return {p, [cache](void* q) { cache->free(q); }};
    }
    const DeviceGuard guard(device());
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, nbytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        size_t free = 0, total = 0;
        (void)cudaMemGetInfo(&free, &total);
        EMBER_FAIL("out of memory on cuda:", index_, ": could not allocate ", nbytes, " bytes (",
                   free, " of ", total, " bytes free; ", cudaGetErrorString(e), ")");
    }
    const int index = index_;
    return {p, [index](void* q) {
                const int keep = [] {
                    int d = 0;
                    return cudaGetDevice(&d) == cudaSuccess ? d : -1;
                }();
                cudaSetDevice(index);
                cudaFree(q);  // destructors do not throw
                if (keep >= 0) cudaSetDevice(keep);
            }};
}

void CudaContext::record_stream(void* p, StreamRef stream) {
    EMBER_CHECK(stream.device == device(), "record_stream: a stream of ", stream.device,
                " for memory of ", device());
    if (cache_ && p != nullptr) cache_->record_stream(p, stream.handle);
}

CacheStats CudaContext::memory_stats() { return cache_ ? cache_->stats() : CacheStats{}; }

void CudaContext::empty_cache() {
    if (cache_) cache_->empty_cache();
}

CacheStats cuda_memory_stats(Device device) { return CudaContext::of(device).memory_stats(); }

void cuda_empty_cache(Device device) { CudaContext::of(device).empty_cache(); }

void* CudaContext::workspace(size_t nbytes, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(stream.device == device());
    const DeviceGuard guard(device());
    for (;;) {
        Resources::Buffer old;
        {
            std::lock_guard<std::mutex> lock(resources_->mutex);
            Resources::Buffer& b = resources_->workspaces[stream.handle];
            if (b.bytes >= nbytes) return b.ptr;
            old = std::exchange(b, {});
        }
        // Grow outside the lock: waiting for the stream must not stall other threads.
        if (old.ptr) {
            EMBER_CUDA_CHECK(cudaStreamSynchronize(stream.handle));  // it may still use it
            EMBER_CUDA_CHECK(cudaFree(old.ptr));
        }
        void* p = nullptr;
        EMBER_CUDA_CHECK(cudaMalloc(&p, nbytes));
        std::lock_guard<std::mutex> lock(resources_->mutex);
        Resources::Buffer& b = resources_->workspaces[stream.handle];
        if (!b.ptr) {
            b = {p, nbytes};
            return p;
        }
        cudaFree(p);  // another thread grew it meanwhile: ours was never used; look again
    }
}

void CudaContext::release_stream(StreamRef stream) noexcept {
    Resources::Buffer b;
    {
        std::lock_guard<std::mutex> lock(resources_->mutex);
        auto it = resources_->workspaces.find(stream.handle);
        if (it == resources_->workspaces.end()) return;
        b = it->second;
        resources_->workspaces.erase(it);
    }
    int keep = -1;
    cudaGetDevice(&keep);
    cudaSetDevice(index_);
    cudaStreamSynchronize(stream.handle);
    cudaFree(b.ptr);
    if (keep >= 0) cudaSetDevice(keep);
}

void* CudaContext::blas_handle(StreamRef stream) {
    EMBER_INTERNAL_ASSERT(stream.device == device());
    const DeviceGuard guard(device());
    cublasHandle_t h = nullptr;
    {
        std::lock_guard<std::mutex> lock(resources_->mutex);
        cublasHandle_t& slot = resources_->blas[std::this_thread::get_id()];
        if (!slot)
            EMBER_CHECK(cublasCreate(&slot) == CUBLAS_STATUS_SUCCESS, "cuda:", index_,
                        ": cublasCreate failed");
        h = slot;
    }
    EMBER_CHECK(cublasSetStream(h, stream.handle) == CUBLAS_STATUS_SUCCESS, "cuda:", index_,
                ": cublasSetStream failed");
    void* ws = workspace(kBlasWorkspace, stream);
    EMBER_CHECK(cublasSetWorkspace(h, ws, kBlasWorkspace) == CUBLAS_STATUS_SUCCESS, "cuda:",
                index_, ": cublasSetWorkspace failed");
    return h;
}

void* CudaContext::blas_lt_handle() {
    const DeviceGuard guard(device());
    std::lock_guard<std::mutex> lock(resources_->mutex);
    cublasLtHandle_t& slot = resources_->blas_lt[std::this_thread::get_id()];
    if (!slot)
        EMBER_CHECK(cublasLtCreate(&slot) == CUBLAS_STATUS_SUCCESS, "cuda:", index_,
                    ": cublasLtCreate failed");
    return slot;
}

std::pair<void*, size_t> CudaContext::blas_workspace(StreamRef stream) {
    EMBER_INTERNAL_ASSERT(stream.device == device());
    return {workspace(kBlasWorkspace, stream), kBlasWorkspace};
}

void* CudaContext::dnn_handle(StreamRef stream) {
    EMBER_INTERNAL_ASSERT(stream.device == device());
#if EMBER_WITH_CUDNN
    const DeviceGuard guard(device());
    cudnnHandle_t h = nullptr;
    {
        std::lock_guard<std::mutex> lock(resources_->mutex);
        cudnnHandle_t& slot = resources_->dnn[std::this_thread::get_id()];
        if (!slot)
            EMBER_CHECK(cudnnCreate(&slot) == CUDNN_STATUS_SUCCESS, "cuda:", index_,
                        ": cudnnCreate failed");
        h = slot;
    }
    EMBER_CHECK(cudnnSetStream(h, stream.handle) == CUDNN_STATUS_SUCCESS, "cuda:", index_,
                ": cudnnSetStream failed");
    return h;
#else
    EMBER_FAIL("cuda:", index_, ": ember was built without cuDNN (configure with cuDNN installed, "
               "or CUDNN_ROOT pointing at it)");
#endif
}

}  // namespace ember

// Temporary device memory for one CUDA op: a split reduction's partials,
// per-channel constants, a converted weight. Plain C++ (the kernels' .cu
// files and their host plans include it).
#pragma once

#include <cstddef>

#include "../../core/allocator.h"
#include "../../core/cuda_context.h"

namespace ember::kernels::cuda {

/// `bytes` of device memory from the caching allocator for work queued on
/// `stream`, returned when the Workspace goes out of scope — which may be
/// right after the launches that use it are queued: the allocator reuses a
/// block only for work queued after the free on the same stream
/// (docs/cuda.md). Zero bytes: no memory, as() is null.
class Workspace {
public:
    Workspace(StreamRef stream, size_t bytes) {
        if (bytes == 0) return;
        const StreamGuard guard(stream);  // the allocator serves the current stream
        a_ = CudaContext::of(stream.device).allocate(bytes);
    }
    ~Workspace() {
        if (a_.ptr != nullptr) a_.deleter(a_.ptr);
    }
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;

    template <class T>
    T* as() const {
        return static_cast<T*>(a_.ptr);
    }

private:
    Allocation a_;
};

}  // namespace ember::kernels::cuda

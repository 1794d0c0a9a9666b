// The out-of-line parts of the op scope (kernels/dispatch.h).
#include "kernels/dispatch.h"

#include "kernels/front.h"

namespace ember::kernels {

double op_bytes(const OpCall& call) {
    if (call.bytes > 0) return call.bytes;
    double bytes = 0;
    for (const Tensor* t : call.tensors)
        if (t && t->defined()) bytes += double(t->numel()) * double(t->element_size());
    return bytes;
}

std::string describe(const OpCall& call) {
    std::string s = std::string(call.name) + "(";
    bool first = true;
    for (const Tensor* t : call.tensors) {
        if (!t) continue;
        s += (first ? "" : ", ") + describe(*t);
        first = false;
    }
    return s + ")";
}

void run_profiled(Profiler& prof, const OpCall& call, StreamRef stream,
                  const std::function<void()>& launch) {
    prof.time_cuda(call, stream, launch);
}

void unsupported_device(const char* op, Device d) {
    if (d.is_cuda() && !cuda_built())
        EMBER_FAIL(op, ": tensor is on ", d, " but ember was built without CUDA");
    EMBER_FAIL(op, ": not implemented for ", d);
}

void run_sync_debug(const OpCall& call, StreamRef stream, const std::function<void()>& launch) {
    try {
        launch();
        synchronize(stream);  // surfaces asynchronous errors and a raised error flag
    } catch (const Error& e) {
        EMBER_FAIL("sync-debug: ", describe(call), " failed: ", e.what());
    }
}

}  // namespace ember::kernels

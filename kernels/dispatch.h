// The one switch on the device. A front function (kernels/<family>.cpp)
// checks its arguments, allocates, builds its views and argument struct, and
// then makes exactly one call:
//
//     dispatch({"relu", out.device(), {&out, &x}},
//              [&] { cpu::unary(UnaryOp::relu, o, i); },
//              [&](auto stream) { cuda::unary(UnaryOp::relu, o, i, stream); });
//
// dispatch() opens the op scope and runs the entry point of the call's
// device: on CUDA with the device made current (DeviceGuard) and this
// thread's current stream of that device. With backend_choice (a backend's
// policy, asked before the front allocates) it is the only place in kernels/
// that names EMBER_WITH_CUDA or tests a device, and the one place where the profiler
// (kernels/profile.h) and the sync-debug check live (one branch each when off). See
// docs/architecture.md, "One op, end to end".
#pragma once

#include <functional>
#include <initializer_list>
#include <type_traits>

#include "../core/cuda_context.h"
#include "../core/tensor.h"
#include "profile.h"

namespace ember::kernels {

/// What the op scope knows of one call: the op's name, the device it runs
/// on, its tensors (outputs first; for messages, the profiler and the byte
/// count), its FLOPs where the front knows them, and its bytes where its
/// tensors do not say them (a multi-tensor update). Built as a temporary in
/// the dispatch() call and valid only during it: the list and the pointers
/// die with the call, so whatever keeps a record (a profiler) copies it.
struct OpCall {
    const char* name;
    Device device;
    std::initializer_list<const Tensor*> tensors = {};
    double flops = 0;
    double bytes = 0;  ///< 0: what `tensors` occupy (op_bytes)
};

/// The bytes the front counted, or those the call's tensors occupy: what a
/// memory-bound op moves at least.
double op_bytes(const OpCall& call);
/// "relu(f32 [2, 3] on cuda:0, f32 [2, 3] on cuda:0)", for messages.
std::string describe(const OpCall& call);

/// Passed instead of an entry point that does not exist (yet): the CUDA
/// kernel of an op that has none, or the CPU side of a call that is on a
/// CUDA device by construction. dispatch() then reports the op as not
/// implemented for the device.
struct NoKernel {};
inline constexpr NoKernel no_kernel{};

/// Error for a device the op has no kernel for (built without CUDA, say).
[[noreturn]] void unsupported_device(const char* op, Device d);

/// A CUDA op in sync-debug mode: runs `launch`, synchronizes `stream`, and
/// turns any error — of the launch itself, an asynchronous CUDA error, a
/// raised error flag — into an ember::Error naming the call.
void run_sync_debug(const OpCall& call, StreamRef stream, const std::function<void()>& launch);
/// A CUDA op under a Profiler: records its launch, and its run on the GPU
/// with CUDA events on `stream` (kernels/profile.h).
void run_profiled(Profiler& prof, const OpCall& call, StreamRef stream,
                  const std::function<void()>& launch);

// Note [CUDA entry points as generic lambdas]
// The CUDA entry point is written `[&](auto stream) { cuda::op(..., stream); }`.
// A generic lambda's body is instantiated only when it is called, and
// dispatch() calls it only in CUDA builds: a build without CUDA needs the
// declarations of kernels/cuda/<family>.h (plain C++) but never their
// definitions, so the fronts carry no #if of their own.

/// Runs `on_cpu()` or `on_cuda(stream)` for the call's device, inside the op
/// scope. Either may be no_kernel.
template <class Cpu, class Cuda>
void dispatch(const OpCall& call, Cpu&& on_cpu, Cuda&& on_cuda) {
    switch (call.device.type) {
        case DeviceType::cpu:
            if constexpr (!std::is_same_v<std::decay_t<Cpu>, NoKernel>) {
                if (Profiler* prof = Profiler::active()) [[unlikely]]
                    prof->time(call, on_cpu);
                else
                    on_cpu();
                return;
            }
            break;
        case DeviceType::cuda:
#if EMBER_WITH_CUDA
            if constexpr (!std::is_same_v<std::decay_t<Cuda>, NoKernel>) {
                const DeviceGuard guard(call.device);
                const StreamRef stream = current_stream(call.device);
                if (sync_debug()) [[unlikely]]
                    run_sync_debug(call, stream, [&] { on_cuda(stream); });
                else if (Profiler* prof = Profiler::active()) [[unlikely]]
                    run_profiled(*prof, call, stream, [&] { on_cuda(stream); });
                else
                    on_cuda(stream);
                return;
            }
#endif
            break;
    }
    unsupported_device(call.name, call.device);
}

/// A backend's answer for `device` to a front's question about the op `op`
/// — its policy: the dtype it computes in, the layout it reads, whether a
/// fused path applies (kernels/cpu/policy.h, kernels/cuda/policy.h). Fronts
/// ask it before they allocate, so that none names a device. Nothing runs
/// and no op scope opens. `on_cuda` is a generic lambda (Note [CUDA entry
/// points as generic lambdas]), called with the device; both return one type.
template <class Cpu, class Cuda>
auto backend_choice(const char* op, Device device, Cpu&& on_cpu, Cuda&& on_cuda) {
    switch (device.type) {
        case DeviceType::cpu:
            return on_cpu();
        case DeviceType::cuda:
#if EMBER_WITH_CUDA
            return on_cuda(device);
#endif
            break;
    }
    unsupported_device(op, device);
}

}  // namespace ember::kernels

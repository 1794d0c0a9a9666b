// How a kernel reports bad data (an out-of-range class index, gather index or
// pooling index) without trapping: Note [Device error flag].
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>

#include "macros.h"

namespace ember {

// Note [Device error flag]
// A CUDA kernel cannot throw, and a trap (__trap, a failed device assert)
// poisons the whole CUDA context: every later call fails and the process
// must restart. So a kernel that checks values it reads (class targets,
// gather and embedding indices, max-pool indices) gets an ErrorFlagRef, and
// on a bad value calls raise_error() and skips that element. The first raise
// wins (compare-and-swap on the ticket); later ones are dropped.
//
// The flag lives in pinned host memory mapped into the device's address
// space, so the host reads it without a copy. Nothing waits for it: the host
// reads it at the next point where it synchronizes with the device anyway —
// a blocking copy to the host (item(), to(cpu)), synchronize() — and turns a
// raised flag into an ember::Error naming the op, what was bad, the value and
// where. In sync-debug mode (docs/tips.md #2) the check runs after every op.
//
// Several launches may run between two checks, so each launch that can raise
// first arms a ticket: the host remembers the op's name, what its checked
// values are and their valid range under that ticket, and the kernel writes
// the ticket with the bad value. The most recent kRemembered tickets are
// kept; an older one still raises an error, with less detail.
//
// A check may come after waiting for one stream while kernels on another
// still run, so nothing assumes every armed launch has finished: a raise is
// published in two steps (claim the ticket, write the value and position,
// then mark it ready), and check() reports only a ready one — one still
// being written is left for the next check. Tickets are never forgotten
// early: a launch still running when a check passes keeps its name.
//
// The same protocol works for a loop on the CPU over ordinary memory (the
// tests use it that way); ember's CPU kernels check before writing instead,
// which leaves the output untouched.

/// The words a kernel writes. Zero-initialized means "not raised".
struct ErrorFlagState {
    int32_t ticket;  ///< 0: not raised; else the ticket of the first raising launch
    int32_t ready;   ///< that ticket again once index and value are written
    int64_t index;   ///< where the bad value was: a flat position the op documents
    int64_t value;   ///< the bad value
};

/// What a kernel receives: where to write, and the ticket of its launch.
struct ErrorFlagRef {
    ErrorFlagState* state = nullptr;
    int32_t ticket = 0;
};

/// Records `value` found at `index` unless another raise came first. Callable
/// from device code and from any number of host threads.
EMBER_HD inline void raise_error(ErrorFlagRef flag, int64_t index, int64_t value) {
#if defined(__CUDA_ARCH__)
    if (atomicCAS(&flag.state->ticket, 0, flag.ticket) == 0) {
        flag.state->index = index;
        flag.state->value = value;
        __threadfence_system();  // the value reaches host memory before `ready`
        atomicExch(&flag.state->ready, flag.ticket);
    }
#else
    int32_t expected = 0;
    if (__atomic_compare_exchange_n(&flag.state->ticket, &expected, flag.ticket, false,
                                    __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        flag.state->index = index;
        flag.state->value = value;
        __atomic_store_n(&flag.state->ready, flag.ticket, __ATOMIC_RELEASE);
    }
#endif
}

/// The host side of one flag: arms tickets and turns a raised flag into an
/// ember::Error. One per CUDA device (in its context); thread-safe.
class ErrorFlag {
public:
    static constexpr size_t kRemembered = 4096;

    /// A flag over `state` (memory kernels can write, zeroed), named by
    /// `where` in messages ("cuda:0"); `release` frees the memory at the end.
    ErrorFlag(ErrorFlagState* state, std::string where,
              std::function<void(ErrorFlagState*)> release = {});
    ~ErrorFlag();
    ErrorFlag(const ErrorFlag&) = delete;
    ErrorFlag& operator=(const ErrorFlag&) = delete;

    /// Arms a ticket for one launch of `op` whose checked values (`what`:
    /// "target", "index") must lie in [0, bound). Pass the result to the kernel.
    ErrorFlagRef arm(const char* op, const char* what, int64_t bound);

    /// Throws the raised error, if any, as an ember::Error and clears the
    /// flag, so later launches can raise again. Call where the host has just
    /// synchronized with the device (or a stream of it): a raise published
    /// after that is reported by the next check.
    void check();

private:
    struct Armed {
        int32_t ticket;
        const char* op;
        const char* what;
        int64_t bound;
    };
    std::mutex mutex_;
    ErrorFlagState* state_;
    std::string where_;
    std::function<void(ErrorFlagState*)> release_;
    std::deque<Armed> armed_;  // the most recent kRemembered, oldest first
    int32_t next_ticket_ = 1;
};

}  // namespace ember

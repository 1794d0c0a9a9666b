// The process-wide switches (core/settings.h): the one definition of each.
#include "core/settings.h"

#include <strings.h>

#include <atomic>
#include <cstdlib>

namespace ember {

namespace {

// EMBER_SYNC_DEBUG set to anything but "", 0, false, off or no.
bool sync_debug_from_env() {
    const char* v = std::getenv("EMBER_SYNC_DEBUG");
    if (v == nullptr) return false;
    for (const char* off : {"", "0", "false", "off", "no"})
        if (strcasecmp(v, off) == 0) return false;
    return true;
}

// Function-local statics: initialized on first use, so a setting read while
// other globals are constructed is already there.
std::atomic<bool>& sync_debug_flag() {
    static std::atomic<bool> on{sync_debug_from_env()};
    return on;
}
std::atomic<bool>& tf32_flag() {
    static std::atomic<bool> on{false};
    return on;
}
std::atomic<bool>& benchmark_flag() {
    static std::atomic<bool> on{true};
    return on;
}
std::atomic<bool>& deterministic_flag() {
    static std::atomic<bool> on{false};
    return on;
}

}  // namespace

void set_sync_debug(bool on) { sync_debug_flag().store(on, std::memory_order_relaxed); }
bool sync_debug() { return sync_debug_flag().load(std::memory_order_relaxed); }
void set_allow_tf32(bool on) { tf32_flag().store(on, std::memory_order_relaxed); }
bool allow_tf32() { return tf32_flag().load(std::memory_order_relaxed); }
void set_cudnn_benchmark(bool on) { benchmark_flag().store(on, std::memory_order_relaxed); }
bool cudnn_benchmark() { return benchmark_flag().load(std::memory_order_relaxed); }
void set_cudnn_deterministic(bool on) { deterministic_flag().store(on, std::memory_order_relaxed); }
bool cudnn_deterministic() { return deterministic_flag().load(std::memory_order_relaxed); }

}  // namespace ember

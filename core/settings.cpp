// The process-wide switches (core/settings.h): the one definition of each.
#include "core/settings.h"

#include <strings.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

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

// EMBER_CPU_BF16: auto (or unset, or ""), native or emulated.
CpuBf16 cpu_bf16_from_env() {
    const char* v = std::getenv("EMBER_CPU_BF16");
    if (v == nullptr || *v == 0 || strcasecmp(v, "auto") == 0) return CpuBf16::automatic;
    if (strcasecmp(v, "native") == 0) return CpuBf16::native;
    if (strcasecmp(v, "emulated") == 0) return CpuBf16::emulated;
    EMBER_FAIL("EMBER_CPU_BF16 must be auto, native or emulated, got \"", v, "\"");
}
std::atomic<CpuBf16>& cpu_bf16_mode() {
    static std::atomic<CpuBf16> mode{cpu_bf16_from_env()};
    return mode;
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

bool cpu_has_avx512_bf16() {
#if defined(__x86_64__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}
void set_cpu_bf16(CpuBf16 mode) {
    EMBER_CHECK(mode != CpuBf16::native || cpu_has_avx512_bf16(),
                "set_cpu_bf16: native bf16 products need AVX512_BF16, which this CPU lacks");
    cpu_bf16_mode().store(mode, std::memory_order_relaxed);
}
CpuBf16 cpu_bf16() { return cpu_bf16_mode().load(std::memory_order_relaxed); }
bool cpu_bf16_native() {
    static const bool has = cpu_has_avx512_bf16();
    const CpuBf16 mode = cpu_bf16();
    EMBER_CHECK(mode != CpuBf16::native || has,
                "EMBER_CPU_BF16=native: native bf16 products need AVX512_BF16, which this CPU lacks");
    return has && mode != CpuBf16::emulated;
}

}  // namespace ember

// The process-wide switches (core/settings.h): their defaults in a fresh
// process, and each setter changing its own switch and no other; the CPU's
// bf16 path forced either way.
#include "core/settings.h"

#include <array>
#include <cstdlib>

#include "support/support.h"

using namespace ember;

namespace {

std::array<bool, 4> all() { return {sync_debug(), allow_tf32(), cudnn_benchmark(), cudnn_deterministic()}; }

void set_all(const std::array<bool, 4>& v) {
    set_sync_debug(v[0]);
    set_allow_tf32(v[1]);
    set_cudnn_benchmark(v[2]);
    set_cudnn_deterministic(v[3]);
}

}  // namespace

TEST_CASE("the process-wide switches: defaults, and each setter its own", "[settings]") {
    const std::array<bool, 4> saved = all();
    // No other test of test_core changes them: these are the defaults (the
    // environment may turn sync-debug on).
    const char* env = std::getenv("EMBER_SYNC_DEBUG");
    if (env == nullptr) CHECK(saved == std::array<bool, 4>{false, false, true, false});
    for (int k = 0; k < 4; ++k) {
        INFO("switch " << k);
        std::array<bool, 4> v = {false, false, false, false};
        set_all(v);
        v[size_t(k)] = true;
        switch (k) {
            case 0: set_sync_debug(true); break;
            case 1: set_allow_tf32(true); break;
            case 2: set_cudnn_benchmark(true); break;
            case 3: set_cudnn_deterministic(true); break;
        }
        CHECK(all() == v);
    }
    set_all(saved);
    CHECK(all() == saved);
}

TEST_CASE("how the CPU multiplies bf16: automatic by default, forced either way", "[settings]") {
    const CpuBf16 saved = cpu_bf16();
    const std::array<bool, 4> others = all();
    if (std::getenv("EMBER_CPU_BF16") == nullptr) CHECK(saved == CpuBf16::automatic);
    set_cpu_bf16(CpuBf16::automatic);
    CHECK(cpu_bf16_native() == cpu_has_avx512_bf16());
    set_cpu_bf16(CpuBf16::emulated);
    CHECK(cpu_bf16() == CpuBf16::emulated);
    CHECK_FALSE(cpu_bf16_native());
    if (cpu_has_avx512_bf16()) {
        set_cpu_bf16(CpuBf16::native);
        CHECK(cpu_bf16_native());
    } else {
        CHECK_THROWS_WITH(set_cpu_bf16(CpuBf16::native), Catch::Contains("AVX512_BF16"));
        CHECK(cpu_bf16() == CpuBf16::emulated);  // unchanged by the refused setting
    }
    CHECK(all() == others);  // the other switches are not this one's
    set_cpu_bf16(saved);
    CHECK(cpu_bf16() == saved);
}

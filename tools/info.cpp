// `ember info`: what this build of ember is and what it can see.
#include <omp.h>

#include <cstdio>
#include <string>
#include <thread>

#include "core/cuda_context.h"
#include "core/device.h"
#include "core/error.h"
#include "core/settings.h"
#include "ember_build_info.h"
#include "tools/commands.h"

namespace ember::cli {

namespace {

std::string cpu_features() {
    std::string f;
#if defined(__x86_64__)
    __builtin_cpu_init();
    const char* names[] = {"sse4.2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl",
                           "avx512bf16", "f16c"};
    for (const char* n : names) {
        bool on = false;
        const std::string s = n;
        if (s == "sse4.2") on = __builtin_cpu_supports("sse4.2");
        else if (s == "avx") on = __builtin_cpu_supports("avx");
        else if (s == "avx2") on = __builtin_cpu_supports("avx2");
        else if (s == "fma") on = __builtin_cpu_supports("fma");
        else if (s == "avx512f") on = __builtin_cpu_supports("avx512f");
        else if (s == "avx512bw") on = __builtin_cpu_supports("avx512bw");
        else if (s == "avx512vl") on = __builtin_cpu_supports("avx512vl");
        else if (s == "avx512bf16") on = __builtin_cpu_supports("avx512bf16");
        else if (s == "f16c") on = __builtin_cpu_supports("f16c");
        if (on) f += (f.empty() ? "" : " ") + s;
    }
#endif
    return f.empty() ? "(none detected)" : f;
}

void print_cuda() {
    if (!cuda_built()) {
        std::printf("  devices: none (ember was built without the CUDA backend: no nvcc found, "
                    "or EMBER_CUDA=OFF)\n");
        return;
    }
    std::printf("  built with CUDA %s for architectures %s\n", EMBER_CUDA_COMPILER_VERSION,
                EMBER_CUDA_ARCHS);
    std::printf("  libraries: %s\n", cuda_versions().c_str());
    const int n = cuda_device_count();
    std::printf("  devices: %d\n", n);
    for (int i = 0; i < n; ++i) {
        CudaDeviceProperties p;
        try {
            p = cuda_device_properties(i);
        } catch (const Error& e) {
            std::printf("  cuda:%d  unreadable: %s\n", i, e.what());
            continue;
        }
        std::printf("  cuda:%d  %s  sm_%d%d  %.1f GiB  %d SMs  L2 %.0f MiB  smem/block %zu KiB\n",
                    i, p.name.c_str(), p.major, p.minor, double(p.total_memory) / (1 << 30),
                    p.sm_count, double(p.l2_bytes) / (1 << 20), p.shared_per_block_optin / 1024);
    }
}

}  // namespace

int run_info() {
    std::printf("ember %s\n", EMBER_VERSION);
    std::printf("build: %s, %s, -march=native %s, sanitizers: %s, CUDA backend: %s\n",
                EMBER_BUILD_TYPE, EMBER_CXX_COMPILER, EMBER_NATIVE_ENABLED,
                EMBER_SANITIZERS[0] ? EMBER_SANITIZERS : "none", cuda_built() ? "on" : "off");
    std::printf("cpu: %u hardware threads, %d OpenMP threads; features: %s\n",
                std::thread::hardware_concurrency(), omp_get_max_threads(), cpu_features().c_str());
    const char* bf16 = cpu_bf16_native()
                           ? "native (AVX512_BF16: VDPBF16PS, two products per f32 lane)"
                       : cpu_has_avx512_bf16()
                           ? "emulated (EMBER_CPU_BF16=emulated: f32 FMAs, no faster than f32)"
                           : "emulated (no AVX512_BF16 on this CPU: f32 FMAs, no faster than f32)";
    std::printf("cpu bf16 products: %s\n", bf16);
    std::printf("cuda:\n");
    print_cuda();
    return 0;
}

}  // namespace ember::cli

// `ember info`: what this build of ember is and what it can see.
#include <omp.h>

#include <cstdio>
#include <string>
#include <thread>

#include "core/device.h"
#include "ember_build_info.h"
#include "tools/commands.h"

#if EMBER_WITH_CUDA
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn_version.h>
#include <nccl.h>
#endif

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
#if EMBER_WITH_CUDA
    std::printf("  built against: CUDA %s, cuBLAS %d.%d.%d, cuDNN %d.%d.%d, NCCL %d.%d.%d\n",
                EMBER_CUDA_COMPILER_VERSION, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH,
                CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    std::printf("  architectures: %s\n", EMBER_CUDA_ARCHS);
    int driver = 0;
    cudaDriverGetVersion(&driver);
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        std::printf("  devices: none (%s%s)\n", cudaGetErrorString(e),
                    driver == 0 ? "; no CUDA driver is installed" : "");
        return;
    }
    std::printf("  driver: %d.%d, devices: %d\n", driver / 1000, (driver % 1000) / 10, n);
    for (int i = 0; i < n; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        std::printf("  cuda:%d  %s  sm_%d%d  %.1f GiB  %d SMs  L2 %.0f MiB\n", i, p.name, p.major,
                    p.minor, double(p.totalGlobalMem) / (1 << 30), p.multiProcessorCount,
                    double(p.l2CacheSize) / (1 << 20));
    }
#else
    std::printf("  devices: none (ember was built without the CUDA backend: no nvcc found, "
                "or EMBER_CUDA=OFF)\n");
#endif
}

}  // namespace

int run_info() {
    std::printf("ember %s\n", EMBER_VERSION);
    std::printf("build: %s, %s, -march=native %s, sanitizers: %s, CUDA backend: %s\n",
                EMBER_BUILD_TYPE, EMBER_CXX_COMPILER, EMBER_NATIVE_ENABLED,
                EMBER_SANITIZERS[0] ? EMBER_SANITIZERS : "none", cuda_built() ? "on" : "off");
    std::printf("cpu: %u hardware threads, %d OpenMP threads; features: %s\n",
                std::thread::hardware_concurrency(), omp_get_max_threads(), cpu_features().c_str());
    std::printf("cuda:\n");
    print_cuda();
    return 0;
}

}  // namespace ember::cli

// Main of the CUDA test binary: exits with kSkip (registered with CTest as
// SKIP_RETURN_CODE) when no CUDA device is usable, so CTest reports the CUDA
// tests as skipped, not passed, on machines without a GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "core/device.h"

namespace {
constexpr int kSkip = 77;
}

int main(int argc, char** argv) {
    if (ember::cuda_device_count() == 0) {
        std::printf("no CUDA device: CUDA tests skipped\n");
        return kSkip;
    }
    return Catch::Session().run(argc, argv);
}

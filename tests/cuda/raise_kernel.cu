// A test kernel that checks values against [0, bound) and raises the device
// error flag on the first bad one, as the data-checking kernels do.
#include "core/cuda_check.h"
#include "tests/cuda/raise_kernel.h"

namespace ember::test {

namespace {
__global__ void check_kernel(const int64_t* values, int64_t n, int64_t bound, ErrorFlagRef flag) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x)
        if (values[i] < 0 || values[i] >= bound) raise_error(flag, i, values[i]);
}
}  // namespace

void launch_check_kernel(const int64_t* values, int64_t n, int64_t bound, ErrorFlagRef flag,
                         StreamRef stream) {
    check_kernel<<<64, 256, 0, stream.handle>>>(values, n, bound, flag);
    EMBER_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ember::test

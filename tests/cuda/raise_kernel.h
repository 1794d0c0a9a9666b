// A test kernel for the device error flag (tests/cuda/raise_kernel.cu).
#pragma once

#include <cstdint>

#include "core/cuda_context.h"
#include "core/error_flag.h"

namespace ember::test {

/// Raises `flag` at the first i with values[i] outside [0, bound), on `stream`.
void launch_check_kernel(const int64_t* values, int64_t n, int64_t bound, ErrorFlagRef flag,
                         StreamRef stream);

}  // namespace ember::test

// Checked CUDA runtime calls (only included by files built with the CUDA backend).
#pragma once

#include <cuda_runtime_api.h>

#include "error.h"

/// Turns a failing CUDA runtime call into an ember::Error naming the call.
#define EMBER_CUDA_CHECK(call)                                                        \
    do {                                                                              \
        const cudaError_t ember_err_ = (call);                                        \
        if (ember_err_ != cudaSuccess)                                                \
            EMBER_FAIL("CUDA error in ", #call, ": ", cudaGetErrorName(ember_err_), \
                       " (", cudaGetErrorString(ember_err_), ")");                    \
    } while (0)

// Random tensors from the Philox stream. The layout of the stream (which
// counter block and word feeds element i) is the contract in docs/rng.md;
// CPU and CUDA follow it exactly.
#pragma once

#include <cstdint>

#include "../core/cuda_context.h"
#include "../core/generator.h"
#include "view.h"

namespace ember::kernels {

/// Philox blocks a draw of n elements of `dtype` consumes.
uint64_t uniform_blocks(int64_t n, DType dtype);
uint64_t normal_blocks(int64_t n);
uint64_t randint_blocks(int64_t n, uint64_t range);

namespace cpu {
/// out[i] = low + (high - low) * U_i, U_i in [0, 1) (contiguous out, floating dtype).
void uniform(const View& out, uint64_t seed, uint64_t first_block, double low, double high);
/// out[i] = mean + std * N_i by Box-Muller (contiguous out, floating dtype).
void normal(const View& out, uint64_t seed, uint64_t first_block, double mean, double std);
/// out[i] = low + an integer in [0, range) (contiguous out, any non-bool dtype).
void randint(const View& out, uint64_t seed, uint64_t first_block, int64_t low, uint64_t range);
}  // namespace cpu

namespace cuda {
void uniform(const View& out, uint64_t seed, uint64_t first_block, double low, double high,
             StreamRef stream);
void normal(const View& out, uint64_t seed, uint64_t first_block, double mean, double std,
            StreamRef stream);
void randint(const View& out, uint64_t seed, uint64_t first_block, int64_t low, uint64_t range,
             StreamRef stream);
}  // namespace cuda

}  // namespace ember::kernels

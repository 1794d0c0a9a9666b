// ember's f32 GEMM on the CPU (kernels/cpu/gemm.cpp): packed panels and a
// 6 × 64 register tile, what cpu::matmul runs for f32 (Eigen keeps f64 and
// the integers).
#pragma once

#include <cstdint>

#include "../matmul_args.h"

namespace ember::kernels::cpu {

/// What happens to each finished tile of c while it is still in the cache:
/// the linear layer's bias and activation.
struct GemmEpilogue {
    const float* bias = nullptr;  ///< [N], added to every row (before the K sum's blocks)
    LinearActivation act = LinearActivation::none;
    void* pre = nullptr;  ///< gelu_tanh: the pre-activation [M, N] in c's dtype, leading dimension ld_pre
    int64_t ld_pre = 0;
    /// When set: each row's sum of a, Σ_k a(i, k), in f64 in k order (written,
    /// M values) — a linear layer's bias gradient while its weight gradient
    /// gᵀ · x is computed, from the g that packing reads anyway.
    double* a_row_sums = nullptr;
};

/// c[M×N] (= or +=) a[M×K] · b[K×N]: a and b row- or column-major with any
/// leading dimension (MatrixLayout), c row-major with leading dimension ldc.
/// K = 0 writes zeros (or leaves c alone when accumulating). Threads split
/// the output's rows (OpenMP; one thread inside a parallel region); every
/// element sums its K products in the same order whatever the thread count.
/// With `ep` (not accumulating): c = act(bias + a · b), the bias being the
/// starting value of the sum (bit for bit what a bias copied into c and an
/// accumulating product give); and a's row sums when asked for.
void gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, MatrixLayout la, const float* b,
              MatrixLayout lb, float* c, int64_t ldc, bool accumulate,
              const GemmEpilogue* ep = nullptr);

}  // namespace ember::kernels::cpu

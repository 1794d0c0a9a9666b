// What the CUDA backend takes, for the fronts that ask before they allocate
// (kernels/cpu/policy.h has the CPU's answers to the same questions): cuBLAS
// and cuDNN read f16/bf16 as they are and accumulate in f32, cuBLAS
// multiplies no integers and reads an operand in place where a leading dim
// describes it, cuDNN takes NHWC operands and filters for every dtype but
// f64, batch norm reads a channels-last x as rows of channels. Plain C++:
// every build sees these definitions.
#pragma once

#include <cstdint>

#include "../../core/dtype.h"
#include "../conv_args.h"
#include "matmul_plan.h"

namespace ember::kernels::cuda {

/// The dtype matmul computes in: each dtype as it is.
inline DType matmul_dtype(DType dt) { return dt; }
/// The dtype conv2d computes in: each dtype as it is.
inline DType product_dtype(DType dt) { return dt; }

/// Whether matmul multiplies this dtype: cuBLAS takes f32, f64, f16 and bf16.
inline bool matmul_takes(DType dt) { return is_floating(dt); }

/// Whether cuBLAS reads a [rows, cols] operand with these strides in place
/// (blas_matrix: Note [Row-major products on column-major cuBLAS]).
inline bool gemm_reads_in_place(int64_t rows, int64_t cols, int64_t row_stride,
                                int64_t col_stride) {
    return blas_matrix(rows, cols, row_stride, col_stride).has_value();
}

/// conv2d of dtype dt: computed as it is; a channels-last input read as it
/// lies (cuDNN's NHWC formats, all dtypes but f64), its filter then the
/// weight's channels-last memory (OHWI).
inline ConvPlan conv2d_plan(DType dt, bool channels_last) {
    const bool native = channels_last && dt != DType::f64;
    return {dt, native, native};
}

/// Batch norm reads a channels-last x as [N·H·W, C, 1]: whole rows of C
/// channels (kernels/cuda/batch_norm.cu).
inline bool batch_norm_channels_last_rows() { return true; }

/// adaptive_avg_pool2d_backward writes contiguous planes in the accumulation
/// type, whatever the input's layout.
inline bool adaptive_pool_grad_channels_last() { return false; }

}  // namespace ember::kernels::cuda

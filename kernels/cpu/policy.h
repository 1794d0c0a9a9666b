// What the CPU backend takes, for the fronts that ask before they allocate:
// the dtype its products compute in, which operands its GEMM reads in
// place, whether its convolutions read channels-last operands as they lie,
// how its batch norm reads a channels-last x. Asked through
// kernels/dispatch.h's backend_choice, so no front names a device; the CUDA
// backend's answers are kernels/cuda/policy.h.
#pragma once

#include <cstdint>

#include "../../core/dtype.h"
#include "../conv_args.h"
#include "../matmul_args.h"
#include "conv.h"

namespace ember::kernels::cpu {

/// The dtype matmul computes in: f16 in f32, rounded once at the end; bf16
/// as it is (kernels/cpu/gemm_bf16.h: bf16 products summed in f32, rounded
/// once); every other dtype as it is.
inline DType matmul_dtype(DType dt) { return dt == DType::f16 ? DType::f32 : dt; }

/// The dtype conv2d computes in where no bf16 kernel takes it (conv2d_plan):
/// f16 and bf16 in f32, rounded once at the end; every other dtype as it is.
inline DType product_dtype(DType dt) {
    return dt == DType::f16 || dt == DType::bf16 ? DType::f32 : dt;
}

/// Whether matmul multiplies this dtype (f32, f64, f16, bf16, i32, i64: all
/// the products' dtypes; integers by Eigen).
inline bool matmul_takes(DType) { return true; }

/// Whether the GEMM reads a [rows, cols] operand with these strides in
/// place (matrix_layout: one unit stride).
inline bool gemm_reads_in_place(int64_t rows, int64_t cols, int64_t row_stride,
                                int64_t col_stride) {
    return matrix_layout(rows, cols, row_stride, col_stride).has_value();
}

/// conv2d of dtype dt on an input whose memory is channels-last or not: bf16
/// on the bf16 channels-last kernels where they fit (an NCHW input and its
/// result converted: the copies cost less than computing in f32), otherwise
/// computed in product_dtype; channels-last operands read as they lie where
/// the channels-last kernels fit; the weight always packed from OIHW.
inline ConvPlan conv2d_plan(const Conv2dShape& s, DType dt, bool channels_last) {
    if (dt == DType::bf16 && conv2d_channels_last_fits(s, dt)) return {dt, true, false};
    const DType ct = product_dtype(dt);
    return {ct, channels_last && ct == dt && conv2d_channels_last_fits(s, ct), false};
}
/// The same for conv2d_backward's asked-for gradients.
inline ConvPlan conv2d_backward_plan(const Conv2dShape& s, DType dt, bool channels_last,
                                     bool grad_input, bool grad_weight) {
    if (dt == DType::bf16 && conv2d_backward_channels_last_fits(s, dt, grad_input, grad_weight))
        return {dt, true, false};
    const DType ct = product_dtype(dt);
    return {ct,
            channels_last && ct == dt &&
                conv2d_backward_channels_last_fits(s, ct, grad_input, grad_weight),
            false};
}

/// Batch norm reads x as [N, C, S] through its strides, channels-last or not.
inline bool batch_norm_channels_last_rows() { return false; }

/// adaptive_avg_pool2d_backward writes a channels-last input's gradient in
/// its dtype and layout where the windows tile the plane (kernels/cpu/pool.h).
inline bool adaptive_pool_grad_channels_last() { return true; }

}  // namespace ember::kernels::cpu

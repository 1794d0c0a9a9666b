// CPU GEMM on Views: the one matrix-product entry point that matmul, bmm,
// addmm, linear and conv2d (im2col) all reach. The layout rule that decides
// whether an operand maps onto a GEMM without a copy (matrix_layout) is
// kernels/matmul.h's.
#pragma once

#include "../matmul_args.h"
#include "../view.h"

namespace ember::kernels::cpu {

/// out[..., M, N] = a[..., M, K] · b[..., K, N], or += when `accumulate`.
/// The three views have the same rank >= 2 and the same batch dims (the
/// caller broadcasts with stride-0 dims); a and b are mappable per
/// matrix_layout, out's rows have unit inner stride. Same dtype for all:
/// f32, f64, bf16 (kernels/cpu/gemm_bf16.h: f32 sums, rounded once), i32 or
/// i64. K = 0 writes zeros (or leaves out alone when
/// accumulating). Many small matrices run in parallel over the batch with
/// single-threaded Eigen inside; large ones let Eigen thread the GEMM.
void matmul(const View& out, const View& a, const View& b, bool accumulate = false);

/// out [M, N] = act(x [M, K] · wᵀ + bias) in one pass over the product's
/// tiles (kernels/cpu/gemm.cpp's epilogue): w is [N, K], bias [N]
/// contiguous or absent (data == nullptr), x and w with unit column stride,
/// out contiguous; gelu_tanh with `pre` present also writes the
/// pre-activation there ([M, N], unit column stride). f32 or bf16 (all
/// four alike): returns false, having written nothing, for other dtypes (the
/// front then runs the product and the activation apart). The same bits as
/// those passes.
bool linear_forward(const View& out, const View& x, const View& w, const View& bias,
                    LinearActivation act, const View& pre);

/// grad_weight [N, K] = gᵀ · x and grad_bias [N] = Σ over the M rows of g
/// (summed in f64 in row order while the product packs g), g [M, N] and x
/// [M, K] with unit column stride, grad_weight and grad_bias contiguous. f32
/// or bf16 (grad_bias rounded once from the f64 sums), or f32 gradients from
/// bf16 g and x (the product's f32 sums as they are): returns false for
/// other dtypes.
bool linear_weight_grad(const View& grad_weight, const View& grad_bias, const View& g,
                        const View& x);

}  // namespace ember::kernels::cpu

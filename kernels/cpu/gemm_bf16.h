// ember's bf16 GEMM on the CPU (kernels/cpu/gemm_bf16.cpp): the operands
// rounded to bf16 and packed in pairs, a 6 × 64 tile of VDPBF16PS
// (AVX512_BF16) or its f32 emulation; what cpu::matmul and the fused linear
// run for bf16 (docs/amp.md, "bf16 on the CPU").
#pragma once

#include <cstdint>

#include "../../core/dtype.h"
#include "gemm.h"

namespace ember::kernels::cpu {

/// An operand of gemm_bf16: f32 (rounded to bf16, nearest even, as it is
/// packed) or bf16, in any MatrixLayout.
struct Bf16Operand {
    const void* data;
    DType dtype;  // f32 or bf16
    MatrixLayout layout;
};

/// c[M×N] (= or +=) a[M×K] · b[K×N] with a and b read as bf16 (subnormals as
/// zero): each product exact, summed in f32 a k pair at a time — the odd k's
/// product, then the even k's, each addition rounded (VDPBF16PS) — in k
/// order within 1024-deep k-blocks, whose sums are added to c in turn; c f32,
/// or bf16 rounded once from the f32 result. Where the CPU lacks AVX512_BF16
/// (or set_cpu_bf16 says so) the same sums by f32 FMAs. Otherwise as
/// gemm_f32: c row-major with leading dimension ldc, K = 0 writes zeros (or
/// leaves c), the epilogue (f32 bias, activation, pre-activation in c's
/// dtype, a's row sums in f64 of the values as given), the same bits for any
/// thread count.
void gemm_bf16(int64_t m, int64_t n, int64_t k, Bf16Operand a, Bf16Operand b, void* c,
               DType c_dtype, int64_t ldc, bool accumulate, const GemmEpilogue* ep = nullptr);

}  // namespace ember::kernels::cpu

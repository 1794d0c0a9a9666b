// CUDA (batched) GEMM through cuBLAS, on the operands' own memory.
//
// Math:    out[b] (=|+=) a[b] · b[b] for every batch index b; M×K by K×N,
//          computed as outᵀ = bᵀ · aᵀ on column-major cuBLAS (Note [Row-major
//          products on column-major cuBLAS], kernels/cuda/matmul_plan.h).
// Dtypes:  f32 (CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 when
//          allow_tf32()), f64 (CUBLAS_COMPUTE_64F), f16 and bf16 read and
//          written as they are with f32 accumulation (CUBLAS_COMPUTE_32F and no
//          reduced-precision split-K reduction), rounded once into out.
// Layout:  a and b row- or column-major with any leading dim (a transposed
//          view is CUBLAS_OP_T, no copy); out row-major; batch dims that fold
//          evenly (stride 0 when broadcast) are one strided-batched call, the
//          rest a host loop of calls; a shared right operand with stacking rows
//          is one tall GEMM (the linear layer).
// Cost:    2·B·M·N·K FLOPs; (B·M·K + B·K·N + B·M·N)·sizeof(T) bytes at least
//          (twice out's bytes when accumulating).
// Calls:   cublasGemmEx_64 (one matrix per call) or
//          cublasGemmStridedBatchedEx_64, CUBLAS_GEMM_DEFAULT, on this thread's
//          handle bound to `stream` and the stream's workspace; int64 sizes,
//          so nothing is split. K = 0: cudaMemsetAsync (or nothing).
// Determinism: cuBLAS gives the same bits run to run for the same shapes,
//          dtypes and settings on one GPU model (its atomics mode stays off and
//          every stream has its own workspace); TF32 changes the bits.
// CPU twin: kernels/cpu/matmul.cpp. Test: the op table (tests/ops/entries_matmul.cpp
//          via tests/cuda/test_cuda_ops.cpp), edge cases in tests/cuda/test_cuda_matmul.cpp,
//          plan: tests/kernels/test_matmul_plan.cpp. Bench: bench/matmul.cpp has
//          CPU rows only so far (a GPU row against the large-GEMM rate is to do).
#include "kernels/cuda/matmul.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/cuda_check.h"
#include "core/error.h"
#include "kernels/cuda/matmul_plan.h"

/// Turns a failing cuBLAS call into an ember::Error naming the call.
#define EMBER_CUBLAS_CHECK(call)                                                              \
    do {                                                                                      \
        const cublasStatus_t ember_st_ = (call);                                              \
        if (ember_st_ != CUBLAS_STATUS_SUCCESS)                                               \
            EMBER_FAIL("cuBLAS error in ", #call, ": ", cublasGetStatusName(ember_st_), " (", \
                       cublasGetStatusString(ember_st_), ")");                                \
    } while (0)

namespace ember::kernels::cuda {

namespace {

// What cuBLAS is told about one dtype: storage type, compute type, and
// whether alpha and beta are doubles (64F compute) or floats.
struct BlasTypes {
    cudaDataType data;
    cublasComputeType_t compute;
    bool double_scalars;
    bool half_precision;  // f16 / bf16: forbid reduced-precision reductions
};

BlasTypes blas_types(DType t) {
    switch (t) {
        case DType::f32:
            return {CUDA_R_32F, allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                    false, false};
        case DType::f64:
            return {CUDA_R_64F, CUBLAS_COMPUTE_64F, true, false};
        case DType::f16:
            return {CUDA_R_16F, CUBLAS_COMPUTE_32F, false, true};
        case DType::bf16:
            return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, false, true};
        default:
            break;
    }
    EMBER_FAIL("matmul: dtype ", dtype_name(t),
               " is not supported on cuda (cuBLAS multiplies f32, f64, f16 and bf16; cast "
               "integer operands to a floating dtype, or multiply on the CPU)");
}

}  // namespace

void matmul(const View& out, const View& a, const View& b, bool accumulate, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.ndim >= 2 && a.ndim == out.ndim && b.ndim == out.ndim);
    EMBER_INTERNAL_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype);
    const BlasTypes types = blas_types(out.dtype);
    if (out.numel() == 0) return;
    const int nd = out.ndim;
    if (a.shape[nd - 1] == 0) {  // an empty sum: zeros, or out as it is
        if (accumulate) return;
        EMBER_INTERNAL_CHECK(out.is_contiguous(), "cuda::matmul: K = 0 into a strided out");
        EMBER_CUDA_CHECK(cudaMemsetAsync(out.data, 0, size_t(out.numel() * dtype_size(out.dtype)),
                                         stream.handle));
        return;
    }

    const GemmPlan p = plan_gemm(out, a, b, accumulate);
    auto handle = static_cast<cublasHandle_t>(CudaContext::of(stream.device).blas_handle(stream));
    // The handle is this thread's and shared by every caller: set the modes each time.
    EMBER_CUBLAS_CHECK(cublasSetPointerMode(handle, CUBLAS_POINTER_MODE_HOST));
    EMBER_CUBLAS_CHECK(cublasSetMathMode(
        handle,
        types.half_precision
            ? cublasMath_t(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)
            : CUBLAS_DEFAULT_MATH));

    const float alpha_f = 1.0f, beta_f = accumulate ? 1.0f : 0.0f;
    const double alpha_d = 1.0, beta_d = accumulate ? 1.0 : 0.0;
    const void* alpha = types.double_scalars ? static_cast<const void*>(&alpha_d) : &alpha_f;
    const void* beta = types.double_scalars ? static_cast<const void*>(&beta_d) : &beta_f;
    const cublasOperation_t op_x = p.x.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_y = p.y.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
    const int64_t elem = dtype_size(out.dtype);

    for (int64_t i = 0, calls = p.calls(); i < calls; ++i) {
        const GemmOffsets o = call_offsets(p, i);
        const char* x = b.data + o.b * elem;
        const char* y = a.data + o.a * elem;
        char* c = out.data + o.c * elem;
        if (p.batch == 1)
            EMBER_CUBLAS_CHECK(cublasGemmEx_64(
                handle, op_x, op_y, p.m, p.n, p.k, alpha, x, types.data, p.x.ld, y, types.data,
                p.y.ld, beta, c, types.data, p.ldc, types.compute, CUBLAS_GEMM_DEFAULT));
        else
            EMBER_CUBLAS_CHECK(cublasGemmStridedBatchedEx_64(
                handle, op_x, op_y, p.m, p.n, p.k, alpha, x, types.data, p.x.ld, p.stride_x, y,
                types.data, p.y.ld, p.stride_y, beta, c, types.data, p.ldc, p.stride_c, p.batch,
                types.compute, CUBLAS_GEMM_DEFAULT));
    }
}

}  // namespace ember::kernels::cuda

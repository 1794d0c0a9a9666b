// The linear layer's GEMMs through cuBLASLt, the bias fused as an epilogue.
//
// Math:    forward out = act(x·wᵀ + bias), act none, ReLU or GELU's tanh
//          form (then the pre-activation written too); weight gradient
//          grad_weight = gᵀ·x with grad_bias = Σ_rows g from the same call.
//          Row-major products on column-major cuBLASLt (Note [Row-major
//          products on column-major cuBLAS], kernels/cuda/matmul_plan.h):
//          forward   D = outᵀ [N×M] = op_T(w stored K×N) · (x stored K×M),
//                    the bias a vector over D's N rows (CUBLASLT_EPILOGUE_BIAS,
//                    RELU_BIAS, GELU_AUX_BIAS — its auxiliary output the
//                    pre-activation — or, without a bias, RELU and GELU_AUX);
//                    cuBLASLt's GELU is the tanh approximation;
//          backward  D = grad_weightᵀ [K×N] = (x stored K×M) · op_T(g stored
//                    N×M), k = M, and CUBLASLT_EPILOGUE_BGRADB sums op(B) = g
//                    over k: the bias gradient over D's N columns.
// Dtypes:  f32 (CUBLAS_COMPUTE_32F, _FAST_TF32 when allow_tf32()), f16 and
//          bf16 (32F compute and scale; split-K reductions, if any, in f32
//          only, as kernels/cuda/matmul.cpp forbids reduced-precision
//          reductions). The bias and its gradient have the output's dtype.
// Cost:    2·M·N·K FLOPs; bytes as the plain GEMM, minus what the fusion
//          saves: the forward skips the bias broadcast into out and the
//          GEMM's read of it (2·M·N·sizeof(T)); the backward skips a
//          reduction pass over g (M·N·sizeof(T)) and its launch; the
//          activation saves its own pass (2·M·N·sizeof(T)), GELU writing the
//          pre-activation for the backward (M·N·sizeof(T)) in its place.
// Calls:   cublasLtMatmulAlgoGetHeuristic (the first algorithm for the
//          shapes, strides and the operands' actual alignments; asked once
//          per such problem, Note [cuBLASLt algorithm cache]) then
//          cublasLtMatmul on the stream, with the stream's cuBLAS workspace.
//          No algorithm offered: false, nothing queued; the front falls back.
// Determinism: the heuristic's choice depends on the problem and the
//          operands' alignments, and cuBLASLt gives the same bits for the
//          same algorithm on one GPU model: the same call gives the same bits
//          run to run, but an operand at another alignment (or the fallback)
//          may round differently; TF32 changes the bits.
// Profiling: a call that falls back shows as this op with no time, then the
//          plain path's ops.
// CPU twin: the front's matmul + bias (kernels/matmul.cpp). Test:
//          tests/cuda/test_cuda_linear.cpp.
#include "kernels/cuda/linear.h"

#include <cublasLt.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include "core/error.h"

/// Turns a failing cuBLASLt call into an ember::Error naming the call.
#define EMBER_CUBLASLT_CHECK(call)                                                              \
    do {                                                                                        \
        const cublasStatus_t ember_st_ = (call);                                                \
        if (ember_st_ != CUBLAS_STATUS_SUCCESS)                                                 \
            EMBER_FAIL("cuBLASLt error in ", #call, ": ", cublasGetStatusName(ember_st_), " (", \
                       cublasGetStatusString(ember_st_), ")");                                  \
    } while (0)

namespace ember::kernels::cuda {

namespace {

// The descriptors of one call, destroyed with it.
struct MatmulDesc {
    cublasLtMatmulDesc_t d = nullptr;
    MatmulDesc(cublasComputeType_t compute, cudaDataType scale) {
        EMBER_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&d, compute, scale));
    }
    ~MatmulDesc() { cublasLtMatmulDescDestroy(d); }
    MatmulDesc(const MatmulDesc&) = delete;
    MatmulDesc& operator=(const MatmulDesc&) = delete;
    template <class V>
    void set(cublasLtMatmulDescAttributes_t a, const V& v) {
        EMBER_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof(v)));
    }
};

struct Layout {
    cublasLtMatrixLayout_t l = nullptr;
    Layout(cudaDataType t, int64_t rows, int64_t cols, int64_t ld) {
        EMBER_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&l, t, uint64_t(rows), uint64_t(cols), ld));
    }
    ~Layout() { cublasLtMatrixLayoutDestroy(l); }
    Layout(const Layout&) = delete;
    Layout& operator=(const Layout&) = delete;
};

struct Preference {
    cublasLtMatmulPreference_t p = nullptr;
    Preference() { EMBER_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&p)); }
    ~Preference() { cublasLtMatmulPreferenceDestroy(p); }
    Preference(const Preference&) = delete;
    Preference& operator=(const Preference&) = delete;
    template <class V>
    void set(cublasLtMatmulPreferenceAttributes_t a, const V& v) {
        EMBER_CUBLASLT_CHECK(cublasLtMatmulPreferenceSetAttribute(p, a, &v, sizeof(v)));
    }
};

struct LtTypes {
    cudaDataType data;
    cublasComputeType_t compute;
    bool half_precision;
};

// The types of a dtype cuBLASLt runs with an epilogue here; nullopt for f64
// and integers (the plain path takes them).
std::optional<LtTypes> lt_types(DType t) {
    switch (t) {
        case DType::f32:
            return LtTypes{CUDA_R_32F,
                           allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, false};
        case DType::f16:
            return LtTypes{CUDA_R_16F, CUBLAS_COMPUTE_32F, true};
        case DType::bf16:
            return LtTypes{CUDA_R_16BF, CUBLAS_COMPUTE_32F, true};
        default:
            return std::nullopt;
    }
}

// The largest power of two up to 256 that divides the address: what the
// heuristic is told, so that it offers only algorithms this pointer suits.
uint32_t alignment(const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    uint32_t al = 256;
    while (al > 1 && a % al != 0) al /= 2;
    return al;
}

// A leading dimension cuBLASLt accepts for a stored matrix of `rows` rows:
// the row stride of a one-row operand is irrelevant, so give it `rows`.
int64_t leading(int64_t ld, int64_t other_dim, int64_t rows) {
    return other_dim <= 1 ? std::max<int64_t>(rows, 1) : ld;
}

// One cuBLASLt GEMM D = op(A)·op(B) (C = D, beta = 0) with an epilogue;
// false when the heuristic offers no algorithm.
struct LtGemm {
    cublasOperation_t op_a, op_b;
    int64_t a_rows, a_cols, lda, b_rows, b_cols, ldb, d_rows, d_cols, ldd;
    const void *a, *b;
    void* d;
    cublasLtEpilogue_t epilogue;
    void* bias;           // the bias (forward) or its gradient (BGRADB); may be null
    void* aux = nullptr;  // GELU_AUX*: the pre-activation, leading dim aux_ld
    int64_t aux_ld = 0;
};

// Note [cuBLASLt algorithm cache]
// The heuristic costs host time on every call (tens of microseconds), which
// a small layer's GEMM may not even take on the device. Its answer depends
// only on what it is told: the device, the types, the operations, the
// layouts, the epilogue, the workspace and the alignments of the pointers
// (the bias's and the auxiliary output's included, which it reads from the
// descriptor). So the answer — an algorithm, or none offered — is kept per
// such key for the life of the process and reused, never re-asked.
struct AlgoKey {
    int device;
    DType dtype;
    bool tf32;
    cublasOperation_t op_a, op_b;
    int64_t a_rows, a_cols, lda, b_rows, b_cols, ldb, d_rows, d_cols, ldd, aux_ld;
    cublasLtEpilogue_t epilogue;
    uint32_t align_a, align_b, align_d, align_bias, align_aux;
    size_t workspace;
    friend auto operator<=>(const AlgoKey&, const AlgoKey&) = default;
};

// The algorithm for `key` (nullopt: none offered), asking `find` on first use.
template <class Find>
std::optional<cublasLtMatmulAlgo_t> cached_algo(const AlgoKey& key, Find&& find) {
    // Never destroyed, as the contexts: ops may run during static destruction.
    static std::mutex mutex;
    static auto* cache = new std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>>();
    {
        std::lock_guard<std::mutex> lock(mutex);
        if (auto it = cache->find(key); it != cache->end()) return it->second;
    }
    const std::optional<cublasLtMatmulAlgo_t> algo = find();
    std::lock_guard<std::mutex> lock(mutex);
    return cache->emplace(key, algo).first->second;
}

bool run(const LtGemm& g, DType dtype, StreamRef stream) {
    const std::optional<LtTypes> types = lt_types(dtype);
    if (!types) return false;
    CudaContext& ctx = CudaContext::of(stream.device);
    auto handle = static_cast<cublasLtHandle_t>(ctx.blas_lt_handle());
    const auto [ws, ws_bytes] = ctx.blas_workspace(stream);

    MatmulDesc desc(types->compute, CUDA_R_32F);
    desc.set(CUBLASLT_MATMUL_DESC_TRANSA, g.op_a);
    desc.set(CUBLASLT_MATMUL_DESC_TRANSB, g.op_b);
    desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
    if (g.bias != nullptr) desc.set(CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
    if (g.aux != nullptr) {
        desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux);
        desc.set(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.aux_ld);
    }
    const Layout la(types->data, g.a_rows, g.a_cols, g.lda);
    const Layout lb(types->data, g.b_rows, g.b_cols, g.ldb);
    const Layout ld(types->data, g.d_rows, g.d_cols, g.ldd);

    const AlgoKey key{stream.device.index,
                      dtype,
                      types->compute == CUBLAS_COMPUTE_32F_FAST_TF32,
                      g.op_a,
                      g.op_b,
                      g.a_rows,
                      g.a_cols,
                      g.lda,
                      g.b_rows,
                      g.b_cols,
                      g.ldb,
                      g.d_rows,
                      g.d_cols,
                      g.ldd,
                      g.aux_ld,
                      g.epilogue,
                      alignment(g.a),
                      alignment(g.b),
                      alignment(g.d),
                      g.bias ? alignment(g.bias) : 0,
                      g.aux ? alignment(g.aux) : 0,
                      ws_bytes};
    const std::optional<cublasLtMatmulAlgo_t> algo =
        cached_algo(key, [&]() -> std::optional<cublasLtMatmulAlgo_t> {
            Preference pref;
            pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t(ws_bytes));
            pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
            pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
            pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
            pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
            // f16/bf16: split-K partial sums only in the compute type (f32);
            // INPLACE and OUTPUT_TYPE would add them in the output's precision.
            if (types->half_precision)
                pref.set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                         uint32_t(CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE));
            cublasLtMatmulHeuristicResult_t found{};
            int count = 0;
            const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
                handle, desc.d, la.l, lb.l, ld.l, ld.l, pref.p, 1, &found, &count);
            if (st != CUBLAS_STATUS_SUCCESS || count == 0) return std::nullopt;
            return found.algo;
        });
    if (!algo) return false;

    const float alpha = 1.0f, beta = 0.0f;
    EMBER_CUBLASLT_CHECK(cublasLtMatmul(handle, desc.d, &alpha, g.a, la.l, g.b, lb.l, &beta, g.d,
                                        ld.l, g.d, ld.l, &*algo, ws, ws_bytes, stream.handle));
    return true;
}

// The forward's epilogue: the activation, after the bias when there is one.
cublasLtEpilogue_t forward_epilogue(LinearActivation act, bool bias, bool aux) {
    switch (act) {
        case LinearActivation::relu:
            return bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
        case LinearActivation::gelu_tanh:
            if (!aux) return bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
            return bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
        case LinearActivation::none:
            break;
    }
    return bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

bool linear_forward(const View& out, const View& x, const View& w, const View& bias,
                    LinearActivation act, const View& pre, StreamRef stream) {
    const bool has_bias = bias.data != nullptr,
               gelu_aux = act == LinearActivation::gelu_tanh && pre.data != nullptr;
    EMBER_INTERNAL_ASSERT(out.ndim == 2 && x.ndim == 2 && w.ndim == 2);
    EMBER_INTERNAL_ASSERT(x.dtype == out.dtype && w.dtype == out.dtype);
    const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
    EMBER_INTERNAL_ASSERT(w.shape[1] == K && out.shape[0] == M && out.shape[1] == N &&
                          out.is_contiguous());
    EMBER_INTERNAL_ASSERT(!has_bias || (bias.ndim == 1 && bias.shape[0] == N &&
                                        bias.dtype == out.dtype && bias.is_contiguous()));
    EMBER_INTERNAL_ASSERT(!gelu_aux || (pre.ndim == 2 && pre.shape[0] == M && pre.shape[1] == N &&
                                        pre.dtype == out.dtype && (N <= 1 || pre.strides[1] == 1) &&
                                        pre.strides[0] % 8 == 0 && pre.strides[0] >= N));
    if (M == 0 || N == 0 || K == 0) return false;  // nothing to multiply: the front's path
    if ((K > 1 && (x.strides[1] != 1 || w.strides[1] != 1))) return false;
    const LtGemm g{.op_a = CUBLAS_OP_T,
                   .op_b = CUBLAS_OP_N,
                   .a_rows = K,
                   .a_cols = N,
                   .lda = leading(w.strides[0], N, K),
                   .b_rows = K,
                   .b_cols = M,
                   .ldb = leading(x.strides[0], M, K),
                   .d_rows = N,
                   .d_cols = M,
                   .ldd = N,
                   .a = w.data,
                   .b = x.data,
                   .d = out.data,
                   .epilogue = forward_epilogue(act, has_bias, gelu_aux),
                   .bias = has_bias ? bias.data : nullptr,
                   .aux = gelu_aux ? pre.data : nullptr,
                   .aux_ld = gelu_aux ? pre.strides[0] : 0};
    return run(g, out.dtype, stream);
}

bool linear_weight_grad(const View& grad_weight, const View& grad_bias, const View& g,
                        const View& x, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(grad_weight.ndim == 2 && grad_bias.ndim == 1 && g.ndim == 2 &&
                          x.ndim == 2);
    EMBER_INTERNAL_ASSERT(g.dtype == grad_weight.dtype && x.dtype == grad_weight.dtype &&
                          grad_bias.dtype == grad_weight.dtype);
    const int64_t M = g.shape[0], N = g.shape[1], K = x.shape[1];
    EMBER_INTERNAL_ASSERT(x.shape[0] == M && grad_weight.shape[0] == N &&
                          grad_weight.shape[1] == K && grad_bias.shape[0] == N &&
                          grad_weight.is_contiguous() && grad_bias.is_contiguous());
    if (M == 0 || N == 0 || K == 0) return false;
    if ((K > 1 && x.strides[1] != 1) || (N > 1 && g.strides[1] != 1)) return false;
    const LtGemm gemm{.op_a = CUBLAS_OP_N,
                      .op_b = CUBLAS_OP_T,
                      .a_rows = K,
                      .a_cols = M,
                      .lda = leading(x.strides[0], M, K),
                      .b_rows = N,
                      .b_cols = M,
                      .ldb = leading(g.strides[0], M, N),
                      .d_rows = K,
                      .d_cols = N,
                      .ldd = K,
                      .a = x.data,
                      .b = g.data,
                      .d = grad_weight.data,
                      .epilogue = CUBLASLT_EPILOGUE_BGRADB,
                      .bias = grad_bias.data};
    return run(gemm, grad_weight.dtype, stream);
}

}  // namespace ember::kernels::cuda

// CPU (batched) GEMM on the operands' own memory: f32 and bf16 on ember's
// kernels (kernels/cpu/gemm.cpp, gemm_bf16.cpp), f64 and the integers
// through Eigen.
//
// Math:    out[b] (=|+=) a[b] · b[b] for every batch index b; M×K by K×N.
// Layout:  a, b row- or column-major with any leading dimension (a transposed
//          view maps as the other order, no copy); out row-major. Batch dims
//          may have stride 0 (broadcast). Dtypes f32, f64, bf16, i32, i64
//          (the front computes f16 in f32).
// Cost:    2·B·M·N·K FLOPs; (B·M·K + B·K·N + B·M·N)·sizeof(T) bytes at least.
// Threads: one big GEMM (or a batch whose right operand is shared, folded
//          into one) is threaded by Eigen's OpenMP; a batch of small matrices
//          runs one matrix per thread, Eigen staying single-threaded inside
//          an OpenMP team. Test: tests/kernels/test_matmul.cpp; benchmark:
//          bench/matmul.cpp ("matmul" family).
#include "kernels/cpu/matmul.h"

#include <omp.h>

#include <vector>

// GCC 12 flags AVX-512 intrinsics inside Eigen's GEMM packing as "maybe
// uninitialized" (a known false positive); keep the build log readable.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>

#include "core/error.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/gemm_bf16.h"
#include "kernels/matmul_fold.h"

namespace ember::kernels::cpu {

namespace {

// A batch whose per-matrix work is at most this (M·N·K) runs one matrix per
// thread; above it Eigen's own threading of each GEMM is as good (and stays
// good when there are fewer matrices than threads).
constexpr int64_t kBatchParallelMaxMNK = int64_t(1) << 27;  // 512³
// Below this much work in total (B·M·N·K) a batch runs on one thread: an
// OpenMP team costs microseconds, far more on a busy machine.
constexpr int64_t kBatchParallelMinWork = int64_t(1) << 18;

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ColMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
template <class M>
using ConstMap = Eigen::Map<const M, Eigen::Unaligned, Eigen::OuterStride<>>;

struct GemmShape {
    int64_t m, n, k;
    MatrixLayout la, lb;
    int64_t ldc;
    bool accumulate;
};

// Calls f with an Eigen map of the matrix at p; the layout picks the map type.
template <class T, class F>
void with_map(const T* p, int64_t rows, int64_t cols, MatrixLayout l, F&& f) {
    if (l.row_major)
        f(ConstMap<RowMajor<T>>(p, rows, cols, Eigen::OuterStride<>(l.ld)));
    else
        f(ConstMap<ColMajor<T>>(p, rows, cols, Eigen::OuterStride<>(l.ld)));
}

// One GEMM: c (=|+=) a · b; f32 and bf16 on ember's own kernels
// (kernels/cpu/gemm.cpp, gemm_bf16.cpp).
template <class T>
void gemm(T* c, const T* a, const T* b, const GemmShape& s) {
    if constexpr (std::is_same_v<T, float>) {
        gemm_f32(s.m, s.n, s.k, a, s.la, b, s.lb, c, s.ldc, s.accumulate);
    } else if constexpr (std::is_same_v<T, BFloat16>) {
        gemm_bf16(s.m, s.n, s.k, {a, DType::bf16, s.la}, {b, DType::bf16, s.lb}, c, DType::bf16,
                  s.ldc, s.accumulate);
    } else {
        Eigen::Map<RowMajor<T>, Eigen::Unaligned, Eigen::OuterStride<>> C(
            c, s.m, s.n, Eigen::OuterStride<>(s.ldc));
        if (s.k == 0) {  // an empty sum; Eigen would agree, but say it plainly
            if (!s.accumulate) C.setZero();
            return;
        }
        with_map(a, s.m, s.k, s.la, [&](const auto& A) {
            with_map(b, s.k, s.n, s.lb, [&](const auto& B) {
                if (s.accumulate)
                    C.noalias() += A * B;
                else
                    C.noalias() = A * B;
            });
        });
    }
}

template <class T>
void run(const View& out, const View& a, const View& b, bool accumulate) {
    const int nd = out.ndim, nb = nd - 2;
    const int64_t m = out.shape[nd - 2], n = out.shape[nd - 1], k = a.shape[nd - 1];
    int64_t batch = 1;
    for (int d = 0; d < nb; ++d) batch *= out.shape[d];
    if (batch == 0 || m == 0 || n == 0) return;

    const auto la = matrix_layout(m, k, a.strides[nd - 2], a.strides[nd - 1]);
    const auto lb = matrix_layout(k, n, b.strides[nd - 2], b.strides[nd - 1]);
    EMBER_INTERNAL_ASSERT(la && lb);
    EMBER_INTERNAL_ASSERT(n <= 1 || out.strides[nd - 1] == 1);
    GemmShape s{m, n, k, *la, *lb, m <= 1 ? n : out.strides[nd - 2], accumulate};
    T* const c = out.ptr<T>();
    const T* const pa = a.ptr<T>();
    const T* const pb = b.ptr<T>();

    // A shared right operand turns the batch into one tall GEMM when the rows
    // of a and out stack evenly (x[B, T, C] · w: the linear-layer case).
    if (const auto t = tall_fold(out, a, b)) {
        const auto fa = matrix_layout(t->rows, k, t->a_row_stride, a.strides[nd - 1]);
        if (fa) {
            GemmShape f{t->rows, n, k, *fa, *lb, t->rows <= 1 ? n : t->out_row_stride, accumulate};
            gemm(c, pa, pb, f);
            return;
        }
    }

    const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
    const bool over_batch = threads > 1 && batch >= threads &&
                            batch * m * n * k >= kBatchParallelMinWork &&
                            (m * n * k <= kBatchParallelMaxMNK || batch >= 4 * threads);
    auto one = [&](int64_t i) {
        gemm(c + batch_offset(out, nb, i), pa + batch_offset(a, nb, i), pb + batch_offset(b, nb, i),
             s);
    };
    if (over_batch) {
        // Inside this team Eigen sees omp_get_num_threads() > 1 and does not nest.
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < batch; ++i) one(i);
    } else {
        for (int64_t i = 0; i < batch; ++i) one(i);
    }
}

}  // namespace

bool linear_forward(const View& out, const View& x, const View& w, const View& bias,
                    LinearActivation act, const View& pre) {
    const DType dt = x.dtype;
    if ((dt != DType::f32 && dt != DType::bf16) || w.dtype != dt) return false;
    const int64_t m = x.shape[0], k = x.shape[1], n = w.shape[0];
    const MatrixLayout lx{true, m <= 1 ? k : x.strides[0]};
    const MatrixLayout lwt{false, n <= 1 ? k : w.strides[0]};  // wᵀ: column-major [K, N]
    GemmEpilogue ep;
    ep.act = act;
    if (pre.data) {
        ep.pre = pre.data;
        ep.ld_pre = m <= 1 ? n : pre.strides[0];
    }
    if (dt == DType::f32) {
        ep.bias = bias.data ? bias.ptr<const float>() : nullptr;
        gemm_f32(m, n, k, x.ptr<const float>(), lx, w.ptr<const float>(), lwt, out.ptr<float>(), n,
                 false, &ep);
        return true;
    }
    // bf16: the bias's values in f32 (exact), the starting value of each sum.
    std::vector<float> b32;
    if (bias.data) {
        const BFloat16* b = bias.ptr<const BFloat16>();
        for (int64_t j = 0; j < n; ++j) b32.push_back(float(b[j]));
        ep.bias = b32.data();
    }
    gemm_bf16(m, n, k, {x.data, dt, lx}, {w.data, dt, lwt}, out.data, dt, n, false, &ep);
    return true;
}

bool linear_weight_grad(const View& grad_weight, const View& grad_bias, const View& g,
                        const View& x) {
    const DType dt = g.dtype;
    if ((dt != DType::f32 && dt != DType::bf16) || x.dtype != dt) return false;
    const DType out = grad_weight.dtype;  // dt, or f32 from bf16 operands
    if (grad_bias.dtype != out || (out != dt && !(dt == DType::bf16 && out == DType::f32)))
        return false;
    const int64_t rows = g.shape[0], n = g.shape[1], k = x.shape[1];
    const MatrixLayout lgt{false, rows <= 1 ? n : g.strides[0]};  // gᵀ: column-major [N, rows]
    const MatrixLayout lx{true, rows <= 1 ? k : x.strides[0]};
    std::vector<double> sums(static_cast<size_t>(n));
    GemmEpilogue ep;
    ep.a_row_sums = sums.data();
    if (dt == DType::f32) {
        gemm_f32(n, k, rows, g.ptr<const float>(), lgt, x.ptr<const float>(), lx,
                 grad_weight.ptr<float>(), k, false, &ep);
        float* db = grad_bias.ptr<float>();
        for (int64_t j = 0; j < n; ++j) db[j] = float(sums[size_t(j)]);
        return true;
    }
    gemm_bf16(n, k, rows, {g.data, dt, lgt}, {x.data, dt, lx}, grad_weight.data, out, k, false,
              &ep);
    if (out == DType::f32) {
        float* db = grad_bias.ptr<float>();
        for (int64_t j = 0; j < n; ++j) db[j] = float(sums[size_t(j)]);
    } else {
        BFloat16* db = grad_bias.ptr<BFloat16>();
        for (int64_t j = 0; j < n; ++j) db[j] = BFloat16(float(sums[size_t(j)]));
    }
    return true;
}

void matmul(const View& out, const View& a, const View& b, bool accumulate) {
    EMBER_INTERNAL_ASSERT(out.ndim >= 2 && a.ndim == out.ndim && b.ndim == out.ndim);
    EMBER_INTERNAL_ASSERT(a.dtype == out.dtype && b.dtype == out.dtype);
    switch (out.dtype) {
        case DType::f32:
            return run<float>(out, a, b, accumulate);
        case DType::f64:
            return run<double>(out, a, b, accumulate);
        case DType::bf16:
            return run<BFloat16>(out, a, b, accumulate);
        // Integers multiply as their unsigned twins: the same bits in two's
        // complement, and wrapping instead of signed-overflow UB (Note [Integer overflow]).
        case DType::i32:
            return run<uint32_t>(out, a, b, accumulate);
        case DType::i64:
            return run<uint64_t>(out, a, b, accumulate);
        default:
            break;
    }
    EMBER_FAIL("internal error: cpu::matmul got dtype ", dtype_name(out.dtype));
}

}  // namespace ember::kernels::cpu

// CUDA dropout: the mask from the Philox stream (kernels/random_math.h), the
// output scaled by 1 / (1 − p); the backward scales the gradient by the mask.
// CPU twin: kernels/cpu/dropout.cpp; masks and outputs are bit-identical.
//
// Math:  keep_i = U_i >= p with U_i = math::uniform_at<float>(seed, first, i);
//        y_i = keep_i·x_i / (1 − p); grad_x_i = keep_i·grad_y_i / (1 − p)
//        (1 / (1 − p) rounded once to Acc<T> on the host, then multiplied).
// Dtypes: f32, f64, f16, bf16 (f16/bf16 scaled in f32); mask u8; contiguous.
// Bytes: forward n·(2·sizeof(T) + 1), backward n·(2·sizeof(T) + 1). FLOPs: 1
//        per element, plus one Philox block (10 rounds) per 4 elements.
// Launch: forward one thread per Philox block (4 consecutive elements, the 4
//        words of the block), grid-stride, 256 threads; backward cuda::map.
//        Deterministic. Test: tests/cuda/test_cuda_dropout.cpp.
// perf: the forward's 1-byte mask and scalar stores are not vectorized.
#include "core/cuda_check.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/loop.cuh"
#include "kernels/dropout_args.h"
#include "kernels/random_math.h"

namespace ember::kernels::cuda {

namespace {

constexpr int kBlock = 256;

// Thread j owns elements 4j .. 4j+3: the words of Philox block first + j,
// which is what math::uniform_at<float>(seed, first, i) reads for each of
// them (block first + i/4, word i%4), computed once instead of four times.
template <class T>
__global__ void dropout_forward_kernel(T* out, uint8_t* mask, const T* x, int64_t n, double p,
                                       math::Acc<T> scale, uint64_t seed, uint64_t first) {
    using A = math::Acc<T>;
    const int64_t blocks = (n + 3) / 4;
    for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < blocks;
         j += int64_t(gridDim.x) * blockDim.x) {
        const Philox4 b = philox_block(seed, first + uint64_t(j));
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const int64_t i = 4 * j + k;
            if (i >= n) break;
            const bool keep = math::dropout_keep(uniform_f32(b.x[k]), p);
            out[i] = math::DropoutScale<T>{scale}(x[i], keep);
            mask[i] = keep;
        }
    }
}

template <class T>
__global__ void dropout_identity_kernel(T* out, uint8_t* mask, const T* x, int64_t n) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
         i += int64_t(gridDim.x) * blockDim.x) {
        out[i] = x[i];
        mask[i] = 1;
    }
}

}  // namespace

void dropout_forward(const View& out, const View& mask, const View& x, double p, uint64_t seed,
                     uint64_t first_block, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(dropout_forward_views(out, mask, x));
    const int64_t n = x.numel();
    if (n == 0) return;
    visit_floating(x.dtype, "dropout_forward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        if (p == 0) {  // every U_i >= 0: all kept, scale 1 (as the CPU: no Philox rounds)
            dropout_identity_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
                out.ptr<T>(), mask.ptr<uint8_t>(), x.ptr<const T>(), n);
            return;
        }
        const A scale = A(1 / (1 - p));
        dropout_forward_kernel<T><<<grid_for((n + 3) / 4, kBlock), kBlock, 0, stream.handle>>>(
            out.ptr<T>(), mask.ptr<uint8_t>(), x.ptr<const T>(), n, p, scale, seed, first_block);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void dropout_backward(const View& grad_x, const View& grad_y, const View& mask, double p,
                      StreamRef stream) {
    EMBER_INTERNAL_ASSERT(dropout_backward_views(grad_x, grad_y, mask));
    visit_floating(grad_y.dtype, "dropout_backward", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = math::Acc<T>;
        map<T, T, uint8_t>(stream, grad_x, math::DropoutScale<T>{A(1 / (1 - p))}, grad_y, mask);
    });
}

}  // namespace ember::kernels::cuda

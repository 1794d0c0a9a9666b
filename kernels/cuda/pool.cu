// CUDA 2-d pooling: max (with i64 argmax indices), average, adaptive average,
// and their backwards. CPU twin: kernels/cpu/pool.cpp — same windows, same
// NaN and tie rules, same summation order, so results are bit-identical.
//
// Math:    max: v = max over the window's in-bounds taps (the first maximum,
//          the last NaN), i = y·W + x of it; avg: Σ window / divisor
//          (PyTorch's clipping and divisor rules); adaptive: mean over rows
//          [⌊y·H/OH⌋, ⌈(y+1)·H/OH⌉), same for columns. Backward: dx[y, x] =
//          Σ over the outputs that used (y, x) of grad / divisor (avg,
//          adaptive) or of grad where index == y·W + x (max).
// Layout:  input, grad_out and indices [N, C, ·, ·] with any strides; values,
//          indices out and grad_input contiguous; grad_input in Acc<T>
//          (f32 for f16/bf16). f32, f64, f16, bf16.
// Cost:    forward N·C·OH·OW·kH·kW reads (mostly cached) and as many FLOPs;
//          moves N·C·(H·W + OH·OW)·sizeof(T) (+ 8 per max index). Backward:
//          N·C·H·W threads, each reading the few outputs that cover it.
// Launch:  one thread per output element (forward) or per INPUT element
//          (backward: a gather, no float atomics), grid-stride, 256 threads.
//          The max backward first measures how far the indices reach (Note
//          [Max-pool backward without the window], kernels/cuda/pool_plan.h):
//          a reduction that also checks every index (raising the device
//          error flag on one outside [0, H·W)), a small table of the output
//          ranges per input row and column, then the gather.
// Determinism: every sum runs in the CPU's order (outputs row-major); the
//          only atomic is an integer max: run-to-run and CPU-bit-identical.
// Test:    the op table (tests/ops/entries_pool.cpp via tests/cuda/test_cuda_ops.cpp),
//          edge cases in tests/cuda/test_cuda_pool.cpp; plans:
//          tests/kernels/test_pool_plan.cpp.
#include <limits>

#include "core/cuda_check.h"
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/offset.cuh"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/pool_plan.h"
#include "kernels/cuda/workspace.h"
#include "kernels/math.h"

namespace ember::kernels::cuda {

namespace {

using math::Acc;

// A strided [N, C, A, B] operand: the offset of (plane p = n·C + c, a, b).
struct Strided4 {
    int64_t C, sn, sc, sa, sb;
    __device__ __forceinline__ int64_t plane(int64_t p) const { return (p / C) * sn + (p % C) * sc; }
    __device__ __forceinline__ int64_t at(int64_t p, int64_t a, int64_t b) const {
        return plane(p) + a * sa + b * sb;
    }
};

Strided4 strided4(const View& v) {
    return {v.shape[1], v.strides[0], v.strides[1], v.strides[2], v.strides[3]};
}

#define EMBER_GRID_STRIDE(e, n)                                                  \
    for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < (n); \
         e += int64_t(gridDim.x) * blockDim.x)

constexpr int kBlock = 256;

template <class T>
__global__ void max_kernel(T* values, int64_t* indices, const T* in, Strided4 s, int64_t H,
                           int64_t W, int64_t OH, int64_t OW, Pool2dWindow w, int64_t n) {
    EMBER_GRID_STRIDE(e, n) {
        const int64_t ox = e % OW, t = e / OW, oy = t % OH, p = t / OH;
        const T* plane = in + s.plane(p);
        const MaxTap<Acc<T>> m = max_window(
            oy, ox, w, H, W, -std::numeric_limits<Acc<T>>::infinity(),
            [&](int64_t y, int64_t x) { return math::load(plane[y * s.sa + x * s.sb]); });
        values[e] = math::cast<T>(m.value);
        indices[e] = m.index;
    }
}

template <class T>
__global__ void avg_kernel(T* out, const T* in, Strided4 s, int64_t H, int64_t W, int64_t OH,
                           int64_t OW, Pool2dWindow w, bool count_include_pad, int64_t n) {
    EMBER_GRID_STRIDE(e, n) {
        const int64_t ox = e % OW, t = e / OW, oy = t % OH, p = t / OH;
        const T* plane = in + s.plane(p);
        const AvgWindow a = avg_window(oy, ox, w, H, W, count_include_pad);
        Acc<T> sum = 0;
        for (int64_t y = a.y0; y < a.y1; ++y)
            for (int64_t x = a.x0; x < a.x1; ++x) sum += math::load(plane[y * s.sa + x * s.sb]);
        const bool empty = a.y0 >= a.y1 || a.x0 >= a.x1;
        out[e] = math::cast<T>(empty ? Acc<T>(0) : sum / Acc<T>(a.divisor));
    }
}

template <class T>
__global__ void adaptive_kernel(T* out, const T* in, Strided4 s, int64_t H, int64_t W, int64_t OH,
                                int64_t OW, int64_t n) {
    EMBER_GRID_STRIDE(e, n) {
        const int64_t ox = e % OW, t = e / OW, oy = t % OH, p = t / OH;
        const T* plane = in + s.plane(p);
        const OutRange ys = adaptive_window(oy, H, OH), xs = adaptive_window(ox, W, OW);
        Acc<T> sum = 0;
        for (int64_t y = ys.lo; y < ys.hi; ++y)
            for (int64_t x = xs.lo; x < xs.hi; ++x) sum += math::load(plane[y * s.sa + x * s.sb]);
        out[e] = math::cast<T>(sum / Acc<T>((ys.hi - ys.lo) * (xs.hi - xs.lo)));
    }
}

// ---- Backward: one thread per grad_input element, overwriting it (=) --------

template <class T>
__global__ void avg_backward_kernel(Acc<T>* dx, const T* dy, Strided4 s, int64_t H, int64_t W,
                                    int64_t OH, int64_t OW, Pool2dWindow w,
                                    bool count_include_pad, int64_t n) {
    EMBER_GRID_STRIDE(e, n) {
        const int64_t x = e % W, t = e / W, y = t % H, p = t / H;
        const OutRange ys = avg_cover(y, w.kh, w.sh, w.ph, OH), xs = avg_cover(x, w.kw, w.sw, w.pw, OW);
        const int64_t base = s.plane(p);
        Acc<T> acc = 0;
        for (int64_t oy = ys.lo; oy < ys.hi; ++oy)
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) {
                const AvgWindow a = avg_window(oy, ox, w, H, W, count_include_pad);
                acc += math::load(dy[base + oy * s.sa + ox * s.sb]) / Acc<T>(a.divisor);
            }
        dx[e] = acc;
    }
}

template <class T>
__global__ void adaptive_backward_kernel(Acc<T>* dx, const T* dy, Strided4 s, int64_t H,
                                         int64_t W, int64_t OH, int64_t OW, int64_t n) {
    EMBER_GRID_STRIDE(e, n) {
        const int64_t x = e % W, t = e / W, y = t % H, p = t / H;
        const OutRange ys = adaptive_cover(y, H, OH), xs = adaptive_cover(x, W, OW);
        const int64_t base = s.plane(p);
        Acc<T> acc = 0;
        for (int64_t oy = ys.lo; oy < ys.hi; ++oy) {
            const OutRange wy = adaptive_window(oy, H, OH);
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) {
                const OutRange wx = adaptive_window(ox, W, OW);
                acc += math::load(dy[base + oy * s.sa + ox * s.sb]) /
                       Acc<T>((wy.hi - wy.lo) * (wx.hi - wx.lo));
            }
        }
        dx[e] = acc;
    }
}

// Max backward, step 1: checks every index and measures its reach (the
// largest distance of its row and column from the estimates); reach[0..1]
// start at 0 and take integer atomicMax of each block's maxima.
struct Reach {
    int64_t y, x;
};

__global__ void max_reach_kernel(const int64_t* idx, Strided4 s, int64_t OH, int64_t OW,
                                 int64_t W, int64_t hw, double ry, double rx, int64_t n,
                                 unsigned long long* reach, ErrorFlagRef flag) {
    Reach r{0, 0};
    EMBER_GRID_STRIDE(e, n) {
        const int64_t ox = e % OW, t = e / OW, oy = t % OH, p = t / OH;
        const int64_t i = idx[s.at(p, oy, ox)];
        if (i < 0 || i >= hw) {
            raise_error(flag, e, i);
            continue;
        }
        const int64_t dy = i / W - reach_estimate(oy, ry), dx = i % W - reach_estimate(ox, rx);
        r.y = dy > r.y ? dy : -dy > r.y ? -dy : r.y;
        r.x = dx > r.x ? dx : -dx > r.x ? -dx : r.x;
    }
    r = block_reduce(r, [](Reach a, Reach b) {
        return Reach{a.y > b.y ? a.y : b.y, a.x > b.x ? a.x : b.x};
    });
    if (threadIdx.x == 0) {
        atomicMax(&reach[0], (unsigned long long)r.y);
        atomicMax(&reach[1], (unsigned long long)r.x);
    }
}

// Step 2: the output range of every input row (rows[2y], rows[2y + 1]) and column.
__global__ void max_table_kernel(const unsigned long long* reach, int64_t* rows, int64_t* cols,
                                 int64_t H, int64_t W, int64_t OH, int64_t OW, double ry,
                                 double rx) {
    EMBER_GRID_STRIDE(t, H + W) {
        const bool row = t < H;
        const OutRange r = row ? reach_cover(t, int64_t(reach[0]), ry, OH)
                               : reach_cover(t - H, int64_t(reach[1]), rx, OW);
        int64_t* slot = row ? rows + 2 * t : cols + 2 * (t - H);
        slot[0] = r.lo;
        slot[1] = r.hi;
    }
}

// Step 3: the gather, in the CPU's order (outputs row-major).
template <class T>
__global__ void max_backward_kernel(Acc<T>* dx, const T* dy, Strided4 sg, const int64_t* idx,
                                    Strided4 si, const int64_t* rows, const int64_t* cols,
                                    int64_t H, int64_t W, int64_t n) {
    EMBER_GRID_STRIDE(e, n) {
        const int64_t x = e % W, t = e / W, y = t % H, p = t / H;
        const int64_t target = y * W + x, gbase = sg.plane(p), ibase = si.plane(p);
        const int64_t y0 = rows[2 * y], y1 = rows[2 * y + 1], x0 = cols[2 * x], x1 = cols[2 * x + 1];
        Acc<T> acc = 0;
        for (int64_t oy = y0; oy < y1; ++oy)
            for (int64_t ox = x0; ox < x1; ++ox)
                if (idx[ibase + oy * si.sa + ox * si.sb] == target)
                    acc += math::load(dy[gbase + oy * sg.sa + ox * sg.sb]);
        dx[e] = acc;
    }
}

void check_backward_views(const View& dx, const View& dy) {
    EMBER_INTERNAL_ASSERT(dx.is_contiguous() && dx.ndim == 4 && dy.ndim == 4 &&
                          dx.shape[0] == dy.shape[0] && dx.shape[1] == dy.shape[1]);
    EMBER_INTERNAL_ASSERT(dx.dtype == (dy.dtype == DType::f64 ? DType::f64 : DType::f32));
}

}  // namespace

void max_pool2d(const View& values, const View& indices, const View& input, const Pool2dWindow& w,
                StreamRef stream) {
    EMBER_INTERNAL_ASSERT(values.is_contiguous() && indices.is_contiguous() &&
                          indices.dtype == DType::i64 && input.ndim == 4);
    const int64_t n = values.numel();
    if (n == 0) return;
    visit_floating(input.dtype, "cuda pooling", [&](auto tag) {
        using T = typename decltype(tag)::type;
        max_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
            values.ptr<T>(), indices.ptr<int64_t>(), input.ptr<const T>(), strided4(input),
            input.shape[2], input.shape[3], values.shape[2], values.shape[3], w, n);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void avg_pool2d(const View& out, const View& input, const Pool2dWindow& w, bool count_include_pad,
                StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.is_contiguous() && input.ndim == 4 && w.dh == 1 && w.dw == 1);
    const int64_t n = out.numel();
    if (n == 0) return;
    visit_floating(input.dtype, "cuda pooling", [&](auto tag) {
        using T = typename decltype(tag)::type;
        avg_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
            out.ptr<T>(), input.ptr<const T>(), strided4(input), input.shape[2], input.shape[3],
            out.shape[2], out.shape[3], w, count_include_pad, n);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void adaptive_avg_pool2d(const View& out, const View& input, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.is_contiguous() && input.ndim == 4);
    const int64_t n = out.numel();
    if (n == 0) return;
    visit_floating(input.dtype, "cuda pooling", [&](auto tag) {
        using T = typename decltype(tag)::type;
        adaptive_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
            out.ptr<T>(), input.ptr<const T>(), strided4(input), input.shape[2], input.shape[3],
            out.shape[2], out.shape[3], n);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void max_pool2d_backward(const View& grad_input, const View& grad_out, const View& indices,
                         StreamRef stream) {
    check_backward_views(grad_input, grad_out);
    EMBER_INTERNAL_ASSERT(indices.dtype == DType::i64 && indices.ndim == 4);
    const int64_t n = grad_input.numel(), m = grad_out.numel();
    if (n == 0) return;
    if (m == 0) {  // no outputs: nothing reaches the input
        EMBER_CUDA_CHECK(cudaMemsetAsync(grad_input.data, 0,
                                         size_t(n) * dtype_size(grad_input.dtype), stream.handle));
        return;
    }
    const int64_t H = grad_input.shape[2], W = grad_input.shape[3];
    const int64_t OH = grad_out.shape[2], OW = grad_out.shape[3];
    const double ry = reach_ratio(H, OH), rx = reach_ratio(W, OW);
    // reach (2 words), then the row and column tables (2 words per row, column).
    const Workspace ws(stream, size_t(2 + 2 * H + 2 * W) * sizeof(int64_t));
    auto* reach = ws.as<unsigned long long>();
    int64_t* rows = ws.as<int64_t>() + 2;
    int64_t* cols = rows + 2 * H;
    EMBER_CUDA_CHECK(cudaMemsetAsync(reach, 0, 2 * sizeof(int64_t), stream.handle));
    const ErrorFlagRef flag =
        CudaContext::of(stream.device).error_flag().arm("max_pool2d_backward", "index", H * W);
    // A reduction: a bounded grid of blocks, each ending with two integer atomics.
    const unsigned reach_blocks = grid_for(m, kBlock) < 1024 ? grid_for(m, kBlock) : 1024;
    max_reach_kernel<<<reach_blocks, kBlock, 0, stream.handle>>>(
        indices.ptr<const int64_t>(), strided4(indices), OH, OW, W, H * W, ry, rx, m, reach, flag);
    EMBER_CUDA_CHECK(cudaGetLastError());
    max_table_kernel<<<grid_for(H + W, kBlock), kBlock, 0, stream.handle>>>(reach, rows, cols, H, W,
                                                                            OH, OW, ry, rx);
    EMBER_CUDA_CHECK(cudaGetLastError());
    visit_floating(grad_out.dtype, "cuda pooling", [&](auto tag) {
        using T = typename decltype(tag)::type;
        max_backward_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
            grad_input.ptr<Acc<T>>(), grad_out.ptr<const T>(), strided4(grad_out),
            indices.ptr<const int64_t>(), strided4(indices), rows, cols, H, W, n);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void avg_pool2d_backward(const View& grad_input, const View& grad_out, const Pool2dWindow& w,
                         bool count_include_pad, StreamRef stream) {
    check_backward_views(grad_input, grad_out);
    EMBER_INTERNAL_ASSERT(w.dh == 1 && w.dw == 1);
    const int64_t n = grad_input.numel();
    if (n == 0) return;
    visit_floating(grad_out.dtype, "cuda pooling", [&](auto tag) {
        using T = typename decltype(tag)::type;
        avg_backward_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
            grad_input.ptr<Acc<T>>(), grad_out.ptr<const T>(), strided4(grad_out),
            grad_input.shape[2], grad_input.shape[3], grad_out.shape[2], grad_out.shape[3], w,
            count_include_pad, n);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

void adaptive_avg_pool2d_backward(const View& grad_input, const View& grad_out, StreamRef stream) {
    check_backward_views(grad_input, grad_out);
    const int64_t n = grad_input.numel();
    if (n == 0) return;
    visit_floating(grad_out.dtype, "cuda pooling", [&](auto tag) {
        using T = typename decltype(tag)::type;
        adaptive_backward_kernel<T><<<grid_for(n, kBlock), kBlock, 0, stream.handle>>>(
            grad_input.ptr<Acc<T>>(), grad_out.ptr<const T>(), strided4(grad_out),
            grad_input.shape[2], grad_input.shape[3], grad_out.shape[2], grad_out.shape[3], n);
    });
    EMBER_CUDA_CHECK(cudaGetLastError());
}

#undef EMBER_GRID_STRIDE

}  // namespace ember::kernels::cuda

// CPU 2-d pooling: max (with argmax indices), average, adaptive average,
// and their backwards (scatter of grad_out over each window).
//
// Math:    max: v = max over the window's in-bounds taps, i = y·W + x of it;
//          avg: Σ window / divisor (PyTorch's clipping and divisor rules);
//          adaptive: mean over rows [⌊y·H/OH⌋, ⌈(y+1)·H/OH⌉), same for columns.
//          Backward: max adds grad_out into the element its index names;
//          avg and adaptive add grad_out / divisor to every element the
//          forward summed (windows may overlap: contributions add).
// Layout:  input [N, C, H, W] with any strides; outputs contiguous; f32, f64,
//          f16, bf16 (summed in f32 for the half types, f64 for f64).
// Cost:    N·C·OH·OW·kH·kW reads and about as many FLOPs (compares or adds);
//          memory-bound (the backwards the same, plus zeroing grad_input).
//          One (n, c) plane per loop iteration, planes split across threads;
//          a backward plane is owned by one thread: deterministic. Adaptive
//          pooling of a channels-last input reads (and, where its windows
//          tile the plane, its backward writes) whole pixels of C channels,
//          images split across threads. Test:
//          tests/kernels/test_pool.cpp, test_pool_backward.cpp (no benchmark yet).
#include "kernels/cpu/pool.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "core/error.h"
#include "kernels/math.h"
#include "kernels/pool_window.h"

namespace ember::kernels::cpu {

namespace {

// Below this many window taps in total a pooling op runs on one thread.
constexpr int64_t kPoolGrain = 32768;

// Calls f(plane, first output element) for every (n, c) plane of `in`,
// planes split across threads when the work is large enough.
template <class T, class F>
void for_each_plane(const View& out, const View& in, int64_t taps, F&& f) {
    const int64_t C = in.shape[1], planes = in.shape[0] * C, per = out.shape[2] * out.shape[3];
    const bool parallel = planes > 1 && planes * per * taps >= kPoolGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < planes; ++p)
        f(in.ptr<T>() + (p / C) * in.strides[0] + (p % C) * in.strides[1], p * per);
}

template <class T>
void max_impl(const View& values, const View& indices, const View& in, const Pool2dWindow& w) {
    using Acc = math::Acc<T>;
    const int64_t H = in.shape[2], W = in.shape[3], sy = in.strides[2], sx = in.strides[3];
    const int64_t OH = values.shape[2], OW = values.shape[3];
    T* const vout = values.ptr<T>();
    int64_t* const iout = indices.ptr<int64_t>();
    for_each_plane<T>(values, in, w.kh * w.kw, [&](const T* plane, int64_t first) {
        for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
                const MaxTap<Acc> m = max_window(
                    oy, ox, w, H, W, -std::numeric_limits<Acc>::infinity(),
                    [&](int64_t y, int64_t x) { return math::load(plane[y * sy + x * sx]); });
                vout[first + oy * OW + ox] = math::cast<T>(m.value);
                iout[first + oy * OW + ox] = m.index;
            }
    });
}

template <class T>
void avg_impl(const View& out, const View& in, const Pool2dWindow& w, bool count_include_pad) {
    using Acc = math::Acc<T>;
    const int64_t H = in.shape[2], W = in.shape[3], sy = in.strides[2], sx = in.strides[3];
    const int64_t OH = out.shape[2], OW = out.shape[3];
    T* const o = out.ptr<T>();
    for_each_plane<T>(out, in, w.kh * w.kw, [&](const T* plane, int64_t first) {
        for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
                const AvgWindow a = avg_window(oy, ox, w, H, W, count_include_pad);
                Acc sum = 0;
                for (int64_t y = a.y0; y < a.y1; ++y)
                    for (int64_t x = a.x0; x < a.x1; ++x) sum += math::load(plane[y * sy + x * sx]);
                o[first + oy * OW + ox] =
                    math::cast<T>(a.empty() ? Acc(0) : sum / Acc(a.divisor));
            }
    });
}

template <class T>
void adaptive_impl(const View& out, const View& in) {
    using Acc = math::Acc<T>;
    const int64_t H = in.shape[2], W = in.shape[3], sy = in.strides[2], sx = in.strides[3];
    const int64_t OH = out.shape[2], OW = out.shape[3];
    T* const o = out.ptr<T>();
    const int64_t taps = ((H + OH - 1) / OH + 1) * ((W + OW - 1) / OW + 1);
    for_each_plane<T>(out, in, taps, [&](const T* plane, int64_t first) {
        for (int64_t oy = 0; oy < OH; ++oy) {
            const OutRange ys = adaptive_window(oy, H, OH);
            for (int64_t ox = 0; ox < OW; ++ox) {
                const OutRange xs = adaptive_window(ox, W, OW);
                Acc sum = 0;
                for (int64_t y = ys.lo; y < ys.hi; ++y)
                    for (int64_t x = xs.lo; x < xs.hi; ++x) sum += math::load(plane[y * sy + x * sx]);
                o[first + oy * OW + ox] =
                    math::cast<T>(sum / Acc((ys.hi - ys.lo) * (xs.hi - xs.lo)));
            }
        }
    });
}

// A channels-last input (channels adjacent: strides[1] == 1) read as rows of
// C channels: each output pixel sums its window's pixels in the plane loop's
// order (y, then x) for every channel at once — the same sums, read
// contiguously instead of one strided walk per plane. Images split across
// threads.
template <class T>
void adaptive_channels_last(const View& out, const View& in) {
    using Acc = math::Acc<T>;
    const int64_t N = in.shape[0], C = in.shape[1], H = in.shape[2], W = in.shape[3];
    const int64_t OH = out.shape[2], OW = out.shape[3];
    const int64_t sn = in.strides[0], sy = in.strides[2], sx = in.strides[3];
    const T* const x = in.ptr<T>();
    T* const o = out.ptr<T>();
    const bool parallel = N > 1 && N * C * H * W >= kPoolGrain && !omp_in_parallel();
#pragma omp parallel if (parallel)
    {
        std::vector<Acc> sum(static_cast<size_t>(C));
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n)
            for (int64_t oy = 0; oy < OH; ++oy) {
                const OutRange ys = adaptive_window(oy, H, OH);
                for (int64_t ox = 0; ox < OW; ++ox) {
                    const OutRange xs = adaptive_window(ox, W, OW);
                    std::fill(sum.begin(), sum.end(), Acc(0));
                    for (int64_t y = ys.lo; y < ys.hi; ++y)
                        for (int64_t xx = xs.lo; xx < xs.hi; ++xx) {
                            const T* px = x + n * sn + y * sy + xx * sx;
                            for (int64_t c = 0; c < C; ++c) sum[size_t(c)] += math::load(px[c]);
                        }
                    const Acc count = Acc((ys.hi - ys.lo) * (xs.hi - xs.lo));
                    for (int64_t c = 0; c < C; ++c)
                        o[((n * C + c) * OH + oy) * OW + ox] =
                            math::cast<T>(sum[size_t(c)] / count);
                }
            }
    }
}

// ---- Backward ---------------------------------------------------------------
// Each grad_input plane is zeroed, then accumulated (+=) into, by the one
// thread that owns it, in output order: deterministic for any thread count.
// grad_input is contiguous and of the accumulation type (f32 for f16/bf16).

// Calls f(plane, grad_out element (p, 0, 0), grad_input plane) for every
// (n, c) plane p, planes split across threads when the work is large enough.
template <class T, class F>
void for_each_grad_plane(const View& dx, const View& dy, int64_t taps, F&& f) {
    using Acc = math::Acc<T>;
    const int64_t C = dy.shape[1], planes = dy.shape[0] * C;
    const int64_t hw = dx.shape[2] * dx.shape[3], per = dy.shape[2] * dy.shape[3];
    const bool parallel = planes > 1 && planes * per * taps >= kPoolGrain && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t p = 0; p < planes; ++p) {
        Acc* plane = dx.ptr<Acc>() + p * hw;
        std::fill(plane, plane + hw, Acc(0));
        f(p, dy.ptr<T>() + (p / C) * dy.strides[0] + (p % C) * dy.strides[1], plane);
    }
}

template <class T>
std::optional<int64_t> max_backward_impl(const View& dx, const View& dy, const View& indices) {
    using Acc = math::Acc<T>;
    const int64_t C = dy.shape[1], hw = dx.shape[2] * dx.shape[3];
    const int64_t OH = dy.shape[2], OW = dy.shape[3], sy = dy.strides[2], sx = dy.strides[3];
    const int64_t* const idx = indices.ptr<int64_t>();
    // The first out-of-range index per plane (planes are few next to their
    // elements); no throwing inside the parallel loop.
    std::vector<int64_t> bad(size_t(dy.shape[0] * C), -1);
    for_each_grad_plane<T>(dx, dy, 1, [&](int64_t p, const T* g, Acc* plane) {
        const int64_t* ip = idx + (p / C) * indices.strides[0] + (p % C) * indices.strides[1];
        for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
                const int64_t i = ip[oy * indices.strides[2] + ox * indices.strides[3]];
                if (i < 0 || i >= hw) {
                    if (bad[size_t(p)] < 0) bad[size_t(p)] = oy * OW + ox;
                    continue;
                }
                // Overlapping windows may pick the same element: the gradients add.
                plane[i] += math::load(g[oy * sy + ox * sx]);
            }
    });
    for (size_t p = 0; p < bad.size(); ++p)
        if (bad[p] >= 0) {
            const int64_t q = bad[p], c = int64_t(p) % C, n = int64_t(p) / C;
            return idx[n * indices.strides[0] + c * indices.strides[1] +
                       (q / OW) * indices.strides[2] + (q % OW) * indices.strides[3]];
        }
    return std::nullopt;
}

template <class T>
void avg_backward_impl(const View& dx, const View& dy, const Pool2dWindow& w,
                       bool count_include_pad) {
    using Acc = math::Acc<T>;
    const int64_t H = dx.shape[2], W = dx.shape[3];
    const int64_t OH = dy.shape[2], OW = dy.shape[3], sy = dy.strides[2], sx = dy.strides[3];
    for_each_grad_plane<T>(dx, dy, w.kh * w.kw, [&](int64_t, const T* g, Acc* plane) {
        for (int64_t oy = 0; oy < OH; ++oy)
            for (int64_t ox = 0; ox < OW; ++ox) {
                // The forward's window and divisor: each element summed
                // there gets grad / divisor.
                const AvgWindow a = avg_window(oy, ox, w, H, W, count_include_pad);
                if (a.empty()) continue;
                const Acc d = math::load(g[oy * sy + ox * sx]) / Acc(a.divisor);
                for (int64_t y = a.y0; y < a.y1; ++y)
                    for (int64_t x = a.x0; x < a.x1; ++x) plane[y * W + x] += d;
            }
    });
}

template <class T>
void adaptive_backward_impl(const View& dx, const View& dy) {
    using Acc = math::Acc<T>;
    const int64_t H = dx.shape[2], W = dx.shape[3];
    const int64_t OH = dy.shape[2], OW = dy.shape[3], sy = dy.strides[2], sx = dy.strides[3];
    const int64_t taps = ((H + OH - 1) / OH + 1) * ((W + OW - 1) / OW + 1);
    for_each_grad_plane<T>(dx, dy, taps, [&](int64_t, const T* g, Acc* plane) {
        for (int64_t oy = 0; oy < OH; ++oy) {
            const OutRange ys = adaptive_window(oy, H, OH);
            for (int64_t ox = 0; ox < OW; ++ox) {
                const OutRange xs = adaptive_window(ox, W, OW);
                const Acc d =
                    math::load(g[oy * sy + ox * sx]) / Acc((ys.hi - ys.lo) * (xs.hi - xs.lo));
                for (int64_t y = ys.lo; y < ys.hi; ++y)
                    for (int64_t x = xs.lo; x < xs.hi; ++x) plane[y * W + x] += d;
            }
        }
    });
}

// Windows that tile the plane (H % OH == 0, W % OW == 0) give each input
// element exactly one grad_out / window size: written straight into a
// channels-last grad_input of grad_out's dtype, rows of C channels per pixel
// (the value the accumulating loop's f32 plane holds, rounded once as its
// conversion would). Images split across threads.
template <class T>
void adaptive_backward_channels_last(const View& dx, const View& dy) {
    using Acc = math::Acc<T>;
    const int64_t N = dx.shape[0], C = dx.shape[1], H = dx.shape[2], W = dx.shape[3];
    const int64_t OH = dy.shape[2], OW = dy.shape[3], kh = H / OH, kw = W / OW;
    const int64_t sn = dx.strides[0], sy = dx.strides[2], sx = dx.strides[3];
    T* const gx = dx.ptr<T>();
    const T* const g = dy.ptr<T>();
    const bool parallel = N > 1 && N * C * H * W >= kPoolGrain && !omp_in_parallel();
#pragma omp parallel if (parallel)
    {
        std::vector<T> d(static_cast<size_t>(C));
#pragma omp for schedule(static)
        for (int64_t n = 0; n < N; ++n)
            for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OW; ++ox) {
                    for (int64_t c = 0; c < C; ++c)
                        d[size_t(c)] = math::cast<T>(
                            math::load(g[n * dy.strides[0] + c * dy.strides[1] +
                                         oy * dy.strides[2] + ox * dy.strides[3]]) /
                            Acc(kh * kw));
                    for (int64_t y = oy * kh; y < (oy + 1) * kh; ++y)
                        for (int64_t x = ox * kw; x < (ox + 1) * kw; ++x)
                            std::copy(d.begin(), d.end(), gx + n * sn + y * sy + x * sx);
                }
    }
}

// Checks the backward's views: grad_input contiguous of grad_out's accumulation type.
void check_grad_views(const View& dx, const View& dy) {
    EMBER_INTERNAL_ASSERT(dx.is_contiguous() && dx.ndim == 4 && dy.ndim == 4 &&
                          dx.shape[0] == dy.shape[0] && dx.shape[1] == dy.shape[1]);
    EMBER_INTERNAL_ASSERT(dx.dtype == (dy.dtype == DType::f64 ? DType::f64 : DType::f32));
}

}  // namespace

void max_pool2d(const View& values, const View& indices, const View& input, const Pool2dWindow& w) {
    EMBER_INTERNAL_ASSERT(values.is_contiguous() && indices.is_contiguous() &&
                          indices.dtype == DType::i64);
    visit_floating(input.dtype, "cpu pooling", [&](auto tag) {
        max_impl<typename decltype(tag)::type>(values, indices, input, w);
    });
}

void avg_pool2d(const View& out, const View& input, const Pool2dWindow& w, bool count_include_pad) {
    EMBER_INTERNAL_ASSERT(out.is_contiguous() && w.dh == 1 && w.dw == 1);
    visit_floating(input.dtype, "cpu pooling", [&](auto tag) {
        avg_impl<typename decltype(tag)::type>(out, input, w, count_include_pad);
    });
}

void adaptive_avg_pool2d(const View& out, const View& input) {
    EMBER_INTERNAL_ASSERT(out.is_contiguous());
    const bool rows = input.strides[1] == 1 && input.shape[1] > 1;
    visit_floating(input.dtype, "cpu pooling", [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (rows)
            adaptive_channels_last<T>(out, input);
        else
            adaptive_impl<T>(out, input);
    });
}

std::optional<int64_t> max_pool2d_backward(const View& grad_input, const View& grad_out,
                                           const View& indices) {
    check_grad_views(grad_input, grad_out);
    EMBER_INTERNAL_ASSERT(indices.dtype == DType::i64 && indices.ndim == 4);
    std::optional<int64_t> bad;
    visit_floating(grad_out.dtype, "cpu pooling", [&](auto tag) {
        bad = max_backward_impl<typename decltype(tag)::type>(grad_input, grad_out, indices);
    });
    return bad;
}

void avg_pool2d_backward(const View& grad_input, const View& grad_out, const Pool2dWindow& w,
                         bool count_include_pad) {
    check_grad_views(grad_input, grad_out);
    EMBER_INTERNAL_ASSERT(w.dh == 1 && w.dw == 1);
    visit_floating(grad_out.dtype, "cpu pooling", [&](auto tag) {
        avg_backward_impl<typename decltype(tag)::type>(grad_input, grad_out, w, count_include_pad);
    });
}

void adaptive_avg_pool2d_backward(const View& grad_input, const View& grad_out) {
    EMBER_INTERNAL_ASSERT(grad_input.ndim == 4 && grad_out.ndim == 4);
    if (grad_input.dtype == grad_out.dtype && grad_input.strides[1] == 1 &&
        grad_input.shape[2] % grad_out.shape[2] == 0 &&
        grad_input.shape[3] % grad_out.shape[3] == 0) {
        EMBER_INTERNAL_ASSERT(grad_input.shape[0] == grad_out.shape[0] &&
                              grad_input.shape[1] == grad_out.shape[1]);
        visit_floating(grad_out.dtype, "cpu pooling", [&](auto tag) {
            adaptive_backward_channels_last<typename decltype(tag)::type>(grad_input, grad_out);
        });
        return;
    }
    check_grad_views(grad_input, grad_out);
    visit_floating(grad_out.dtype, "cpu pooling", [&](auto tag) {
        adaptive_backward_impl<typename decltype(tag)::type>(grad_input, grad_out);
    });
}

}  // namespace ember::kernels::cpu

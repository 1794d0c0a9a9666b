// CPU 2-d pooling: max (with argmax indices), average, adaptive average.
//
// Math:    max: v = max over the window's in-bounds taps, i = y·W + x of it;
//          avg: Σ window / divisor (PyTorch's clipping and divisor rules);
//          adaptive: mean over rows [⌊y·H/OH⌋, ⌈(y+1)·H/OH⌉), same for columns.
// Layout:  input [N, C, H, W] with any strides; outputs contiguous; f32, f64,
//          f16, bf16 (summed in f32 for the half types, f64 for f64).
// Cost:    N·C·OH·OW·kH·kW reads and about as many FLOPs (compares or adds);
//          memory-bound. One (n, c) plane per loop iteration, planes split
//          across threads. Test: tests/kernels/test_pool.cpp (no benchmark yet).
#include "kernels/cpu/pool.h"

#include <omp.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/math.h"

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
                const int64_t y0 = oy * w.sh - w.ph, x0 = ox * w.sw - w.pw;
                Acc best = -std::numeric_limits<Acc>::infinity();
                int64_t arg = -1;
                for (int64_t i = 0; i < w.kh; ++i) {
                    const int64_t y = y0 + i * w.dh;
                    if (y < 0 || y >= H) continue;
                    for (int64_t j = 0; j < w.kw; ++j) {
                        const int64_t x = x0 + j * w.dw;
                        if (x < 0 || x >= W) continue;
                        const Acc v = math::load(plane[y * sy + x * sx]);
                        // The first tap always counts (an all -inf window still
                        // points inside); later a larger value or a NaN wins.
                        if (arg < 0 || v > best || std::isnan(v)) {
                            best = v;
                            arg = y * W + x;
                        }
                    }
                }
                vout[first + oy * OW + ox] = math::cast<T>(best);
                iout[first + oy * OW + ox] = arg;
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
                // The window clipped to the padded input (ceil_mode's last
                // window may hang past it) sets the divisor with padding...
                int64_t y0 = oy * w.sh - w.ph, x0 = ox * w.sw - w.pw;
                int64_t y1 = std::min(y0 + w.kh, H + w.ph), x1 = std::min(x0 + w.kw, W + w.pw);
                const int64_t padded = (y1 - y0) * (x1 - x0);
                // ...and clipped to the input, the elements summed.
                y0 = std::max<int64_t>(y0, 0), x0 = std::max<int64_t>(x0, 0);
                y1 = std::min(y1, H), x1 = std::min(x1, W);
                Acc sum = 0;
                for (int64_t y = y0; y < y1; ++y)
                    for (int64_t x = x0; x < x1; ++x) sum += math::load(plane[y * sy + x * sx]);
                const int64_t inside =
                    std::max<int64_t>(y1 - y0, 0) * std::max<int64_t>(x1 - x0, 0);
                const int64_t divisor = count_include_pad ? padded : inside;
                o[first + oy * OW + ox] = math::cast<T>(inside == 0 ? Acc(0) : sum / Acc(divisor));
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
            const int64_t y0 = oy * H / OH, y1 = ((oy + 1) * H + OH - 1) / OH;
            for (int64_t ox = 0; ox < OW; ++ox) {
                const int64_t x0 = ox * W / OW, x1 = ((ox + 1) * W + OW - 1) / OW;
                Acc sum = 0;
                for (int64_t y = y0; y < y1; ++y)
                    for (int64_t x = x0; x < x1; ++x) sum += math::load(plane[y * sy + x * sx]);
                o[first + oy * OW + ox] = math::cast<T>(sum / Acc((y1 - y0) * (x1 - x0)));
            }
        }
    });
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
    visit_floating(input.dtype, "cpu pooling",
                   [&](auto tag) { adaptive_impl<typename decltype(tag)::type>(out, input); });
}

}  // namespace ember::kernels::cpu

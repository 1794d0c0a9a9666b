// The index math of the CUDA pooling backwards (kernels/cuda/pool_plan.h),
// checked on the CPU: the output ranges each input element gathers from are
// exactly the outputs whose windows hold it (brute force over small sizes,
// and at the ends of huge ones, past 2^31), and the whole gather, emulated
// here with those functions, gives the CPU kernels' bits — for the forward's
// own max indices and for arbitrary ones.
#include <cstring>
#include <random>

#include "kernels/cuda/pool_plan.h"
#include "kernels/pool.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;
using kernels::OutRange;

namespace {

// PyTorch's pooled size (as kernels/pool.cpp): floor or ceil, and a last
// ceil-mode window starting in the right padding is dropped.
int64_t pooled(int64_t in, int64_t kk, int64_t s, int64_t p, bool ceil_mode) {
    const int64_t span = in + 2 * p - kk + (ceil_mode ? s - 1 : 0);
    int64_t out = kernels::cuda::floor_div(span, s) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
}

// {lo, hi} of the o in [0, out) for which holds(o), requiring them contiguous.
template <class F>
OutRange brute(int64_t out, F holds) {
    int64_t lo = -1, hi = -1;
    for (int64_t o = 0; o < out; ++o)
        if (holds(o)) {
            if (lo < 0) lo = o;
            REQUIRE(hi < 0);  // a gap: not a range
        } else if (lo >= 0 && hi < 0) {
            hi = o;
        }
    if (lo < 0) return {0, 0};
    return {lo, hi < 0 ? out : hi};
}

void check_same(OutRange got, OutRange want) {
    if (want.lo >= want.hi) {
        CHECK(got.lo >= got.hi);
        return;
    }
    CHECK(got.lo == want.lo);
    CHECK(got.hi == want.hi);
}

std::vector<float> floats(const Tensor& t) { return t.contiguous().to_vector<float>(); }

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cuda pool plan: avg_cover is exactly the windows that sum an input row", "[plan][pool]") {
    for (int64_t kk = 1; kk <= 5; ++kk)
        for (int64_t s = 1; s <= 4; ++s)
            for (int64_t p = 0; p <= kk / 2; ++p)
                for (int64_t in = 1; in <= 11; ++in)
                    for (bool ceil_mode : {false, true}) {
                        const int64_t out = pooled(in, kk, s, p, ceil_mode);
                        if (out < 1) continue;
                        const kernels::Pool2dWindow w{kk, 1, s, 1, p, 0};
                        for (int64_t y = 0; y < in; ++y) {
                            INFO("k " << kk << " s " << s << " p " << p << " in " << in << " y "
                                      << y << (ceil_mode ? " ceil" : ""));
                            // The rows avg_window sums for output o (the CPU's rule).
                            const OutRange want = brute(out, [&](int64_t o) {
                                const kernels::AvgWindow a =
                                    kernels::avg_window(o, 0, w, in, 1, true);
                                return a.y0 <= y && y < a.y1;
                            });
                            check_same(kernels::cuda::avg_cover(y, kk, s, p, out), want);
                        }
                    }
}

TEST_CASE("cuda pool plan: avg_window's divisor follows PyTorch's rules", "[plan][pool]") {
    // kernel 3, stride 2, padding 1 over 5 rows: windows [-1, 2), [1, 4), [3, 6).
    const kernels::Pool2dWindow w{3, 3, 2, 2, 1, 1};
    const auto a = kernels::avg_window(0, 2, w, 5, 5, true);
    CHECK((a.y0 == 0 && a.y1 == 2 && a.x0 == 3 && a.x1 == 5));
    CHECK(a.divisor == 9);  // padding counts, the window is inside the padded input
    CHECK(kernels::avg_window(0, 2, w, 5, 5, false).divisor == 4);
    // Ceil mode's last window hangs past the padded input: only up to it counts.
    const kernels::Pool2dWindow c{3, 3, 2, 2, 0, 0};
    CHECK(kernels::avg_window(2, 2, c, 5, 5, true).divisor == 1);
}

TEST_CASE("cuda pool plan: adaptive windows and their cover agree", "[plan][pool]") {
    for (int64_t in = 1; in <= 13; ++in)
        for (int64_t out = 1; out <= 13; ++out)
            for (int64_t y = 0; y < in; ++y) {
                INFO("in " << in << " out " << out << " y " << y);
                const OutRange want = brute(out, [&](int64_t o) {
                    const OutRange r = kernels::adaptive_window(o, in, out);
                    return r.lo <= y && y < r.hi;
                });
                CHECK(want.lo < want.hi);  // every input element is pooled somewhere
                check_same(kernels::cuda::adaptive_cover(y, in, out), want);
            }
    // Past 2^31 (in·out below 2^63, as the CPU twin's products need): the
    // ends of the cover still bracket exactly.
    const int64_t in = (int64_t(1) << 32) + 7, out = (int64_t(1) << 30) + 3;
    for (int64_t y : {int64_t(0), in / 2 + 1, in - 1}) {
        const OutRange c = kernels::cuda::adaptive_cover(y, in, out);
        REQUIRE(c.lo < c.hi);
        for (int64_t o : {c.lo, c.hi - 1}) {
            const OutRange r = kernels::adaptive_window(o, in, out);
            CHECK((r.lo <= y && y < r.hi));
        }
        if (c.lo > 0) CHECK(kernels::adaptive_window(c.lo - 1, in, out).hi <= y);
        if (c.hi < out) CHECK(kernels::adaptive_window(c.hi, in, out).lo > y);
    }
}

TEST_CASE("cuda pool plan: avg_cover past 2^31", "[plan][pool]") {
    const int64_t in = (int64_t(1) << 32) + 11, kk = 7, s = 3, p = 3;
    const int64_t out = pooled(in, kk, s, p, false);
    for (int64_t y : {int64_t(0), int64_t(1) << 31, in - 1}) {
        const OutRange c = kernels::cuda::avg_cover(y, kk, s, p, out);
        REQUIRE(c.lo < c.hi);
        for (int64_t o = c.lo - 1; o <= c.hi; ++o) {
            const bool inside = o * s - p <= y && y < o * s - p + kk && o >= 0 && o < out;
            CHECK(inside == (o >= c.lo && o < c.hi));
        }
    }
}

TEST_CASE("cuda pool plan: reach_cover finds every output within reach", "[plan][pool]") {
    for (int64_t in = 1; in <= 12; ++in)
        for (int64_t out = 1; out <= 12; ++out)
            for (int64_t reach = 0; reach <= 3; ++reach) {
                const double ratio = kernels::cuda::reach_ratio(in, out);
                for (int64_t o = 1; o < out; ++o)  // the estimate is monotone
                    CHECK(kernels::cuda::reach_estimate(o - 1, ratio) <=
                          kernels::cuda::reach_estimate(o, ratio));
                for (int64_t y = 0; y < in; ++y) {
                    const OutRange want = brute(out, [&](int64_t o) {
                        const int64_t d = y - kernels::cuda::reach_estimate(o, ratio);
                        return d <= reach && -d <= reach;
                    });
                    check_same(kernels::cuda::reach_cover(y, reach, ratio, out), want);
                }
            }
    // Huge planes: the range is still exact at its ends.
    const int64_t in = (int64_t(1) << 40) + 5, out = (int64_t(1) << 39) + 1;
    const double ratio = kernels::cuda::reach_ratio(in, out);
    const int64_t y = in / 3, reach = 5;
    const OutRange c = kernels::cuda::reach_cover(y, reach, ratio, out);
    REQUIRE(c.lo < c.hi);
    auto near = [&](int64_t o) {
        const int64_t d = y - kernels::cuda::reach_estimate(o, ratio);
        return d <= reach && -d <= reach;
    };
    CHECK(near(c.lo));
    CHECK(near(c.hi - 1));
    CHECK(!near(c.lo - 1));
    CHECK(!near(c.hi));
}

// ---- The gather of the CUDA backwards, emulated on the CPU --------------------

namespace {

// d input [P, H, W] of avg_pool2d as pool.cu's avg_backward_kernel computes it.
std::vector<float> emulate_avg_backward(const Tensor& dy, int64_t H, int64_t W,
                                        const kernels::Pool2dWindow& w, bool cip) {
    const std::vector<float> g = floats(dy);
    const int64_t OH = dy.size(2), OW = dy.size(3), P = dy.size(0) * dy.size(1);
    std::vector<float> dx(size_t(P * H * W));
    for (int64_t e = 0; e < P * H * W; ++e) {
        const int64_t x = e % W, y = e / W % H, p = e / (H * W);
        const OutRange ys = kernels::cuda::avg_cover(y, w.kh, w.sh, w.ph, OH),
                       xs = kernels::cuda::avg_cover(x, w.kw, w.sw, w.pw, OW);
        float acc = 0;
        for (int64_t oy = ys.lo; oy < ys.hi; ++oy)
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox)
                acc += g[size_t((p * OH + oy) * OW + ox)] /
                       float(kernels::avg_window(oy, ox, w, H, W, cip).divisor);
        dx[size_t(e)] = acc;
    }
    return dx;
}

std::vector<float> emulate_adaptive_backward(const Tensor& dy, int64_t H, int64_t W) {
    const std::vector<float> g = floats(dy);
    const int64_t OH = dy.size(2), OW = dy.size(3), P = dy.size(0) * dy.size(1);
    std::vector<float> dx(size_t(P * H * W));
    for (int64_t e = 0; e < P * H * W; ++e) {
        const int64_t x = e % W, y = e / W % H, p = e / (H * W);
        const OutRange ys = kernels::cuda::adaptive_cover(y, H, OH),
                       xs = kernels::cuda::adaptive_cover(x, W, OW);
        float acc = 0;
        for (int64_t oy = ys.lo; oy < ys.hi; ++oy) {
            const OutRange wy = kernels::adaptive_window(oy, H, OH);
            for (int64_t ox = xs.lo; ox < xs.hi; ++ox) {
                const OutRange wx = kernels::adaptive_window(ox, W, OW);
                acc += g[size_t((p * OH + oy) * OW + ox)] /
                       float((wy.hi - wy.lo) * (wx.hi - wx.lo));
            }
        }
        dx[size_t(e)] = acc;
    }
    return dx;
}

// The three steps of pool.cu's max backward: reach, tables, gather.
std::vector<float> emulate_max_backward(const Tensor& dy, const Tensor& indices, int64_t H,
                                        int64_t W, int64_t* reach_y = nullptr) {
    const std::vector<float> g = floats(dy);
    const std::vector<int64_t> idx = indices.contiguous().to_vector<int64_t>();
    const int64_t OH = dy.size(2), OW = dy.size(3), P = dy.size(0) * dy.size(1);
    const double ry = kernels::cuda::reach_ratio(H, OH), rx = kernels::cuda::reach_ratio(W, OW);
    int64_t reach[2] = {0, 0};
    for (int64_t e = 0; e < P * OH * OW; ++e) {
        const int64_t i = idx[size_t(e)], ox = e % OW, oy = e / OW % OH;
        if (i < 0 || i >= H * W) continue;
        reach[0] = std::max(reach[0], std::abs(i / W - kernels::cuda::reach_estimate(oy, ry)));
        reach[1] = std::max(reach[1], std::abs(i % W - kernels::cuda::reach_estimate(ox, rx)));
    }
    if (reach_y) *reach_y = reach[0];
    std::vector<OutRange> rows, cols;
    for (int64_t y = 0; y < H; ++y) rows.push_back(kernels::cuda::reach_cover(y, reach[0], ry, OH));
    for (int64_t x = 0; x < W; ++x) cols.push_back(kernels::cuda::reach_cover(x, reach[1], rx, OW));
    std::vector<float> dx(size_t(P * H * W));
    for (int64_t e = 0; e < P * H * W; ++e) {
        const int64_t x = e % W, y = e / W % H, p = e / (H * W);
        float acc = 0;
        for (int64_t oy = rows[size_t(y)].lo; oy < rows[size_t(y)].hi; ++oy)
            for (int64_t ox = cols[size_t(x)].lo; ox < cols[size_t(x)].hi; ++ox) {
                const size_t q = size_t((p * OH + oy) * OW + ox);
                if (idx[q] == y * W + x) acc += g[q];
            }
        dx[size_t(e)] = acc;
    }
    return dx;
}

struct Window {
    Int2 kernel, stride, padding, dilation;
    bool ceil_mode;
};

const Window kWindows[] = {
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},  // overlapping (ResNet's stem)
    {{2, 2}, {0, 0}, {0, 0}, {1, 1}, false},  // stride = kernel
    {{3, 2}, {1, 2}, {1, 0}, {1, 1}, true},   // stride 1 rows: up to 3 windows per element
    {{3, 3}, {2, 1}, {0, 1}, {1, 1}, true},   // ceil mode, a last window past the input
    {{5, 3}, {3, 2}, {2, 1}, {1, 1}, false},
    {{2, 3}, {1, 1}, {1, 1}, {2, 2}, false},  // dilation (max only)
};

}  // namespace

TEST_CASE("cuda pool plan: the emulated gathers give the CPU backwards' bits", "[plan][pool]") {
    const Shape inputs[] = {{1, 1, 1, 1}, {2, 3, 7, 9}, {1, 2, 11, 6}, {3, 1, 5, 13}};
    uint64_t seed = 10;
    for (const Shape& shape : inputs)
        for (const Window& win : kWindows) {
            const Tensor x = random_tensor(shape, DType::f32, ++seed);
            const Int2 st = win.stride[0] == 0 ? win.kernel : win.stride;
            kernels::MaxPool2dResult m;
            try {  // windows too large for the smallest inputs: skip them
                m = kernels::max_pool2d(x, win.kernel, win.stride, win.padding, win.dilation,
                                        win.ceil_mode);
            } catch (const Error&) {
                continue;
            }
            INFO("input " << shape_str(shape) << " kernel " << win.kernel[0] << "x"
                          << win.kernel[1]);
            const Tensor dy = random_tensor(m.values.shape(), DType::f32, ++seed);
            const int64_t H = shape[2], W = shape[3];
            int64_t reach = -1;
            CHECK(same_bits(emulate_max_backward(dy, m.indices, H, W, &reach),
                            floats(kernels::max_pool2d_backward(dy, x, m.indices))));
            // The forward's indices stay within the kernel of the estimate.
            CHECK(reach <= win.kernel[0] * win.dilation[0] + win.padding[0] + st[0]);
            // Ties everywhere (a constant input): every window picks its first tap.
            const Tensor flat = full(shape, 1.0);
            const Tensor ties = kernels::max_pool2d(flat, win.kernel, win.stride, win.padding,
                                                    win.dilation, win.ceil_mode)
                                    .indices;
            CHECK(same_bits(emulate_max_backward(dy, ties, H, W),
                            floats(kernels::max_pool2d_backward(dy, x, ties))));
            // Arbitrary in-plane indices, not from any window.
            const Tensor any = random_tensor(m.indices.shape(), DType::i64, ++seed, 0,
                                             double(H * W));
            CHECK(same_bits(emulate_max_backward(dy, any, H, W),
                            floats(kernels::max_pool2d_backward(dy, x, any))));
            if (win.dilation[0] != 1) continue;
            for (bool cip : {true, false}) {
                const Tensor y =
                    kernels::avg_pool2d(x, win.kernel, win.stride, win.padding, win.ceil_mode, cip);
                const Tensor g = random_tensor(y.shape(), DType::f32, ++seed);
                const kernels::Pool2dWindow w{win.kernel[0], win.kernel[1],  st[0],
                                              st[1],         win.padding[0], win.padding[1]};
                CHECK(
                    same_bits(emulate_avg_backward(g, H, W, w, cip),
                              floats(kernels::avg_pool2d_backward(
                                  g, x, win.kernel, win.stride, win.padding, win.ceil_mode, cip))));
            }
        }
    for (const Shape& shape : inputs)
        for (Int2 out : {Int2{1, 1}, Int2{3, 4}, Int2{5, 5}, Int2{13, 2}}) {
            const Tensor x = random_tensor(shape, DType::f32, ++seed);
            const Tensor g = random_tensor({shape[0], shape[1], out[0], out[1]}, DType::f32, ++seed);
            CHECK(same_bits(emulate_adaptive_backward(g, shape[2], shape[3]),
                            floats(kernels::adaptive_avg_pool2d_backward(g, x))));
        }
}

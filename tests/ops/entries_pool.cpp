// The pooling entries of the op table: max_pool2d (values and indices),
// avg_pool2d, adaptive_avg_pool2d and their backwards, against naive f64 loops
// over PyTorch's windows. Both backends walk the windows of
// kernels/pool_window.h in one order, so tests/cuda/test_cuda_ops.cpp compares
// CUDA with the CPU bit for bit on the cuda_cases.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "autograd/ops/nn_ops.h"
#include "kernels/pool.h"
#include "ops/op_table.h"

namespace ember::test {

namespace {

const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::f16, DType::bf16};

// The Args of a pooling case: window, stride ({0, 0}: the kernel's), padding,
// dilation and ceil_mode as the fronts take them; adaptive pooling's output
// size in window; avg_pool2d's count_include_pad. How max pooling's inputs
// are drawn (args.draw): see max_inputs and max_backward_inputs.
Int2 stride_of(const Args& a) { return a.stride == Int2{0, 0} ? a.window : a.stride; }

// ---- The f64 reference, from PyTorch's definitions ----

// A 3-d or 4-d input as planes of H×W, and its pooled output [..., OH, OW].
struct Geometry {
    int64_t planes = 1, H = 0, W = 0, OH = 0, OW = 0;
    Shape out;
    std::string error;  // non-empty: the front must throw this
};

Geometry planes_of(const Shape& in, int64_t oh, int64_t ow) {
    Geometry g;
    for (size_t d = 0; d + 2 < in.size(); ++d) g.planes *= in[d], g.out.push_back(in[d]);
    g.H = in[in.size() - 2], g.W = in.back(), g.OH = oh, g.OW = ow;
    g.out.push_back(oh), g.out.push_back(ow);
    return g;
}

// ⌊(in + 2p − d(k − 1) − 1) / s⌋ + 1, ⌈⌉ with ceil_mode, where a last window
// must start inside the input or its left padding.
int64_t pooled(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    const double span = double(in + 2 * p - d * (k - 1) - 1) / double(s);
    int64_t out = int64_t(ceil_mode ? std::ceil(span) : std::floor(span)) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) --out;
    return out;
}

// The output of a max (dilated) or average window, or the error the front throws.
Geometry window_geometry(const Shape& in, const Args& a, bool dilated, const char* op) {
    const Int2 k = a.window, s = stride_of(a), p = a.padding;
    const Int2 d = dilated ? a.dilation : Int2{1, 1};
    std::ostringstream err;
    Geometry g;
    if (std::min({k[0], k[1], s[0], s[1], d[0], d[1]}) < 1) {
        err << op << ": expected kernel, stride and dilation >= 1";
    } else if (p[0] < 0 || p[1] < 0 || 2 * p[0] > k[0] || 2 * p[1] > k[1]) {
        err << op << ": padding " << shape_str({p[0], p[1]})
            << " must be between 0 and half the kernel";
    } else {
        const int64_t H = in[in.size() - 2], W = in.back();
        g = planes_of(in, pooled(H, k[0], s[0], p[0], d[0], a.ceil_mode),
                      pooled(W, k[1], s[1], p[1], d[1], a.ceil_mode));
        if (g.OH < 1 || g.OW < 1) err << op << ": output size " << g.OH << "x" << g.OW;
        // Every window must see an input element.
        const int64_t sizes[2] = {H, W}, outs[2] = {g.OH, g.OW};
        for (int ax = 0; ax < 2 && err.str().empty(); ++ax)
            for (int64_t i = 0; i < outs[ax] && err.str().empty(); ++i) {
                bool hit = false;
                for (int64_t j = 0; j < k[ax]; ++j) {
                    const int64_t at = i * s[ax] - p[ax] + j * d[ax];
                    hit = hit || (at >= 0 && at < sizes[ax]);
                }
                if (!hit) err << op << ": window " << i << " of dim " << ax + 2 << " covers no";
            }
    }
    g.error = err.str();
    return g;
}

// An average window: rows [y0, y1), columns [x0, x1) and the divisor.
struct Avg {
    int64_t y0, y1, x0, x1;
    double divisor;
};
// Clipped to the padded input for the divisor with padding, to the input for the sum.
Avg avg_window(int64_t oy, int64_t ox, const Geometry& g, const Args& a) {
    const Int2 s = stride_of(a), p = a.padding;
    Avg w{oy * s[0] - p[0], oy * s[0] - p[0] + a.window[0], ox * s[1] - p[1],
          ox * s[1] - p[1] + a.window[1], 0};
    w.y1 = std::min(w.y1, g.H + a.padding[0]), w.x1 = std::min(w.x1, g.W + a.padding[1]);
    const double padded = double((w.y1 - w.y0) * (w.x1 - w.x0));
    w.y0 = std::max<int64_t>(w.y0, 0), w.x0 = std::max<int64_t>(w.x0, 0);
    w.y1 = std::min(w.y1, g.H), w.x1 = std::min(w.x1, g.W);
    w.divisor = a.count_include_pad ? padded : double((w.y1 - w.y0) * (w.x1 - w.x0));
    return w;
}
// Adaptive windows: rows [⌊oy·H/OH⌋, ⌈(oy+1)·H/OH⌉), the same for columns.
Avg adaptive_window(int64_t oy, int64_t ox, const Geometry& g) {
    const int64_t y0 = oy * g.H / g.OH, y1 = ((oy + 1) * g.H + g.OH - 1) / g.OH;
    const int64_t x0 = ox * g.W / g.OW, x1 = ((ox + 1) * g.W + g.OW - 1) / g.OW;
    return {y0, y1, x0, x1, double((y1 - y0) * (x1 - x0))};
}

Geometry adaptive_geometry(const Shape& in, Int2 out, const char* op) {
    Geometry g = planes_of(in, out[0], out[1]);
    if (out[0] < 1 || out[1] < 1)
        g.error = std::string(op) + ": output size " + shape_str({out[0], out[1]});
    else if (g.H < 1 || g.W < 1)
        g.error = "has an empty plane";
    return g;
}

Expected failure(const std::string& error) {
    Expected e;
    e.error = error;
    return e;
}

Expected max_ref(const Sample& s) {
    const Tensor& x = s.inputs[0];
    const Geometry g = window_geometry(x.shape(), s.args, true, "max_pool2d");
    if (!g.error.empty()) return failure(g.error);
    const Int2 k = s.args.window, st = stride_of(s.args), p = s.args.padding, d = s.args.dilation;
    const std::vector<double> v = values(x);
    std::vector<double> val, idx;
    for (int64_t q = 0; q < g.planes; ++q)
        for (int64_t oy = 0; oy < g.OH; ++oy)
            for (int64_t ox = 0; ox < g.OW; ++ox) {
                double best = 0;
                int64_t at = -1;  // the first maximum; a NaN wins (the last NaN)
                for (int64_t i = 0; i < k[0]; ++i)
                    for (int64_t j = 0; j < k[1]; ++j) {
                        const int64_t y = oy * st[0] - p[0] + i * d[0];
                        const int64_t xx = ox * st[1] - p[1] + j * d[1];
                        if (y < 0 || y >= g.H || xx < 0 || xx >= g.W) continue;
                        const double e = v[size_t((q * g.H + y) * g.W + xx)];
                        if (at < 0 || e > best || std::isnan(e)) best = e, at = y * g.W + xx;
                    }
                val.push_back(best), idx.push_back(double(at));
            }
    return Expected(std::vector<ExpectedOutput>{{g.out, x.dtype(), val}, {g.out, DType::i64, idx}});
}

// An average (or adaptive) pooling forward: the mean of each window.
template <class Window>
Expected avg_forward(const Tensor& x, const Geometry& g, Window window) {
    if (!g.error.empty()) return failure(g.error);
    const std::vector<double> v = values(x);
    std::vector<double> out;
    for (int64_t q = 0; q < g.planes; ++q)
        for (int64_t oy = 0; oy < g.OH; ++oy)
            for (int64_t ox = 0; ox < g.OW; ++ox) {
                const Avg w = window(oy, ox);
                double sum = 0;
                for (int64_t y = w.y0; y < w.y1; ++y)
                    for (int64_t xx = w.x0; xx < w.x1; ++xx)
                        sum += v[size_t((q * g.H + y) * g.W + xx)];
                out.push_back(sum / w.divisor);
            }
    return Expected{g.out, x.dtype(), out};
}

// Its backward: each input element gets grad / divisor of every window that summed it.
template <class Window>
Expected avg_backward(const Tensor& grad, const Tensor& x, const Geometry& g, Window window) {
    if (!g.error.empty()) return failure(g.error);
    const std::vector<double> gy = values(grad);
    std::vector<double> dx(size_t(x.numel()), 0.0);
    for (int64_t q = 0; q < g.planes; ++q)
        for (int64_t oy = 0; oy < g.OH; ++oy)
            for (int64_t ox = 0; ox < g.OW; ++ox) {
                const Avg w = window(oy, ox);
                const double share = gy[size_t((q * g.OH + oy) * g.OW + ox)] / w.divisor;
                for (int64_t y = w.y0; y < w.y1; ++y)
                    for (int64_t xx = w.x0; xx < w.x1; ++xx)
                        dx[size_t((q * g.H + y) * g.W + xx)] += share;
            }
    return Expected{x.shape(), x.dtype(), dx};
}

Expected max_backward_ref(const Sample& s) {
    const Tensor &grad = s.inputs[0], &x = s.inputs[1];
    const Geometry g = planes_of(x.shape(), grad.size(-2), grad.size(-1));
    const std::vector<double> gy = values(grad), idx = values(s.inputs[2]);
    std::vector<double> dx(size_t(x.numel()), 0.0);
    for (size_t i = 0; i < idx.size(); ++i) {
        if (idx[i] < 0 || idx[i] >= double(g.H * g.W))
            return failure("max_pool2d_backward: index " + std::to_string(int64_t(idx[i])) +
                           " in indices");
        const int64_t plane = int64_t(i) / (g.OH * g.OW);
        dx[size_t(plane * g.H * g.W + int64_t(idx[i]))] += gy[i];
    }
    return Expected{x.shape(), x.dtype(), dx};
}

// ---- Tolerances ----

// A result summed from at most n terms in the accumulation dtype (f32, or
// f64 for f64) and rounded once to t, where Σ|term| <= bound: rtol for the
// rounding, and twice Higham's γ_n·Σ|term| for the sum.
Tolerance summed(DType t, double n, double bound) {
    const double u = t == DType::f64 ? 0x1p-53 : 0x1p-24;
    return {rtol_for(t), 2 * n * u * bound};
}
// The most outputs of one plane that picked one element of it.
int64_t most_picks(const Tensor& indices, int64_t hw) {
    const std::vector<double> v = values(indices);
    const size_t per = size_t(indices.size(-2) * indices.size(-1));
    std::vector<int64_t> count;
    int64_t most = 1;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i % per == 0) count.assign(size_t(hw), 0);
        if (v[i] >= 0 && v[i] < double(hw)) most = std::max(most, ++count[size_t(v[i])]);
    }
    return most;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Adaptive windows along an axis: the most input rows of one window and the
// most windows over one input row.
int64_t adaptive_taps(int64_t in, int64_t out) { return ceil_div(in, out) + 1; }

// ---- Inputs ----

// Uniform in [-2, 2); with draw.ties, values from {0, 1, 2} (ties in most
// windows: the first maximum wins) with a NaN every 7th element and −inf
// every 11th.
std::vector<Tensor> max_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    if (!c.args.draw.ties) return {random_input(c.shapes[0], sig[0], {}, seed * 31)};
    std::vector<double> v =
        values(random_input(c.shapes[0], DType::f64, {.lo = 0, .hi = 3, .ties = true}, seed));
    for (size_t i = 0; i < v.size(); ++i) {
        if (i % 7 == 3) v[i] = std::numeric_limits<double>::quiet_NaN();
        if (i % 11 == 5) v[i] = -std::numeric_limits<double>::infinity();
    }
    return {from_vector(v, c.shapes[0]).to(sig[0])};
}

// grad_output, input (the case's shape) and indices: the forward's; with
// draw.any_index any in the plane (overlapping picks add), with draw.bad the
// forward's but the last one that value (outside the plane: an error).
std::vector<Tensor> max_backward_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    const Args& a = c.args;
    const Tensor x = random_input(c.shapes[0], sig[1], {}, seed * 31 + 1);
    const kernels::MaxPool2dResult m =
        kernels::max_pool2d(x, a.window, a.stride, a.padding, a.dilation, a.ceil_mode);
    Tensor idx = m.indices;
    const int64_t hw = x.size(-2) * x.size(-1);
    if (a.draw.any_index)
        idx = random_input(idx.shape(), DType::i64, {.int_lo = 0, .int_hi = double(hw)}, seed);
    if (a.draw.bad) {
        std::vector<int64_t> v = idx.to_vector<int64_t>();
        v.back() = *a.draw.bad;
        idx = from_vector(v, idx.shape());
    }
    return {random_input(m.values.shape(), sig[0], {}, seed * 31), x, idx};
}

// grad_output of the pooled shape, and input (the case's shape).
std::vector<Tensor> avg_backward_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    const Geometry g = window_geometry(c.shapes[0], c.args, false, "avg_pool2d");
    return {random_input(g.out, sig[0], {}, seed * 31),
            random_input(c.shapes[0], sig[1], {}, seed)};
}
std::vector<Tensor> adaptive_backward_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    const Geometry g = planes_of(c.shapes[0], c.args.window[0], c.args.window[1]);
    return {random_input(g.out, sig[0], {}, seed * 31),
            random_input(c.shapes[0], sig[1], {}, seed)};
}

// ---- Cases ----

// Odd sizes, a 1×1 plane, 3-d inputs; empty batches for the reference only.
const std::vector<Shape> kShapes = {
    {1, 1, 1, 1}, {2, 3, 7, 9}, {3, 2, 13, 11}, {5, 17, 6}, {4, 8, 33, 31}};
const std::vector<Shape> kEmpty = {{0, 2, 5, 5}, {2, 0, 4, 4}};
// kernel, stride, padding, dilation, ceil_mode.
const std::vector<Args> kWindows = {
    {.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},  // ResNet's stem: overlapping
    {.window = {2, 2}, .stride = {0, 0}},                     // stride = kernel
    {.window = {3, 2}, .stride = {1, 2}, .padding = {1, 0}, .ceil_mode = true},  // ceil mode
    {.window = {3, 3}, .stride = {2, 1}, .padding = {0, 1}, .ceil_mode = true},  // past the input
    {.window = {5, 3}, .stride = {3, 2}, .padding = {2, 1}},
    // ceil mode whose last window would start in the right padding (odd sizes): dropped
    {.window = {2, 2}, .stride = {2, 2}, .padding = {1, 1}, .ceil_mode = true},
    {.window = {2, 3}, .stride = {1, 1}, .padding = {1, 1}, .dilation = {2, 2}},  // max only
};
// Errors: padding over half the kernel; an output below 1; a dilated window
// that misses a 2-row input.
const std::vector<Case> kBadWindows = {
    {{{1, 2, 6, 6}}, {.window = {2, 2}, .padding = {2, 0}}},
    {{{1, 2, 2, 6}}, {.window = {3, 3}}},
    {{{1, 1, 2, 6}}, {.window = {2, 2}, .stride = {1, 1}, .padding = {1, 1}, .dilation = {3, 1}}},
};
const std::vector<Int2> kOutSizes = {{1, 1}, {3, 4}, {5, 5}, {13, 2}};

// Every shape in every window (with each divisor rule for average pooling);
// windows too large for a shape are error cases, kept out of the CUDA ones.
std::vector<Case> window_cases(const std::vector<Shape>& shapes, bool dilated, bool both_divisors,
                               bool valid_only) {
    std::vector<Case> out;
    for (const Shape& shape : shapes)
        for (const Args& w : kWindows) {
            if (!dilated && w.dilation != Int2{1, 1}) continue;
            if (valid_only && !window_geometry(shape, w, dilated, "").error.empty()) continue;
            for (bool cip :
                 both_divisors ? std::vector<bool>{true, false} : std::vector<bool>{true}) {
                Case c{{shape}, w};
                c.args.count_include_pad = cip;
                out.push_back(c);
            }
        }
    return out;
}
std::vector<Case> adaptive_cases(const std::vector<Shape>& shapes) {
    std::vector<Case> out;
    for (const Shape& shape : shapes)
        for (Int2 o : kOutSizes) out.push_back({{shape}, {.window = o}});
    return out;
}
std::vector<Shape> with_empty(std::vector<Shape> s) {
    s.insert(s.end(), kEmpty.begin(), kEmpty.end());
    return s;
}
// A batch of many blocks (grid-stride loops on a GPU): ResNet's stem pooling.
const Case kLarge = {{{16, 64, 57, 55}}, {.window = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}};

// ---- Entries ----

// n is the batch of bench/nn.cpp's pooling rows.
int64_t batch(bool quick) { return quick ? 8 : 128; }
double nbytes(const Tensor& t) { return double(t.numel() * t.element_size()); }

OpEntry pool_entry(const char* name, bool backward) {
    OpEntry e;
    e.name = name;
    e.family = Family::pool;
    for (DType t : kFloats) e.dtypes.push_back(backward ? Signature{t, t} : Signature{t});
    e.domains = {Domain{}};
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::strided, Layout::channels_last};
    // Both backends walk kernels/pool_window.h's windows in one order: bit for bit.
    e.cuda = true;
    e.cuda_exact = true;
    e.cuda_layouts = {Layout::contiguous, Layout::transposed, Layout::channels_last};
    return e;
}

// The bench row `label` on `shape` with `args`.
void bench(OpEntry& e, const char* label, Shape shape, Args args) {
    e.bench_cases = [shape, args](bool quick) {
        Shape s = shape;
        s[0] = batch(quick);
        return std::vector<Case>{{{s}, args}};
    };
    e.bench_label = [label = std::string(label)](const Case&) { return label; };
}

const Args kMaxBench = {.window = {2, 2}, .stride = {0, 0}};  // resnet8's 2×2 max pool
const Args kAvgBench = {.window = {3, 3}, .stride = {1, 1}, .padding = {1, 1}};
const Args kAdaptiveBench = {.window = {1, 1}};  // a global average pool

OpEntry max_pool() {
    OpEntry e = pool_entry("max_pool2d", false);
    e.generate = max_inputs;
    e.raw = [](const std::vector<Tensor>& x, const Args& a) -> Outputs {
        const kernels::MaxPool2dResult r =
            kernels::max_pool2d(x[0], a.window, a.stride, a.padding, a.dilation, a.ceil_mode);
        return {r.values, r.indices};
    };
    e.differentiable = [](const std::vector<Tensor>& x, const Args& a) {
        return ember::max_pool2d(x[0], a.window, a.stride, a.padding, a.dilation, a.ceil_mode);
    };
    e.reference = max_ref;
    e.tolerance = [](DType, const Sample&) { return Tolerance{0, 0}; };  // one of the inputs
    e.cases = window_cases(with_empty(kShapes), true, false, false);
    e.cases.insert(e.cases.end(), kBadWindows.begin(), kBadWindows.end());
    e.cuda_cases = window_cases(kShapes, true, false, true);
    for (const Args& w : {kWindows[0], kWindows[2], kWindows[6]}) {  // ties, NaN and -inf
        Case ties = {{{2, 3, 9, 10}}, w};
        ties.args.draw.ties = true;
        e.cases.push_back(ties);
        e.cuda_cases.push_back(ties);
    }
    e.cuda_cases.push_back(kLarge);
    e.grad_cases = {
        {{{2, 2, 5, 6}}, kWindows[0]},
        {{{3, 5, 5}}, {.window = {2, 2}, .stride = {0, 0}}},
        {{{1, 2, 5, 5}}, kWindows[2]},
        {{{1, 1, 6, 6}}, {.window = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}}},
    };
    bench(e, "max_pool2d fwd", {0, 32, 28, 28}, kMaxBench);
    e.bytes = [](const Sample& s, const Outputs& o) {  // values and their i64 indices
        return nbytes(s.inputs[0]) + nbytes(o[0]) + nbytes(o[1]);
    };
    e.flops = [](const Sample& s, const Outputs& o) {  // a compare per tap
        return double(o[0].numel() * s.args.window[0] * s.args.window[1]);
    };
    return e;
}

OpEntry max_pool_backward() {
    OpEntry e = pool_entry("max_pool2d_backward", true);
    for (Signature& sig : e.dtypes) sig.push_back(DType::i64);
    e.generate = max_backward_inputs;
    e.raw = [](const std::vector<Tensor>& x, const Args&) {
        return kernels::max_pool2d_backward(x[0], x[1], x[2]);
    };
    e.reference = max_backward_ref;
    e.tolerance = [](DType t, const Sample& s) {
        const Tensor& x = s.inputs[1];
        const double most = double(most_picks(s.inputs[2], x.size(-2) * x.size(-1)));
        return summed(t, most, 2 * most);
    };
    // The forward's indices, then any in the plane.
    const auto both = [](std::vector<Case> cases) {
        const size_t n = cases.size();
        for (size_t i = 0; i < n; ++i) {
            cases.push_back(cases[i]);
            cases.back().args.draw.any_index = true;
        }
        return cases;
    };
    e.cases = both(window_cases(with_empty(kShapes), true, false, true));
    // An index of 30 = H·W: outside the plane.
    e.cases.push_back({{{2, 3, 6, 5}}, {.window = {2, 2}, .stride = {0, 0}, .draw = {.bad = 30}}});
    e.cuda_cases = both(window_cases(kShapes, true, false, true));
    e.cuda_cases.push_back(kLarge);
    bench(e, "max_pool2d bwd", {0, 32, 28, 28}, kMaxBench);
    // grad_output and indices read, grad_input written.
    e.bytes = [](const Sample& s, const Outputs& o) {
        return nbytes(s.inputs[0]) + nbytes(s.inputs[2]) + nbytes(o[0]);
    };
    e.flops = [](const Sample& s, const Outputs&) { return double(s.inputs[0].numel()); };
    return e;
}

OpEntry avg_pool(bool backward) {
    OpEntry e = pool_entry(backward ? "avg_pool2d_backward" : "avg_pool2d", backward);
    const auto geometry = [backward](const Shape& in, const Args& a) {
        return window_geometry(in, a, false, backward ? "avg_pool2d_backward" : "avg_pool2d");
    };
    e.cases = window_cases(with_empty(kShapes), false, true, backward);
    e.cuda_cases = window_cases(kShapes, false, true, true);
    e.cuda_cases.push_back(kLarge);
    e.tolerance = [](DType t, const Sample& s) {  // a window's taps; the windows over a tap
        const Int2 k = s.args.window, st = stride_of(s.args);
        const double windows = double(ceil_div(k[0], st[0]) * ceil_div(k[1], st[1]));
        return s.inputs.size() == 1 ? summed(t, double(k[0] * k[1]), 2)
                                    : summed(t, windows, 2 * windows);
    };
    if (backward) {
        e.generate = avg_backward_inputs;
        e.raw = [](const std::vector<Tensor>& x, const Args& a) {
            return kernels::avg_pool2d_backward(x[0], x[1], a.window, a.stride, a.padding,
                                                a.ceil_mode, a.count_include_pad);
        };
        e.reference = [geometry](const Sample& s) {
            const Geometry g = geometry(s.inputs[1].shape(), s.args);
            return avg_backward(s.inputs[0], s.inputs[1], g, [&](int64_t oy, int64_t ox) {
                return avg_window(oy, ox, g, s.args);
            });
        };
        bench(e, "avg_pool2d bwd 3x3", {0, 32, 28, 28}, kAvgBench);
    } else {
        e.raw = [](const std::vector<Tensor>& x, const Args& a) {
            return kernels::avg_pool2d(x[0], a.window, a.stride, a.padding, a.ceil_mode,
                                       a.count_include_pad);
        };
        e.differentiable = [](const std::vector<Tensor>& x, const Args& a) {
            return ember::avg_pool2d(x[0], a.window, a.stride, a.padding, a.ceil_mode,
                                     a.count_include_pad);
        };
        e.reference = [geometry](const Sample& s) {
            const Geometry g = geometry(s.inputs[0].shape(), s.args);
            return avg_forward(s.inputs[0], g, [&](int64_t oy, int64_t ox) {
                return avg_window(oy, ox, g, s.args);
            });
        };
        e.cases.insert(e.cases.end(), kBadWindows.begin(), kBadWindows.end() - 1);
        e.grad_cases = window_cases({{1, 2, 5, 6}}, false, true, true);
        e.grad_cases.push_back({{{3, 5, 4}}, {.window = {2, 2}, .stride = {0, 0}}});
        bench(e, "avg_pool2d fwd 3x3", {0, 32, 28, 28}, kAvgBench);
        e.flops = [](const Sample& s, const Outputs& o) {  // an add per tap
            return double(o[0].numel() * s.args.window[0] * s.args.window[1]);
        };
    }
    // Each tensor once: the input (forward) or grad_output (backward) read, the result written.
    e.bytes = [](const Sample& s, const Outputs& o) { return nbytes(s.inputs[0]) + nbytes(o[0]); };
    return e;
}

OpEntry adaptive_pool(bool backward) {
    OpEntry e =
        pool_entry(backward ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool2d", backward);
    e.cases = adaptive_cases(with_empty(kShapes));
    e.cuda_cases = adaptive_cases(kShapes);
    e.tolerance = [](DType t, const Sample& s) {
        const Tensor& x = s.inputs.back();
        const Int2 o = s.args.window;
        if (s.inputs.size() == 1)
            return summed(
                t, double(adaptive_taps(x.size(-2), o[0]) * adaptive_taps(x.size(-1), o[1])), 2);
        const double windows =
            double(adaptive_taps(o[0], x.size(-2)) * adaptive_taps(o[1], x.size(-1)));
        return summed(t, windows, 2 * windows);
    };
    if (backward) {
        e.generate = adaptive_backward_inputs;
        e.raw = [](const std::vector<Tensor>& x, const Args&) {
            return kernels::adaptive_avg_pool2d_backward(x[0], x[1]);
        };
        e.reference = [](const Sample& s) {
            const Tensor &grad = s.inputs[0], &x = s.inputs[1];
            const Geometry g = adaptive_geometry(x.shape(), {grad.size(-2), grad.size(-1)},
                                                 "adaptive_avg_pool2d_backward");
            return avg_backward(grad, x, g,
                                [&](int64_t oy, int64_t ox) { return adaptive_window(oy, ox, g); });
        };
        bench(e, "adaptive_avg_pool2d bwd", {0, 64, 7, 7}, kAdaptiveBench);
    } else {
        e.raw = [](const std::vector<Tensor>& x, const Args& a) {
            return kernels::adaptive_avg_pool2d(x[0], a.window);
        };
        e.differentiable = [](const std::vector<Tensor>& x, const Args& a) {
            return ember::adaptive_avg_pool2d(x[0], a.window);
        };
        e.reference = [](const Sample& s) {
            const Geometry g =
                adaptive_geometry(s.inputs[0].shape(), s.args.window, "adaptive_avg_pool2d");
            return avg_forward(s.inputs[0], g,
                               [&](int64_t oy, int64_t ox) { return adaptive_window(oy, ox, g); });
        };
        e.cases.push_back({{{2, 3, 4, 4}}, {.window = {0, 2}}});  // an output size below 1
        e.cases.push_back({{{2, 3, 0, 4}}, {.window = {2, 2}}});  // an empty plane
        e.grad_cases = {{{{1, 2, 5, 7}}, {.window = {2, 3}}}, {{{2, 3, 4}}, {.window = {5, 3}}}};
        bench(e, "adaptive_avg_pool2d fwd", {0, 64, 7, 7}, kAdaptiveBench);
        e.flops = [](const Sample& s, const Outputs&) { return double(s.inputs[0].numel()); };
    }
    e.bytes = [](const Sample& s, const Outputs& o) { return nbytes(s.inputs[0]) + nbytes(o[0]); };
    return e;
}

}  // namespace

std::vector<OpEntry> pool_entries() {
    return {max_pool(),     max_pool_backward(),  avg_pool(false),
            avg_pool(true), adaptive_pool(false), adaptive_pool(true)};
}

}  // namespace ember::test

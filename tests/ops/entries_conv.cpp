// The convolution entries of the op table: conv2d (input, weight and, when a
// case lists a third shape, bias) and conv2d_backward (grad_output, input,
// weight; Args::need picks the gradients). Cases reach every CPU path —
// im2col + GEMM, the 1×1 shortcut, depthwise, the direct NCHW kernels and
// (channels_last layout, f32) the direct channels-last kernels — and the CUDA
// cases are those tests/cuda/test_cuda_conv.cpp compared before (cuDNN).
// No bench rows: bench/conv.cpp times convolutions against the GEMM peak.
#include <algorithm>
#include <array>
#include <cmath>

#include "autograd/ops/nn_ops.h"
#include "core/error.h"
#include "kernels/conv.h"
#include "ops/op_table.h"

namespace ember::test {

namespace {

const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::f16, DType::bf16};

// One convolution: input [N, C, H, W] or [C, H, W], weight [O, C/groups, kH, kW].
struct Conv {
    Shape x, w;
    Int2 stride, padding, dilation;
    int64_t groups;
    bool bias;
};

// clang-format off
// CUDA against the CPU: the cases tests/cuda/test_cuda_conv.cpp compared
// (contiguous and channels-last, every dtype), and its unbatched one; with
// kResNetBlock, which is too slow for the f64 reference loops.
const std::vector<Conv> kCudaConvs = {
    {{2, 3, 7, 7},   {4, 3, 3, 3},   {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{2, 3, 7, 7},   {4, 3, 3, 3},   {1, 1}, {1, 1}, {1, 1}, 1, false},  // "same" padding
    {{3, 5, 9, 11},  {6, 5, 3, 3},   {2, 2}, {1, 1}, {1, 1}, 1, true},   // stride 2, odd sizes
    {{2, 4, 10, 9},  {4, 4, 3, 3},   {1, 1}, {2, 2}, {2, 2}, 1, true},   // dilation 2
    {{1, 4, 9, 8},   {6, 2, 3, 2},   {2, 3}, {1, 0}, {1, 1}, 2, false},  // groups 2, rectangular
    {{2, 6, 8, 8},   {6, 1, 3, 3},   {1, 1}, {1, 1}, {1, 1}, 6, true},   // depthwise
    {{1, 3, 6, 6},   {6, 1, 3, 3},   {2, 2}, {1, 1}, {1, 1}, 3, false},  // depthwise, multiplier 2
    {{3, 5, 4, 6},   {7, 5, 1, 1},   {1, 1}, {0, 0}, {1, 1}, 1, true},   // 1×1
    {{2, 5, 5, 6},   {3, 5, 1, 1},   {2, 2}, {0, 0}, {1, 1}, 1, false},  // 1×1 strided
    {{2, 2, 3, 3},   {2, 2, 5, 5},   {1, 1}, {1, 1}, {1, 1}, 1, true},   // output 1×1
    {{1, 1, 1, 1},   {1, 1, 1, 1},   {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{1, 2, 4, 4},   {2, 2, 3, 3},   {1, 1}, {3, 2}, {1, 1}, 1, true},   // padding > kernel / 2
    {{2, 4, 11, 10}, {8, 2, 3, 3},   {2, 1}, {2, 1}, {2, 3}, 2, true},   // everything at once
    {{4, 32, 17, 19}, {48, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},  // GEMM-sized
    {{0, 3, 5, 5},   {2, 3, 3, 3},   {1, 1}, {1, 1}, {1, 1}, 1, true},   // empty batch
    {{2, 3, 5, 5},   {0, 3, 3, 3},   {1, 1}, {1, 1}, {1, 1}, 1, true},   // no output channels
    {{2, 0, 4, 4},   {3, 0, 3, 3},   {1, 1}, {0, 0}, {1, 1}, 1, true},   // no input channels
    {{4, 11, 10},    {8, 2, 3, 3},   {2, 1}, {2, 1}, {2, 3}, 2, true},   // unbatched
};
const Conv kResNetBlock = {{8, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
// The reference test: the CUDA cases but the ResNet block, then the paths the
// CUDA cases miss on the CPU. The direct NCHW kernels (f32, groups 1, a kernel
// over 1×1, at most 64 channels; output channels a multiple of 8 for the
// forward and 16 for grad_weight, input channels of 8 for grad_input) and, in
// the channels_last layout, the channels-last kernels (f32, groups 1, at most
// 64 channels, output channels a multiple of 16, input channels of 16 for
// grad_input).
const std::vector<Conv> kMoreConvs = {
    {{2, 16, 9, 10}, {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // every direct kernel
    {{2, 8, 11, 9},  {16, 8, 3, 3},  {2, 2}, {1, 1}, {1, 1}, 1, false},  // channels-last but grad_input
    {{1, 16, 8, 12}, {32, 16, 2, 3}, {1, 2}, {1, 2}, {2, 1}, 1, true},   // non-square, dilated
    {{3, 32, 13, 12}, {64, 32, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},  // 64 channels, threads
    {{2, 16, 7, 7},  {16, 16, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},  // channels-last 1×1
    {{2, 4, 9, 7},   {4, 1, 3, 2},   {2, 1}, {2, 1}, {2, 2}, 4, true},   // depthwise, everything
    {{16, 6, 7},     {16, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // unbatched direct
    {{1, 3, 5, 5},   {2, 1, 3, 3},   {1, 1}, {0, 0}, {1, 1}, 2, true},   // error: 3 channels, 2 groups
    {{1, 2, 2, 2},   {1, 2, 3, 3},   {1, 1}, {0, 0}, {1, 1}, 1, false},  // error: image < kernel
    {{1, 4, 5, 5},   {2, 3, 3, 3},   {1, 1}, {0, 0}, {1, 1}, 1, true},   // error: 3 weight channels for 4
};
// gradcheck of ember::conv2d (f64), small.
const std::vector<Conv> kGradConvs = {
    {{2, 3, 5, 6},   {4, 3, 3, 3},   {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{1, 4, 6, 5},   {4, 2, 3, 2},   {2, 1}, {1, 0}, {1, 2}, 2, true},   // groups, strides, dilation
    {{2, 3, 5, 5},   {3, 1, 3, 3},   {1, 1}, {1, 1}, {1, 1}, 3, false},  // depthwise
    {{3, 4, 4},      {2, 3, 1, 1},   {2, 2}, {0, 0}, {1, 1}, 1, true},   // unbatched 1×1
};
// clang-format on

// The sizes of one conv; oh and ow are PyTorch's output size.
struct Geometry {
    bool batched;
    int64_t n, c, h, w, o, cg, kh, kw, oh, ow;
};

Geometry geometry(const Shape& x, const Shape& w, const Args& a) {
    const bool batched = x.size() == 4;
    const size_t b = batched ? 1 : 0;
    Geometry g{batched, batched ? x[0] : 1, x[b], x[b + 1], x[b + 2], w[0], w[1], w[2], w[3], 0, 0};
    g.oh = (g.h + 2 * a.padding[0] - a.dilation[0] * (g.kh - 1) - 1) / a.stride[0] + 1;
    g.ow = (g.w + 2 * a.padding[1] - a.dilation[1] * (g.kw - 1) - 1) / a.stride[1] + 1;
    return g;
}

Shape out_shape(const Geometry& g) {
    return g.batched ? Shape{g.n, g.o, g.oh, g.ow} : Shape{g.o, g.oh, g.ow};
}

// What the fronts must reject (PyTorch's rules), as their messages say it.
std::string error_of(const Geometry& g, const Args& a) {
    if (g.c % a.groups != 0 || g.o % a.groups != 0) return "are not divisible by groups";
    if (g.cg * a.groups != g.c) return "input channels, got input";
    if (g.h + 2 * a.padding[0] < a.dilation[0] * (g.kh - 1) + 1 ||
        g.w + 2 * a.padding[1] < a.dilation[1] * (g.kw - 1) + 1)
        return "is smaller than the dilated kernel";
    return {};
}

// f(output, input, weight) with the row-major indices of every product
// out[n, o, y, x] += in[n, g·C/G + c, y·sh − ph + i·dh, x·sw − pw + j·dw] ·
// w[o, c, i, j] of the convolution (o in group g; taps in the padding skipped).
template <class F>
void for_each_product(const Geometry& g, const Args& a, F f) {
    const int64_t og = g.o / a.groups;
    for (int64_t n = 0; n < g.n; ++n)
        for (int64_t o = 0; o < g.o; ++o)
            for (int64_t y = 0; y < g.oh; ++y)
                for (int64_t x = 0; x < g.ow; ++x) {
                    const int64_t out = ((n * g.o + o) * g.oh + y) * g.ow + x;
                    for (int64_t c = 0; c < g.cg; ++c)
                        for (int64_t i = 0; i < g.kh; ++i)
                            for (int64_t j = 0; j < g.kw; ++j) {
                                const int64_t iy =
                                    y * a.stride[0] - a.padding[0] + i * a.dilation[0];
                                const int64_t ix =
                                    x * a.stride[1] - a.padding[1] + j * a.dilation[1];
                                if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
                                const int64_t ch = o / og * g.cg + c;
                                f(size_t(out), size_t(((n * g.c + ch) * g.h + iy) * g.w + ix),
                                  size_t(((o * g.cg + c) * g.kh + i) * g.kw + j));
                            }
                }
}

double amax(const Tensor& t) {
    double m = 0;
    for (double v : values(t)) m = std::max(m, std::abs(v));
    return m;
}

// Tolerance of a result that sums up to K products of size at most m each.
// The CPU sums in f32 for f32, f16 and bf16 (f64 for f64), unit roundoff u:
// partial sums of random signs grow like √k·m and their roundings, of random
// sign too, add up to about K·u·m (the worst case, K²·u·m/2, needs every sign
// alike); atol is 16 times that (every case here passes with 1/2 of it).
// rtol_for(t) covers the one rounding to t: the expected values are rounded
// to t too, so the two may differ by one ulp of t.
Tolerance sum_tolerance(DType t, double k_times_m) {
    const double u = t == DType::f64 ? 0x1p-53 : 0x1p-24;
    return {rtol_for(t), 16 * u * k_times_m};
}

// cuDNN sums the same products as the CPU in its own order (FFT and
// Winograd transforms among its algorithms, f16/bf16 through f32): relative
// and absolute. tests/cuda/test_cuda_conv.cpp took these values with the
// absolute term scaled by max(1, max|expected|); the generated inputs keep
// the largest values near 1, so the two agree. f32 runs without TF32
// (search_math in kernels/cuda/conv.cpp: CUDNN_FMA_MATH, whatever
// allow_tf32() says), whose 10-bit mantissa would miss this by about ten times.
double cuda_tolerance(DType t, const Sample&, size_t) {
    switch (t) {
        case DType::f64:
            return 1e-10;
        case DType::f32:
            return 5e-5;
        case DType::f16:
            return 2e-3;
        default:
            return 1.6e-2;
    }
}

Tensor uniform(const Shape& shape, DType t, double half_width, uint64_t seed) {
    return random_input(shape, t, {.lo = -half_width, .hi = half_width}, seed);
}

// Every output of a conv is a sum of random-sign products: inputs scaled so
// each sum has a standard deviation near 1/4 (its largest values near 1)
// whatever its length, which keeps the absolute tolerances meaningful.
// conv2d: x in [-1, 1), w in ±0.75/√(C/G·kH·kW), bias in ±1/4.
std::vector<Tensor> conv2d_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    const Geometry g = geometry(c.shapes[0], c.shapes[1], c.args);
    const double k = double(std::max<int64_t>(1, g.cg * g.kh * g.kw));
    std::vector<Tensor> in = {uniform(c.shapes[0], sig[0], 1, seed * 31),
                              uniform(c.shapes[1], sig[1], 0.75 / std::sqrt(k), seed * 31 + 1)};
    if (c.shapes.size() > 2) in.push_back(uniform(c.shapes[2], sig[2], 0.25, seed * 31 + 2));
    return in;
}

// conv2d_backward: M = N·OH·OW terms in grad_weight and grad_bias, about
// O/G·kH·kW/(sh·sw) in grad_input: dy in ±0.43/√M, x in [-1, 1), w in ±√(3M/K).
std::vector<Tensor> backward_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    const Geometry g = geometry(c.shapes[1], c.shapes[2], c.args);
    const double m = double(std::max<int64_t>(1, g.n * g.oh * g.ow));
    const double k = std::max(1.0, double(g.o / c.args.groups * g.kh * g.kw) /
                                       double(c.args.stride[0] * c.args.stride[1]));
    return {uniform(c.shapes[0], sig[0], 0.433 / std::sqrt(m), seed * 31),
            uniform(c.shapes[1], sig[1], 1, seed * 31 + 1),
            uniform(c.shapes[2], sig[2], std::sqrt(3 * m / k), seed * 31 + 2)};
}

Case forward_case(const Conv& v) {
    Case c{{v.x, v.w},
           {.stride = v.stride, .padding = v.padding, .dilation = v.dilation, .groups = v.groups}};
    if (v.bias) c.shapes.push_back({v.w[0]});
    return c;
}

// grad_output's shape is the forward's output (any shape where the conv is an error).
Case backward_case(const Conv& v, std::array<bool, 3> need = {true, true, true}) {
    Case c = forward_case(v);
    const Geometry g = geometry(v.x, v.w, c.args);
    const bool valid = error_of(g, c.args).empty();
    c.shapes = {valid ? out_shape(g) : Shape{1, 1, 1, 1}, v.x, v.w};
    c.args.need = need;
    return c;
}

double macs(const Sample& s, const Shape& x, const Shape& w) {
    const Geometry g = geometry(x, w, s.args);
    return double(g.n * g.o * g.oh * g.ow * g.cg * g.kh * g.kw);
}

OpEntry conv2d_entry() {
    OpEntry e;
    e.name = "conv2d";
    e.family = Family::conv;
    e.raw = [](const std::vector<Tensor>& in, const Args& a) {
        return kernels::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a.stride, a.padding,
                               a.dilation, a.groups);
    };
    e.differentiable = [](const std::vector<Tensor>& in, const Args& a) {
        return ember::conv2d(in[0], in[1], in.size() > 2 ? in[2] : Tensor(), a.stride, a.padding,
                             a.dilation, a.groups);
    };
    for (DType t : kFloats) e.dtypes.push_back({t, t, t});
    e.generate = conv2d_inputs;
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::channels_last};
    e.reference = [](const Sample& s) {
        const Args& a = s.args;
        const Geometry g = geometry(s.inputs[0].shape(), s.inputs[1].shape(), a);
        Expected want;
        want.error = error_of(g, a);
        if (!want.error.empty()) return want;
        const std::vector<double> x = values(s.inputs[0]), w = values(s.inputs[1]);
        std::vector<double> y(size_t(g.n * g.o * g.oh * g.ow), 0.0);
        if (s.inputs.size() > 2) {
            const std::vector<double> b = values(s.inputs[2]);
            for (size_t i = 0; i < y.size(); ++i) y[i] = b[i / size_t(g.oh * g.ow) % size_t(g.o)];
        }
        for_each_product(g, a, [&](size_t out, size_t xi, size_t wi) { y[out] += x[xi] * w[wi]; });
        return Expected{out_shape(g), s.inputs[0].dtype(), std::move(y)};
    };
    // Each output sums K = C/G·kH·kW products of |x|·|w| <= max|x|·max|w|.
    e.tolerance = [](DType t, const Sample& s) {
        const Geometry g = geometry(s.inputs[0].shape(), s.inputs[1].shape(), s.args);
        return sum_tolerance(t, double(g.cg * g.kh * g.kw) * amax(s.inputs[0]) * amax(s.inputs[1]));
    };
    for (const std::vector<Conv>* list : {&kCudaConvs, &kMoreConvs})
        for (const Conv& v : *list) e.cases.push_back(forward_case(v));
    for (const Conv& v : kGradConvs) e.grad_cases.push_back(forward_case(v));
    e.cuda = true;
    for (const Conv& v : kCudaConvs) e.cuda_cases.push_back(forward_case(v));
    e.cuda_cases.push_back(forward_case(kResNetBlock));
    e.cuda_layouts = e.layouts;
    e.cuda_tolerance = cuda_tolerance;
    e.flops = [](const Sample& s, const Outputs&) {
        return 2 * macs(s, s.inputs[0].shape(), s.inputs[1].shape());
    };
    return e;
}

OpEntry conv2d_backward_entry() {
    OpEntry e;
    e.name = "conv2d_backward";
    e.family = Family::conv;
    // Returns the gradients asked for, in the order input, weight, bias, and
    // throws if the front computed one not asked for or left one out.
    e.raw = [](const std::vector<Tensor>& in, const Args& a) {
        const kernels::Conv2dGrads g = kernels::conv2d_backward(
            in[0], in[1], in[2], a.stride, a.padding, a.dilation, a.groups, a.need);
        Outputs out;
        const Tensor* grads[] = {&g.input, &g.weight, &g.bias};
        const char* names[] = {"grad_input", "grad_weight", "grad_bias"};
        for (size_t i = 0; i < 3; ++i) {
            EMBER_CHECK(grads[i]->defined() == a.need[i], "conv2d_backward: ", names[i],
                        a.need[i] ? " asked for but not computed" : " computed but not asked for");
            if (a.need[i]) out.push_back(*grads[i]);
        }
        return out;
    };
    for (DType t : kFloats) e.dtypes.push_back({t, t, t});
    e.generate = backward_inputs;
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::channels_last};
    // grad_input[n, ch, iy, ix] = Σ dy·w, grad_weight[o, c, i, j] = Σ dy·x and
    // grad_bias[o] = Σ dy over the products of the forward.
    e.reference = [](const Sample& s) {
        const Args& a = s.args;
        const Geometry g = geometry(s.inputs[1].shape(), s.inputs[2].shape(), a);
        Expected want;
        want.error = error_of(g, a);
        if (!want.error.empty()) return want;
        const std::vector<double> dy = values(s.inputs[0]), x = values(s.inputs[1]),
                                  w = values(s.inputs[2]);
        std::vector<double> gx(x.size(), 0.0), gw(w.size(), 0.0), gb(size_t(g.o), 0.0);
        for_each_product(g, a, [&](size_t out, size_t xi, size_t wi) {
            gx[xi] += dy[out] * w[wi];
            gw[wi] += dy[out] * x[xi];
        });
        for (size_t i = 0; i < dy.size(); ++i) gb[i / size_t(g.oh * g.ow) % size_t(g.o)] += dy[i];
        const DType t = s.inputs[1].dtype();
        if (a.need[0]) want.outputs.push_back({s.inputs[1].shape(), t, std::move(gx)});
        if (a.need[1]) want.outputs.push_back({s.inputs[2].shape(), t, std::move(gw)});
        if (a.need[2]) want.outputs.push_back({{g.o}, t, std::move(gb)});
        return want;
    };
    // grad_input sums at most O/G·kH·kW products dy·w, grad_weight N·OH·OW
    // products dy·x and grad_bias N·OH·OW values of dy: the largest K·m of
    // the gradients asked for.
    e.tolerance = [](DType t, const Sample& s) {
        const Args& a = s.args;
        const Geometry g = geometry(s.inputs[1].shape(), s.inputs[2].shape(), a);
        const double dy = amax(s.inputs[0]), m = double(g.n * g.oh * g.ow);
        double km = 0;
        if (a.need[0]) km = double(g.o / a.groups * g.kh * g.kw) * dy * amax(s.inputs[2]);
        if (a.need[1]) km = std::max(km, m * dy * amax(s.inputs[1]));
        if (a.need[2]) km = std::max(km, m * dy);
        return sum_tolerance(t, km);
    };
    for (const std::vector<Conv>* list : {&kCudaConvs, &kMoreConvs})
        for (const Conv& v : *list) e.cases.push_back(backward_case(v));
    // Every subset of the gradients, on a strided, a grouped, a no-output-
    // and a no-input-channel conv, and a direct one (channels-last kernels
    // but for grad_input).
    for (const Conv* v :
         {&kCudaConvs[2], &kCudaConvs[4], &kCudaConvs[15], &kCudaConvs[16], &kMoreConvs[1]})
        for (int mask = 0; mask < 7; ++mask)  // 7: all three, above
            e.cases.push_back(
                backward_case(*v, {(mask & 1) != 0, (mask & 2) != 0, (mask & 4) != 0}));
    e.cuda = true;
    for (const Conv& v : kCudaConvs) e.cuda_cases.push_back(backward_case(v));
    e.cuda_cases.push_back(backward_case(kResNetBlock));
    e.cuda_layouts = e.layouts;
    e.cuda_tolerance = cuda_tolerance;
    e.flops = [](const Sample& s, const Outputs&) {
        const Args& a = s.args;
        return 2 * macs(s, s.inputs[1].shape(), s.inputs[2].shape()) *
                   double(int(a.need[0]) + int(a.need[1])) +
               (a.need[2] ? double(s.inputs[0].numel()) : 0.0);
    };
    return e;
}

}  // namespace

std::vector<OpEntry> conv_entries() { return {conv2d_entry(), conv2d_backward_entry()}; }

}  // namespace ember::test

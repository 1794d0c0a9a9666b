// The normalization entries of the op table (kernels/norm.h): batch norm's
// training forwards (plain, + ReLU, + residual and ReLU), eval forward and
// backward (plain, + ReLU); layer norm's forward and backward. A case is x's
// shape and Args (affine: weight and bias; running: running statistics; layer
// norm's normalized_shape in dims); `generate` draws the other inputs.
#include <algorithm>
#include <cmath>

#include "autograd/ops/nn_ops.h"
#include "core/error.h"
#include "kernels/factories.h"
#include "kernels/norm.h"
#include "ops/op_table.h"

namespace ember::test {

namespace {

// The fronts, as the shared helpers tell them apart.
enum class Kind { bn, bn_relu, bn_add_relu, bn_eval, bn_bwd, bn_relu_bwd, ln, ln_bwd };

bool is_layer(Kind k) { return k == Kind::ln || k == Kind::ln_bwd; }
bool is_backward(Kind k) {
    return k == Kind::bn_bwd || k == Kind::bn_relu_bwd || k == Kind::ln_bwd;
}
DType stats_dtype(DType x) { return x == DType::f64 ? DType::f64 : DType::f32; }

// How x's elements (row-major) share statistics and parameters: batch norm's
// channel i / S % C of [N, C, S], or layer norm's row i / M and column i % M.
struct Groups {
    bool layer;
    int64_t C = 1, S = 1, M = 1, count = 0;  // count: groups of statistics
    size_t group(size_t i) const { return size_t(layer ? int64_t(i) / M : int64_t(i) / S % C); }
    size_t param(size_t i) const { return size_t(layer ? int64_t(i) % M : int64_t(i) / S % C); }
};
Groups groups_of(Kind k, const Shape& x, const Shape& normalized) {
    Groups g{is_layer(k)};
    if (g.layer) {
        g.M = shape_numel(normalized);
        g.count = shape_numel(Shape(x.begin(), x.end() - int64_t(normalized.size())));
    } else {
        g.C = x.at(1);
        g.S = shape_numel(Shape(x.begin() + 2, x.end()));
        g.count = g.C;
    }
    return g;
}
// The shape of the statistics: [C], or x's with the normalized dims set to 1.
Shape stats_shape(Kind k, const Shape& x, const Shape& normalized) {
    if (!is_layer(k)) return {x.at(1)};
    Shape s = x;
    std::fill(s.end() - int64_t(normalized.size()), s.end(), 1);
    return s;
}

// Per group: the mean, the biased variance and the number of values.
struct Moments {
    std::vector<double> mean, var, n;
};
Moments moments(const std::vector<double>& x, const Groups& g) {
    const size_t G = size_t(g.count);
    Moments m{std::vector<double>(G), std::vector<double>(G), std::vector<double>(G)};
    for (size_t i = 0; i < x.size(); ++i) m.mean[g.group(i)] += x[i], m.n[g.group(i)] += 1;
    for (size_t c = 0; c < G; ++c) m.mean[c] /= m.n[c];  // NaN for no values
    for (size_t i = 0; i < x.size(); ++i) {
        const double d = x[i] - m.mean[g.group(i)];
        m.var[g.group(i)] += d * d;
    }
    for (size_t c = 0; c < G; ++c) m.var[c] /= m.n[c];
    return m;
}
std::vector<double> inv_sqrt(const std::vector<double>& var, double eps) {
    std::vector<double> r;
    for (double v : var) r.push_back(1 / std::sqrt(v + eps));
    return r;
}
// A parameter's values, or n copies of `absent`.
std::vector<double> param(const Tensor& t, int64_t n, double absent) {
    return t.defined() ? values(t) : std::vector<double>(size_t(n), absent);
}
// (x − mean)·invstd·w + b for each element, from per-group statistics.
std::vector<double> normalize(const std::vector<double>& x, const Groups& g,
                              const std::vector<double>& mean, const std::vector<double>& invstd,
                              const std::vector<double>& w, const std::vector<double>& b) {
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
        const size_t c = g.group(i), p = g.param(i);
        y[i] = (x[i] - mean[c]) * invstd[c] * w[p] + b[p];
    }
    return y;
}

// One call's inputs by role, in the front's order (those not given stay
// undefined): forwards x, [residual], [weight, bias], [running_mean,
// running_var]; backwards grad_y, [output], x, [weight], mean, invstd.
struct Roles {
    Tensor g, y, x, residual, w, b, rm, rv, mean, invstd;
};
Roles roles(Kind k, const std::vector<Tensor>& in, const Args& a) {
    size_t i = 0;
    const auto next = [&] { return in.at(i++); };
    Roles r;
    if (is_backward(k)) {
        r.g = next();
        if (k == Kind::bn_relu_bwd) r.y = next();
        r.x = next();
        if (a.affine) r.w = next();
        r.mean = next(), r.invstd = next();
        return r;
    }
    r.x = next();
    if (k == Kind::bn_add_relu) r.residual = next();
    if (a.affine) r.w = next(), r.b = next();
    if (a.running && !is_layer(k)) r.rm = next(), r.rv = next();
    return r;
}

// One call's inputs, contiguous on the CPU. Signatures: forwards {x, weight,
// bias, running_mean, running_var} (the residual takes x's dtype); backwards
// {x, weight} (grad_y and the fused output take x's dtype). A backward's saved
// statistics come from an f64 forward written here, not from ember's kernels,
// rounded to the statistics dtype; its reference uses them as given (the
// front is a function of its inputs), and the f64 forward makes them
// consistent with x, as a real forward's are.
std::vector<Tensor> generate(Kind k, const Case& c, const Signature& sig, uint64_t seed) {
    const Args& a = c.args;
    const Shape& xs = c.shapes.at(0);
    uint64_t n = 0;
    const auto draw = [&](const Shape& s, DType t, double lo, double hi) {
        return random_input(s, t, {.lo = lo, .hi = hi}, seed * 31 + n++);
    };
    const Shape par = is_layer(k) ? a.dims : Shape{xs.at(1)};
    const Tensor x = draw(xs, sig[0], -3, 5);  // off-centre: the mean matters
    if (!is_backward(k)) {
        std::vector<Tensor> in = {x};
        if (k == Kind::bn_add_relu) in.push_back(draw(xs, sig[0], -2, 2));
        if (a.affine)
            in.push_back(draw(par, sig[1], -2, 2)), in.push_back(draw(par, sig[2], -1, 1));
        if (a.running && !is_layer(k)) {
            in.push_back(draw(par, sig[3], -1, 1));
            in.push_back(k == Kind::bn_eval ? draw(par, sig[4], 0.2, 3)
                                            : draw(par, sig[4], 0.5, 2));
        }
        return in;
    }
    const Tensor g = draw(xs, sig[0], -1, 1);
    const Tensor w = a.affine ? draw(par, sig[1], -2, 2) : Tensor();
    // The forward's statistics (mean 0 and invstd 1 for a group of no values).
    const Groups gr = groups_of(k, xs, a.dims);
    const std::vector<double> xv = values(x);
    Moments m = moments(xv, gr);
    std::vector<double> invstd = inv_sqrt(m.var, a.eps);
    for (size_t i = 0; i < m.mean.size(); ++i)
        if (m.n[i] == 0) m.mean[i] = 0, invstd[i] = 1;
    const Shape ss = stats_shape(k, xs, a.dims);
    const DType st = stats_dtype(sig[0]);
    std::vector<Tensor> in = {g};
    if (k == Kind::bn_relu_bwd) {  // the fused forward's output, with a bias drawn here
        const std::vector<double> b = values(draw(par, DType::f64, -1, 1));
        std::vector<double> y = normalize(xv, gr, m.mean, invstd, param(w, gr.C, 1), b);
        for (double& v : y) v = std::max(v, 0.0);
        in.push_back(from_vector(y, xs).to(sig[0]));
    }
    in.push_back(x);
    if (w.defined()) in.push_back(w);
    in.push_back(from_vector(m.mean, ss).to(st));
    in.push_back(from_vector(invstd, ss).to(st));
    return in;
}

// The fronts' contract: batch norm's results of x's shape come in x's memory
// format (channels-last for a channels-last x), layer norm's contiguous.
void check_format(const Tensor& out, MemoryFormat f, const char* op) {
    EMBER_CHECK(out.is_contiguous(f) && out.suggest_memory_format() == f, op, ": a result is not ",
                memory_format_name(f), " as its input");
}

// A copy of a running statistic with the input's stride, for the front to
// update in place (through the stride); undefined stays undefined.
Tensor running_copy(const Tensor& t) {
    if (!t.defined() || t.is_contiguous() || t.numel() == 0) return t.defined() ? t.clone() : t;
    const int64_t n = t.numel(), step = t.strides()[0];
    Tensor v = zeros({n * step}, {t.dtype(), t.device()}).slice(0, 0, n * step, step);
    v.copy_(t);
    return v;
}

Outputs forward_raw(Kind k, const std::vector<Tensor>& in, const Args& a) {
    const Roles t = roles(k, in, a);
    if (k == Kind::ln) {
        const kernels::LayerNormForward f =
            kernels::layer_norm_forward(t.x, a.dims, t.w, t.b, a.eps);
        check_format(f.output, MemoryFormat::contiguous, "layer_norm_forward");
        return {f.output, f.mean, f.rstd};
    }
    if (k == Kind::bn_eval) {
        const Tensor y = kernels::batch_norm_inference(t.x, t.w, t.b, t.rm, t.rv, a.eps);
        check_format(y, t.x.suggest_memory_format(), "batch_norm_inference");
        return y;
    }
    const Tensor rm = running_copy(t.rm), rv = running_copy(t.rv);
    const kernels::BatchNormForward f =
        k == Kind::bn ? kernels::batch_norm_forward(t.x, t.w, t.b, rm, rv, a.momentum, a.eps)
        : k == Kind::bn_relu
            ? kernels::batch_norm_relu_forward(t.x, t.w, t.b, rm, rv, a.momentum, a.eps)
            : kernels::batch_norm_add_relu_forward(t.x, t.residual, t.w, t.b, rm, rv, a.momentum,
                                                   a.eps);
    check_format(f.output, t.x.suggest_memory_format(), "batch_norm_forward");
    Outputs out = {f.output, f.save_mean, f.save_invstd};
    if (rm.defined()) out.push_back(rm.contiguous()), out.push_back(rv.contiguous());
    return out;
}

// The gradients asked for, in order; one more or one fewer is an error.
Outputs backward_raw(Kind k, const std::vector<Tensor>& in, const Args& a) {
    const Roles t = roles(k, in, a);
    const kernels::NormGrads d =
        k == Kind::bn_bwd ? kernels::batch_norm_backward(t.g, t.x, t.w, t.mean, t.invstd, a.need)
        : k == Kind::bn_relu_bwd
            ? kernels::batch_norm_relu_backward(t.g, t.y, t.x, t.w, t.mean, t.invstd, a.need)
            : kernels::layer_norm_backward(t.g, t.x, a.dims, t.w, t.mean, t.invstd, a.need);
    Outputs out;
    for (int i = 0; i < 3; ++i) {
        const Tensor& r = i == 0 ? d.input : i == 1 ? d.weight : d.bias;
        EMBER_CHECK(r.defined() == a.need[size_t(i)], "norm backward: gradient ", i,
                    r.defined() ? " computed but not asked for" : " asked for but missing");
        if (r.defined()) out.push_back(r);
    }
    if (d.input.defined())
        check_format(d.input, is_layer(k) ? MemoryFormat::contiguous : t.x.suggest_memory_format(),
                     "norm backward");
    return out;
}

Expected forward_reference(Kind k, const Sample& s) {
    const Args& a = s.args;
    const Roles t = roles(k, s.inputs, a);
    const Shape& xs = t.x.shape();
    const DType xt = t.x.dtype(), st = stats_dtype(xt);
    const Groups g = groups_of(k, xs, a.dims);
    const std::vector<double> xv = values(t.x);
    const std::vector<double> w = param(t.w, is_layer(k) ? g.M : g.C, 1),
                              b = param(t.b, is_layer(k) ? g.M : g.C, 0);
    Expected e;
    if (k == Kind::bn_eval) {
        if (!a.running)
            e.error = "eval mode needs running_mean and running_var";
        else
            e.outputs = {
                {xs, xt, normalize(xv, g, values(t.rm), inv_sqrt(values(t.rv), a.eps), w, b)}};
        return e;
    }
    const Moments m = moments(xv, g);
    Shape counted = xs;  // batch norm's values per channel: every dim but C
    if (!is_layer(k)) counted.erase(counted.begin() + 1);
    if (!is_layer(k) && shape_numel(counted) < 2) {
        e.error = "expected more than 1 value per channel when training";
        return e;
    }
    const std::vector<double> invstd = inv_sqrt(m.var, a.eps);
    std::vector<double> y = normalize(xv, g, m.mean, invstd, w, b);
    const std::vector<double> r = t.residual.defined() ? values(t.residual) : std::vector<double>();
    for (size_t i = 0; i < y.size(); ++i) {
        if (!r.empty()) y[i] += r[i];
        if (k != Kind::bn && k != Kind::ln) y[i] = std::max(y[i], 0.0);
    }
    const Shape ss = stats_shape(k, xs, a.dims);
    e.outputs = {{xs, xt, y}, {ss, st, m.mean}, {ss, st, invstd}};
    if (t.rm.defined()) {  // PyTorch's rule: the unbiased variance for running_var
        std::vector<double> rm = values(t.rm), rv = values(t.rv);
        for (size_t c = 0; c < rm.size(); ++c) {
            rm[c] = (1 - a.momentum) * rm[c] + a.momentum * m.mean[c];
            rv[c] = (1 - a.momentum) * rv[c] + a.momentum * m.var[c] * m.n[c] / (m.n[c] - 1);
        }
        e.outputs.push_back({ss, t.rm.dtype(), rm});
        e.outputs.push_back({ss, t.rv.dtype(), rv});
    }
    return e;
}

// With x̂ = (x − mean)·invstd and h = g·w (g masked where the fused output
// is 0): grad_input = invstd·(h − mean(h) − x̂·mean(h·x̂)) per group,
// grad_weight = Σ g·x̂ and grad_bias = Σ g per parameter.
Expected backward_reference(Kind k, const Sample& s) {
    const Args& a = s.args;
    const Roles t = roles(k, s.inputs, a);
    const Shape& xs = t.x.shape();
    const Groups gr = groups_of(k, xs, a.dims);
    const int64_t P = is_layer(k) ? gr.M : gr.C;
    const std::vector<double> xv = values(t.x), mean = values(t.mean), invstd = values(t.invstd),
                              w = param(t.w, P, 1);
    std::vector<double> g = values(t.g);
    if (t.y.defined()) {
        const std::vector<double> y = values(t.y);
        for (size_t i = 0; i < g.size(); ++i) g[i] = y[i] > 0 ? g[i] : 0;
    }
    std::vector<double> sh(size_t(gr.count)), shx(size_t(gr.count)), n(size_t(gr.count));
    std::vector<double> gx(xv.size()), gw(static_cast<size_t>(P)), gb(static_cast<size_t>(P));
    const auto xhat = [&](size_t i) { return (xv[i] - mean[gr.group(i)]) * invstd[gr.group(i)]; };
    for (size_t i = 0; i < xv.size(); ++i) {
        const size_t c = gr.group(i), p = gr.param(i);
        sh[c] += g[i] * w[p], shx[c] += g[i] * w[p] * xhat(i), n[c] += 1;
        gw[p] += g[i] * xhat(i), gb[p] += g[i];
    }
    for (size_t i = 0; i < xv.size(); ++i) {
        const size_t c = gr.group(i);
        gx[i] = invstd[c] * (g[i] * w[gr.param(i)] - sh[c] / n[c] - xhat(i) * shx[c] / n[c]);
    }
    const Shape ps = is_layer(k) ? a.dims : Shape{gr.C};
    const DType pt = t.w.defined() ? t.w.dtype() : stats_dtype(t.x.dtype());
    std::vector<ExpectedOutput> out;
    if (a.need[0]) out.push_back({xs, t.x.dtype(), gx});
    if (a.need[1]) out.push_back({ps, pt, gw});
    if (a.need[2]) out.push_back({ps, pt, gb});
    return Expected(out);
}

// A backward's apply pass adds terms up to invstd·|h|·(2 + x̂²) per group in
// Acc<T> (f32 for every dtype but f64) with a handful of roundings: a group
// whose values nearly coincide has a large invstd and a result far smaller
// than its terms. The absolute error that leaves: 8 unit roundoffs of Acc<T>
// times the largest term.
double cancellation(Kind k, const Sample& s) {
    const Roles t = roles(k, s.inputs, s.args);
    const Groups gr = groups_of(k, t.x.shape(), s.args.dims);
    const std::vector<double> xv = values(t.x), g = values(t.g), mean = values(t.mean),
                              invstd = values(t.invstd),
                              w = param(t.w, is_layer(k) ? gr.M : gr.C, 1);
    std::vector<double> hmax(size_t(gr.count)), xhat(size_t(gr.count));
    for (size_t i = 0; i < xv.size(); ++i) {
        const size_t c = gr.group(i);
        hmax[c] = std::max(hmax[c], std::abs(g[i] * w[gr.param(i)]));
        xhat[c] = std::max(xhat[c], std::abs((xv[i] - mean[c]) * invstd[c]));
    }
    double scale = 0;
    for (size_t c = 0; c < hmax.size(); ++c)
        scale = std::max(scale, invstd[c] * hmax[c] * (2 + xhat[c] * xhat[c]));
    return 8 * (t.x.dtype() == DType::f64 ? 0x1p-53 : 0x1p-24) * scale;
}

// What one output of a call is: a value of x's shape (y, grad_input), a
// statistic (saved mean and invstd; layer norm's mean and rstd), an updated
// running statistic, or a weight or bias gradient (a sum over N·S values).
enum class Result { value, statistic, running, sum };
Result result_of(Kind k, const Args& a, size_t output) {
    if (is_backward(k)) return output == 0 && a.need[0] ? Result::value : Result::sum;
    return output == 0 ? Result::value : output <= 2 ? Result::statistic : Result::running;
}

// CUDA against the CPU, by the precision an output carries rather than its
// dtype (an f64 weight's gradients and f64 running statistics of an f32 x
// carry f32's). CUDA sums in Acc<T> (f32 for every x but f64) by Welford
// and blocks where the CPU sums in f64, and subtracts the mean rounded to
// Acc<T>. For an f32, f16 or bf16 x: values 1e-4 (the mean's rounding times
// invstd, large where a channel's values nearly coincide), statistics 2e-5
// (the f32 sums rounded), running statistics 1e-5 (that times momentum,
// 0.25 at most in the cuda_cases), weight and bias gradients (sums of up to
// 50176 terms) 1e-4; for an f64 x, 1e-10. Each at least rtol_for of the
// result's dtype (none for f64): f16 and bf16 results may round one step
// apart, a value twice with a residual; f32 statistics, running statistics
// and sums of an f64 x hold to 2e-5.
double cuda_tolerance(Kind k, DType t, const Sample& s, size_t output) {
    const Result r = result_of(k, s.args, output);
    const double twice = r == Result::value && k == Kind::bn_add_relu ? 2 : 1;
    const double step = t == DType::f64 ? 0 : twice * rtol_for(t);
    if (roles(k, s.inputs, s.args).x.dtype() == DType::f64) return std::max(1e-10, step);
    const double carried = r == Result::statistic ? 2e-5 : r == Result::running ? 1e-5 : 1e-4;
    return std::max(carried, step);
}

// Running statistics are buffers, not differentiable (PyTorch's rule): the
// training ops update copies; eval mode reads them as constants. Without
// running statistics (args.running off: gradcheck, which would perturb them
// as inputs) eval mode takes fixed ones made here.
Tensor differentiable(Kind k, const std::vector<Tensor>& in, const Args& a) {
    const Roles t = roles(k, in, a);
    if (k == Kind::ln) return ember::layer_norm(t.x, a.dims, t.w, t.b, a.eps);
    Tensor rm = t.rm.defined() ? t.rm.detach().clone() : Tensor();
    Tensor rv = t.rv.defined() ? t.rv.detach().clone() : Tensor();
    switch (k) {
        case Kind::bn:
            return ember::batch_norm(t.x, rm, rv, t.w, t.b, true, a.momentum, a.eps);
        case Kind::bn_relu:
            return ember::batch_norm_relu(t.x, rm, rv, t.w, t.b, true, a.momentum, a.eps);
        case Kind::bn_add_relu:
            return ember::batch_norm_add_relu(t.x, t.residual, rm, rv, t.w, t.b, true, a.momentum,
                                              a.eps);
        default: {
            if (!rm.defined()) {
                std::vector<double> m, v;
                for (int64_t c = 0; c < t.x.size(1); ++c)
                    m.push_back(0.3 * double(c) - 0.2), v.push_back(0.5 + 0.25 * double(c));
                rm = from_vector(m, {t.x.size(1)}).to(t.x.dtype());
                rv = from_vector(v, {t.x.size(1)}).to(t.x.dtype());
            }
            return ember::batch_norm(t.x, rm, rv, t.w, t.b, false, a.momentum, a.eps);
        }
    }
}

const DType f32 = DType::f32, f64 = DType::f64, f16 = DType::f16, bf16 = DType::bf16;

Case with(Shape x, Args a = {}) { return {{std::move(x)}, a}; }
Case bn_case(Shape x, bool affine, bool running = false) {
    return with(std::move(x), {.affine = affine, .running = running});
}
Case ln_case(Shape x, Shape normalized, bool affine = true) {
    return with(std::move(x), {.dims = std::move(normalized), .affine = affine});
}
// Each x shape with weight and bias and without (and running statistics with them).
std::vector<Case> both(const std::vector<Shape>& shapes, bool running) {
    std::vector<Case> c;
    for (const Shape& x : shapes)
        for (bool on : {true, false}) c.push_back(bn_case(x, on, running && on));
    return c;
}
std::vector<Case> operator+(std::vector<Case> a, const std::vector<Case>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
std::vector<Case> with_need(std::vector<Case> c, std::initializer_list<std::array<bool, 3>> needs,
                            const Case& base) {
    for (const auto& n : needs) {
        Case v = base;
        v.args.need = n;
        c.push_back(v);
    }
    return c;
}

// Reference cases: n = 2 per channel ([N, C]; N = 1), C = 1, one pixel
// (channels-last and contiguous at once), odd planes, many rows, a larger
// map, and C = 0 (empty results).
const std::vector<Shape> kBatchShapes = {{2, 3},         {1, 4, 2},    {3, 5, 7},     {7, 1, 3},
                                         {5, 3, 3, 3},   {4, 2, 1, 1}, {3, 6, 9, 13}, {2048, 40},
                                         {8, 3, 32, 32}, {3, 0, 4}};
// CUDA (kernels/cuda/batch_norm.cu): the same small shapes, 300 channels, and
// the split-channel statistics (C = 16, N·S = 50176).
const std::vector<Shape> kCudaBatchShapes = {{2, 3},          {1, 4, 2},       {1, 4, 3},
                                             {3, 5, 7},       {5, 3, 3, 3},    {4, 300, 3},
                                             {8, 16, 28, 28}, {64, 16, 28, 28}};
// CUDA channels-last: rows of C channels, a C = 1 stem and a one-pixel map.
const std::vector<Shape> kCudaLastShapes = {{4, 16, 8, 8}, {2, 3, 5, 7},   {64, 16, 28, 28},
                                            {8, 1, 6, 6},  {16, 40, 1, 1}, {4, 64, 7, 7}};

// Layer norm (x, normalized_shape): 1-d to 3-d normalized shapes, M = 1,
// one row, the whole tensor, long rows, no rows, and empty rows (NaN
// statistics). CUDA (kernels/cuda/layer_norm.cu): a warp per row (M = 1, 7,
// 1000, 1025), a block per row (5000), many short rows, 2-d normalized shapes.
// clang-format off
const std::vector<std::pair<Shape, Shape>> kLayerShapes = {
    {{4, 5}, {5}}, {{1, 7}, {7}}, {{3, 1}, {1}}, {{6}, {6}}, {{2, 3, 4}, {3, 4}},
    {{2, 3, 4, 5}, {3, 4, 5}}, {{300, 129}, {129}}, {{5, 1000}, {1000}}, {{700, 3, 2}, {2}},
    {{2, 3}, {2, 3}}, {{0, 5}, {5}}, {{3, 0}, {0}}};
const std::vector<std::pair<Shape, Shape>> kCudaLayerShapes = {
    {{3, 1}, {1}}, {{1, 7}, {7}}, {{5, 7}, {7}}, {{2, 3, 4}, {3, 4}}, {{64, 1000}, {1000}},
    {{3, 5000}, {5000}}, {{17, 5000}, {5000}}, {{4096, 7}, {7}}, {{2, 40, 25}, {40, 25}},
    {{1, 1025}, {1025}}, {{9, 300}, {300}}, {{3, 0}, {0}}};
// clang-format on
const std::vector<Case> kLayerEps = {with({4, 5}, {.dims = {5}, .eps = 1e-3})};
// Each with weight and bias and without.
std::vector<Case> ln_cases(const std::vector<std::pair<Shape, Shape>>& table) {
    std::vector<Case> c;
    for (const auto& [x, ns] : table)
        for (bool affine : {true, false}) c.push_back(ln_case(x, ns, affine));
    return c;
}

double x_bytes(const Sample& s) { return double(s.inputs[0].numel() * s.inputs[0].element_size()); }

// One entry; `flops` per element of x; `moves` x-sized tensors per call (bench/nn.cpp's count).
OpEntry entry(const char* name, Kind k, std::vector<Signature> dtypes, const char* label,
              double flops, double moves) {
    OpEntry e;
    e.name = name;
    e.family = Family::norm;
    e.dtypes = std::move(dtypes);
    e.generate = [k](const Case& c, const Signature& sig, uint64_t seed) {
        return generate(k, c, sig, seed);
    };
    // Layer norm copies any layout to rows (channels-last too: a contiguous result).
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::strided, Layout::channels_last};
    if (is_layer(k)) e.layouts.push_back(Layout::reversed);
    if (!is_layer(k)) e.cuda_layouts.push_back(Layout::channels_last);
    e.cuda = true;
    if (is_backward(k)) {
        e.raw = [k](const std::vector<Tensor>& in, const Args& a) {
            return backward_raw(k, in, a);
        };
        e.reference = [k](const Sample& s) { return backward_reference(k, s); };
        // The result dtype's precision (the sums are f64, rounded once), and
        // the apply pass's cancellation.
        e.tolerance = [k](DType t, const Sample& s) {
            return Tolerance{rtol_for(t), rtol_for(t) + cancellation(k, s)};
        };
    } else {
        e.raw = [k](const std::vector<Tensor>& in, const Args& a) { return forward_raw(k, in, a); };
        e.reference = [k](const Sample& s) { return forward_reference(k, s); };
        e.differentiable = [k](const std::vector<Tensor>& in, const Args& a) {
            return differentiable(k, in, a);
        };
        // Statistics and running statistics: f64 sums rounded once. Outputs:
        // y rounded in Acc<T>, then to T; with a residual, y is rounded before
        // the add, and half an ulp of |y| < 8 may survive a sum that cancels.
        e.tolerance = [k](DType t, const Sample&) {
            return Tolerance{rtol_for(t), (k == Kind::bn_add_relu ? 4 : 1) * rtol_for(t)};
        };
    }
    e.cuda_tolerance = [k](DType t, const Sample& s, size_t output) {
        return cuda_tolerance(k, t, s, output);
    };
    e.bench_cases = [k](bool quick) {
        if (is_layer(k)) return std::vector<Case>{ln_case({quick ? 512 : 8192, 1024}, {1024})};
        return std::vector<Case>{bn_case({quick ? 8 : 128, 16, 28, 28}, true, k == Kind::bn_eval)};
    };
    e.bench_label = [label = std::string(label)](const Case&) { return label; };
    e.bytes = [moves](const Sample& s, const Outputs&) { return moves * x_bytes(s); };
    e.flops = [flops](const Sample& s, const Outputs&) {
        return flops * double(s.inputs[0].numel());
    };
    return e;
}

// The training forwards: batch_norm_forward, batch_norm_relu_forward, batch_norm_add_relu_forward.
OpEntry training_forward(const char* name, Kind k, const char* label, double flops, double moves) {
    // {x, weight, bias, running_mean, running_var}: parameters and running
    // statistics of other dtypes, strided in the transposed layout (written
    // in place through the stride: running_copy); batch_norm_forward also
    // with f64 parameters and running statistics of an f32 x.
    std::vector<Signature> sigs = {{f32, f32, f32, f32, f32},
                                   {f64, f64, f64, f64, f64},
                                   {f16, f64, f32, f32, f32},
                                   {bf16, f64, f32, bf16, bf16},
                                   {f32, f64, f32, bf16, bf16}};
    if (k == Kind::bn) sigs.push_back({f32, f64, f64, f64, f64});
    OpEntry e = entry(name, k, sigs, label, flops, moves);
    e.cases = both(kBatchShapes, true) +
              std::vector<Case>{bn_case({3, 5, 7}, true, false), bn_case({3, 5, 7}, false, true),
                                with({4, 3, 5}, {.momentum = 0, .affine = false}),
                                with({4, 3, 5}, {.momentum = 1}),
                                with({4, 3, 5}, {.momentum = 0.25}), with({4, 3, 5}, {.eps = 1e-3}),
                                // One value per channel, or none: an error.
                                bn_case({1, 3}, true), bn_case({2, 4, 0}, false)};
    e.grad_cases = {bn_case({3, 2, 2}, true), bn_case({4, 3}, false),
                    bn_case({2, 3, 2, 1}, true, true)};
    e.cuda_cases = both(kCudaBatchShapes, k != Kind::bn) + both(kCudaLastShapes, true);
    if (k == Kind::bn)  // running statistics after one step
        for (const Shape& x : {Shape{4, 3, 5}, Shape{64, 16, 28, 28}, Shape{2, 7}})
            e.cuda_cases.push_back(with(x, {.momentum = 0.25, .affine = false}));
    return e;
}

OpEntry backward(const char* name, Kind k, const char* label, double flops, double moves) {
    // {x (and grad_y), weight}: weights narrower and wider than x's
    // statistics; an f64 weight's gradients of an f32, f16 or bf16 x carry
    // f32 precision (cuda_tolerance).
    std::vector<Signature> sigs = {{f32, f32}, {f64, f64}, {f16, f32}, {bf16, f32}, {bf16, bf16},
                                   {f64, f32}, {f32, f64}, {f16, f64}, {bf16, f64}};
    if (is_layer(k)) sigs = {{f32, f32}, {f64, f64}, {f16, f16}, {bf16, bf16}, {bf16, f32}};
    OpEntry e = entry(name, k, sigs, label, flops, moves);
    const auto needs = {std::array<bool, 3>{true, false, false},
                        {false, true, true},
                        {false, false, true},
                        {true, true, false},
                        {false, false, false}};
    if (is_layer(k)) {
        e.cases = with_need(ln_cases(kLayerShapes) + kLayerEps, needs, ln_case({5, 7}, {7}));
        e.cuda_cases =
            with_need(ln_cases(kCudaLayerShapes), {{true, true, false}}, ln_case({9, 300}, {300}));
        return e;
    }
    // Each gradient alone or with others, with a weight and without.
    const auto partial = [&](std::vector<Case> c) {
        return with_need(with_need(c, needs, bn_case({6, 4, 5}, true)), {{false, true, true}},
                         bn_case({6, 4, 5}, false));
    };
    e.cases =
        partial(both(kBatchShapes, false) + std::vector<Case>{with({3, 5, 7}, {.eps = 1e-3})});
    e.cuda_cases = partial(both(kCudaBatchShapes, false) + both(kCudaLastShapes, false) +
                           std::vector<Case>{bn_case({0, 3, 4}, false)});
    return e;
}

}  // namespace

std::vector<OpEntry> norm_entries() {
    std::vector<OpEntry> out;
    // name, kind, bench label, FLOPs per element (sums, then subtract,
    // multiply, add), x-sized tensors moved (bench/nn.cpp)
    out.push_back(training_forward("batch_norm_forward", Kind::bn, "batch_norm fwd", 7, 2));
    out.push_back(
        training_forward("batch_norm_relu_forward", Kind::bn_relu, "batch_norm_relu fwd", 8, 2));
    OpEntry add = training_forward("batch_norm_add_relu_forward", Kind::bn_add_relu,
                                   "batch_norm_add_relu fwd", 9, 3);
    // {x (and the residual), weight, bias, running_mean, running_var}.
    add.dtypes = {{f32, f32, f32, f32, f32},
                  {f64, f64, f64, f64, f64},
                  {f64, f32, f32, f32, f32},
                  {f16, f32, f32, f32, f32},
                  {bf16, f32, f32, f32, f32}};
    out.push_back(add);

    OpEntry eval = entry("batch_norm_inference", Kind::bn_eval,
                         {{f32, f32, bf16, f32, f32},
                          {f64, f64, bf16, f32, f32},
                          {f16, f16, bf16, f32, f32},
                          {bf16, bf16, bf16, f32, f32},
                          {f32, f64, f64, f64, f64}},
                         "batch_norm eval", 3, 2);
    for (const Shape& x : {Shape{3, 4}, Shape{2, 3, 5, 7}, Shape{1, 1, 9}, Shape{8, 16, 33},
                           Shape{1, 3}, Shape{0, 3}, Shape{4, 2, 1, 1}})
        for (bool affine : {true, false}) eval.cases.push_back(bn_case(x, affine, true));
    eval.cases.push_back(with({2, 3, 5, 7}, {.eps = 1e-3}));
    eval.cases.push_back(bn_case({3, 4}, true, false));  // no running statistics: an error
    eval.grad_cases = {bn_case({3, 2, 2}, true), bn_case({4, 3}, false)};
    for (const Shape& x :
         {Shape{3, 4}, Shape{2, 3, 5, 7}, Shape{1, 1, 9}, Shape{8, 16, 33}, Shape{0, 3},
          Shape{4, 16, 8, 8}, Shape{64, 16, 28, 28}, Shape{8, 1, 6, 6}, Shape{16, 40, 1, 1}})
        for (bool affine : {true, false})
            eval.cuda_cases.push_back(with(x, {.eps = 1e-3, .affine = affine}));
    out.push_back(eval);

    out.push_back(backward("batch_norm_backward", Kind::bn_bwd, "batch_norm bwd", 9, 3));
    out.push_back(
        backward("batch_norm_relu_backward", Kind::bn_relu_bwd, "batch_norm_relu bwd", 10, 4));

    // {x, weight, bias}: the bias of another dtype (converted).
    OpEntry ln = entry(
        "layer_norm_forward", Kind::ln,
        {{f32, f32, f32}, {f64, f64, f64}, {f16, f16, f64}, {bf16, bf16, f64}, {bf16, f32, f32}},
        "layer_norm fwd", 7, 2);
    ln.cases = ln_cases(kLayerShapes) + kLayerEps;
    ln.grad_cases = {ln_case({3, 4}, {4}), ln_case({2, 2, 3}, {2, 3}), ln_case({2, 3}, {3}, false)};
    ln.cuda_cases = ln_cases(kCudaLayerShapes);
    out.push_back(ln);
    out.push_back(backward("layer_norm_backward", Kind::ln_bwd, "layer_norm bwd", 18, 3));
    return out;
}

}  // namespace ember::test

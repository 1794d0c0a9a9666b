// The matrix-product entries of the op table: matmul (torch.matmul's 1-d
// promotion and batch broadcasting), bmm, addmm, linear with its fused forms
// linear_relu and linear_gelu, and the linear layer's weight gradient, against
// naive f64 products. CUDA (cuBLAS, cuBLASLt's epilogues) is compared with the
// CPU on the cuda_cases by tests/cuda/test_cuda_ops.cpp; what is not a plain
// comparison (TF32, odd offsets, determinism, the model steps) stays in
// tests/cuda/test_cuda_matmul.cpp and test_cuda_linear.cpp. No bench rows:
// bench/matmul.cpp times the products against the GEMM peak.
//
// Encodings: linear's bias is optional (a case with two shapes has none);
// linear_gelu's want_pre is off where args.scalar == 0 (then `pre` is not
// returned); linear_weight_grad's want_bias is args.need[2].
#include <algorithm>
#include <cmath>
#include <numbers>

#include "autograd/ops/matmul.h"
#include "kernels/matmul.h"
#include "ops/op_table.h"
#include "ops/reference.h"

namespace ember::test {

namespace {

const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::f16, DType::bf16};

std::vector<Signature> each(size_t inputs) {
    std::vector<Signature> out;
    for (DType t : kFloats) out.push_back(Signature(inputs, t));
    return out;
}

std::vector<Case> cases_of(const std::vector<std::vector<Shape>>& shapes, Args args = {}) {
    std::vector<Case> out;
    for (const auto& s : shapes) out.push_back({s, args});
    return out;
}
template <class T>
std::vector<T> operator+(std::vector<T> a, const std::vector<T>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// ---- The f64 reference ----

// Row-major values and a shape of >= 2 dims: [..., rows, cols].
struct Mat {
    std::vector<double> v;
    Shape shape;
};

bool broadcastable(const Shape& a, const Shape& b) {
    for (size_t i = 1; i <= std::min(a.size(), b.size()); ++i) {
        const int64_t x = a[a.size() - i], y = b[b.size() - i];
        if (x != y && x != 1 && y != 1) return false;
    }
    return true;
}

// a [..., M, K] · b [..., K, N] with the batch dims broadcast, summed in f64
// in k order. The caller checks the inner dims and the batch dims.
Mat product(const Mat& a, const Mat& b) {
    const int64_t m = a.shape.end()[-2], k = a.shape.back(), n = b.shape.back();
    const Shape ab(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
    const Shape batch = ref::broadcast(ab, bb);
    // The matrix of an operand with batch dims `ob` that output matrix t reads.
    const auto source = [&](int64_t t, const Shape& ob) {
        const Shape idx = unravel(t, batch);
        int64_t f = 0;
        for (size_t i = 0; i < ob.size(); ++i)
            f = f * ob[i] + (ob[i] == 1 ? 0 : idx[i + batch.size() - ob.size()]);
        return f;
    };
    Mat out{std::vector<double>(size_t(shape_numel(batch) * m * n)), batch};
    out.shape.insert(out.shape.end(), {m, n});
    for (int64_t t = 0; t < shape_numel(batch); ++t) {
        const int64_t sa = source(t, ab) * m * k, sb = source(t, bb) * k * n;
        for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j) {
                double s = 0;
                for (int64_t p = 0; p < k; ++p)
                    s += a.v[size_t(sa + i * k + p)] * b.v[size_t(sb + p * n + j)];
                out.v[size_t((t * m + i) * n + j)] = s;
            }
    }
    return out;
}

// The transpose of a 2-d matrix.
Mat transposed(const Mat& a) {
    const int64_t r = a.shape[0], c = a.shape[1];
    Mat t{std::vector<double>(a.v.size()), {c, r}};
    for (int64_t i = 0; i < r; ++i)
        for (int64_t j = 0; j < c; ++j) t.v[size_t(j * r + i)] = a.v[size_t(i * c + j)];
    return t;
}

Mat mat(const Tensor& t) { return {values(t), t.shape()}; }

// c (broadcast to out's shape) added to out.
void add_broadcast(Mat& out, const Tensor& c) {
    const std::vector<double> s = ref::map({c, zeros(out.shape, {DType::f64})}, DType::f64,
                                           [](const double* v) { return v[0]; });
    for (size_t i = 0; i < out.v.size(); ++i) out.v[i] += s[i];
}

// The product's checks, in the front's words; empty when the call is valid.
std::string product_error(const Shape& a, const Shape& b) {
    if (a.end()[-1] != b.end()[-2]) return "inner dims";
    if (!broadcastable(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2)))
        return "do not broadcast";
    return "";
}

Expected error(std::string what) {
    Expected e;
    e.error = std::move(what);
    return e;
}

Expected matmul_reference(const Sample& s) {
    const Tensor &a = s.inputs[0], &b = s.inputs[1];
    Mat ma = mat(a), mb = mat(b);
    if (a.dim() == 1) ma.shape.insert(ma.shape.begin(), 1);  // a row
    if (b.dim() == 1) mb.shape.push_back(1);                 // a column
    if (std::string e = product_error(ma.shape, mb.shape); !e.empty()) return error(e);
    Mat out = product(ma, mb);
    if (a.dim() == 1) out.shape.erase(out.shape.end() - 2);
    if (b.dim() == 1) out.shape.pop_back();
    return Expected(out.shape, a.dtype(), std::move(out.v));
}

// linear's pre-activation x · wᵀ (+ bias) over x's rows, or the error.
Expected linear_reference(const Sample& s) {
    const Tensor &x = s.inputs[0], &w = s.inputs[1];
    if (x.size(-1) != w.size(1)) return error("does not end in the");
    const bool bias = s.inputs.size() == 3;
    if (bias && s.inputs[2].size(0) != w.size(0)) return error("expected bias");
    Mat mx = mat(x);  // x's rows stacked
    mx.shape = {shape_numel(Shape(x.shape().begin(), x.shape().end() - 1)), x.size(-1)};
    Mat y = product(mx, transposed(mat(w)));
    if (bias) add_broadcast(y, s.inputs[2]);
    Shape shape = x.shape();
    shape.back() = w.size(0);
    return Expected(shape, x.dtype(), std::move(y.v));
}

// GELU's tanh approximation from its formula.
double gelu_tanh(double z) {
    const double c = std::sqrt(2 / std::numbers::pi);
    return 0.5 * z * (1 + std::tanh(c * (z + 0.044715 * z * z * z)));
}

// ---- Tolerances ----

// The terms of a sum are products of inputs in [-1, 1] (the weight in [-0.5,
// 0.5]): each at most 1. The CPU sums k of them in f32 (f64 for f64; f16 in
// f32 too), each addition rounded, in its own order: errors of a few u·√k
// times the partial sums, a tenth of 2u·(k + 1) at K = 1100 (measured). The
// result dtype's rounding is relative: rtol_for.
Tolerance sum_of(int64_t k, DType t) {
    const double u = t == DType::f64 ? 0x1p-53 : 0x1p-24;
    return {rtol_for(t), 2 * u * double(k + 1)};
}
// GELU: its slope is at most 1.13, and f16 on the CPU applies it to the
// pre-activation rounded to f16 (the fused path to the f32 sum): |z·gelu'(z)|
// stays under 0.2 where gelu(z) is small (z < 0), an absolute term.
Tolerance gelu_of(int64_t k, DType t) {
    const Tolerance s = sum_of(k, t);
    return {s.rtol, 1.2 * s.atol + 0.2 * rtol_for(t)};
}

// CUDA against the CPU: both sum in f32 (f64) from the same operands, cuBLAS
// in its own order, f16/bf16 results rounded once from them: one ulp of the
// result dtype apart (2^-10, 2^-7 of the value) plus a sum's rounding. As
// rtol and atol at once: 1e-5 is the old f32 rtol and a tenth of its atol at
// K = 127 (atol 1e-5·√K), f16 and bf16 half their old rtol. Sums of 256
// terms in [-1, 1] added in two orders differ by at most 0.6 of it (400,000
// simulated sums; 2.3 at K = 1100): the CUDA cases keep K <= 256.
double cuda_tolerance(DType t, const Sample&, size_t) {
    switch (t) {
        case DType::f64:
            return 1e-13;
        case DType::f32:
            return 1e-5;
        case DType::f16:
            return 1e-3;
        default:
            return 8e-3;  // bf16
    }
}

// ---- Entries ----

// What every product shares; k(sample) is the length of its sums.
OpEntry product_entry(const char* name, size_t inputs, std::function<int64_t(const Sample&)> k,
                      bool gelu = false) {
    OpEntry e;
    e.name = name;
    e.family = Family::matmul;
    e.dtypes = each(inputs);
    e.domains = {{.lo = -1, .hi = 1}};
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::strided};
    e.tolerance = [k, gelu](DType t, const Sample& s) {
        return gelu ? gelu_of(k(s), t) : sum_of(k(s), t);
    };
    e.cuda = true;
    e.cuda_layouts = {Layout::contiguous, Layout::transposed, Layout::strided};
    e.cuda_tolerance = cuda_tolerance;
    e.flops = [k](const Sample& s, const Outputs& out) {
        return 2.0 * double(out[0].numel()) * double(k(s));
    };
    return e;
}

// clang-format off
// matmul: dot products (an empty one too), vector · matrix, matrix · vector,
// vector · batch, odd sizes off the 6 × 64 tile, K past the 1024-deep blocks
// of the CPU's GEMM, K = 0 (zeros), empty results, batches broadcast each way
// (a shared right operand folds into one tall GEMM), and errors.
const std::vector<std::vector<Shape>> kMatmulCases = {
    {{7}, {7}}, {{1}, {1}}, {{0}, {0}}, {{5}, {5, 3}}, {{4, 5}, {5}}, {{5}, {2, 5, 3}},
    {{2, 3, 4, 5}, {5}}, {{1, 1}, {1, 1}}, {{3, 4}, {4, 5}}, {{13, 17}, {17, 71}},
    {{7, 1100}, {1100, 9}}, {{3, 0}, {0, 4}}, {{2, 5, 0}, {0, 3}}, {{0, 5}, {5, 3}},
    {{4, 5}, {5, 0}}, {{2, 0, 4, 5}, {5, 3}}, {{3, 7, 5}, {5, 4}}, {{7, 5}, {2, 3, 5, 4}},
    {{2, 1, 7, 6}, {3, 6, 4}}, {{2, 3, 7, 5}, {1, 3, 5, 6}}, {{5, 1, 1}, {1, 1, 1}},
    {{6, 13, 9}, {6, 9, 1}}, {{4, 1, 9}, {9}},
    {{3, 4}, {5, 6}}, {{7}, {8}}, {{2, 3, 4}, {3, 4, 5}}};
const std::vector<std::vector<Shape>> kMatmulGrad = {
    {{3, 4}, {4, 5}}, {{4}, {4}}, {{4}, {4, 3}}, {{3, 4}, {4}}, {{2, 1, 3, 4}, {3, 4, 2}},
    {{3}, {2, 3, 2}}, {{2, 3, 4}, {4}}};
// CUDA (test_cuda_matmul.cpp's shapes): batches broadcast both ways, 1-d
// promotions, a dot product, strided vectors (transposed layout), K = 0 and
// empty results; with every 2-d product of sizes 1, 7, 33 and 127 below.
const std::vector<std::vector<Shape>> kMatmulCuda = {
    {{3, 7, 5}, {5, 4}}, {{7, 5}, {2, 3, 5, 4}}, {{2, 1, 7, 33}, {3, 33, 4}},
    {{2, 3, 7, 5}, {1, 3, 5, 6}}, {{4, 1, 33}, {33}}, {{33}, {2, 33, 7}}, {{127}, {127}},
    {{1}, {1, 1}}, {{5, 1, 1}, {1, 1, 1}}, {{6, 127, 33}, {6, 33, 1}}, {{33}, {4, 33, 6}},
    {{2, 5, 7}, {7}}, {{33, 0}, {0, 7}}, {{2, 5, 0}, {0, 3}}, {{0, 5}, {5, 3}},
    {{2, 0, 4, 5}, {5, 3}}};
// clang-format on

OpEntry matmul_entry() {
    OpEntry e = product_entry("matmul", 2, [](const Sample& s) { return s.inputs[0].size(-1); });
    e.raw = [](const std::vector<Tensor>& x, const Args&) { return kernels::matmul(x[0], x[1]); };
    e.differentiable = [](const std::vector<Tensor>& x, const Args&) {
        return ember::matmul(x[0], x[1]);
    };
    e.reference = matmul_reference;
    e.cases = cases_of(kMatmulCases);
    e.grad_cases = cases_of(kMatmulGrad);
    e.cuda_cases = cases_of(kMatmulCuda);
    for (int64_t m : {1, 7, 33, 127})
        for (int64_t k : {1, 7, 33, 127})
            for (int64_t n : {1, 7, 33, 127}) e.cuda_cases.push_back({{{m, k}, {k, n}}});
    return e;
}

OpEntry bmm_entry() {
    OpEntry e = product_entry("bmm", 2, [](const Sample& s) { return s.inputs[0].size(-1); });
    e.raw = [](const std::vector<Tensor>& x, const Args&) { return kernels::bmm(x[0], x[1]); };
    e.differentiable = [](const std::vector<Tensor>& x, const Args&) {
        return ember::bmm(x[0], x[1]);
    };
    e.reference = [](const Sample& s) {
        const Tensor &a = s.inputs[0], &b = s.inputs[1];
        if (a.dim() != 3 || b.dim() != 3) return error("expected 3-d operands");
        if (a.size(0) != b.size(0)) return error("batch sizes differ");
        return matmul_reference(s);
    };
    e.cases = cases_of({{{5, 13, 7}, {5, 7, 71}},
                        {{1, 1, 1}, {1, 1, 1}},
                        {{4, 7, 33}, {4, 33, 5}},
                        {{2, 3, 1100}, {2, 1100, 4}},
                        {{3, 4, 0}, {3, 0, 5}},
                        {{0, 3, 4}, {0, 4, 2}},
                        {{3, 4, 5}, {3, 5, 0}},
                        {{2, 3, 4}, {3, 4, 5}},
                        {{3, 4}, {4, 5}}});
    e.grad_cases = cases_of({{{2, 3, 4}, {2, 4, 2}}, {{1, 1, 3}, {1, 3, 1}}});
    e.cuda_cases = cases_of({{{5, 33, 7}, {5, 7, 127}},
                             {{1, 1, 1}, {1, 1, 1}},
                             {{4, 7, 33}, {4, 33, 7}},
                             {{3, 4, 5}, {3, 5, 0}}});
    return e;
}

OpEntry addmm_entry() {
    OpEntry e = product_entry("addmm", 3, [](const Sample& s) { return s.inputs[1].size(-1); });
    e.raw = [](const std::vector<Tensor>& x, const Args&) {
        return kernels::addmm(x[0], x[1], x[2]);
    };
    e.differentiable = [](const std::vector<Tensor>& x, const Args&) {
        return ember::addmm(x[0], x[1], x[2]);
    };
    e.reference = [](const Sample& s) {
        const Tensor &c = s.inputs[0], &a = s.inputs[1], &b = s.inputs[2];
        if (std::string err = product_error(a.shape(), b.shape()); !err.empty()) return error(err);
        Mat out = product(mat(a), mat(b));
        if (c.dim() > 2 || !broadcastable(c.shape(), out.shape) ||
            ref::broadcast(c.shape(), out.shape) != out.shape)
            return error("does not broadcast to the product's shape");
        add_broadcast(out, c);
        return Expected(out.shape, a.dtype(), std::move(out.v));
    };
    // c: a bias row, a column, a full matrix, [1, 1], [1] and 0-d; K = 0 (c
    // itself); no rows; c that does not broadcast.
    for (const Shape& c : std::vector<Shape>{{71}, {13, 1}, {13, 71}, {1, 1}, {1}, {}})
        e.cases.push_back({{c, {13, 17}, {17, 71}}});
    e.cases = e.cases + cases_of({{{7}, {3, 1100}, {1100, 7}},
                                  {{7}, {3, 0}, {0, 7}},
                                  {{5}, {0, 4}, {4, 5}},
                                  {{3}, {4, 5}, {5, 6}},
                                  {{2, 4, 6}, {4, 5}, {5, 6}},
                                  {{6}, {4, 5}, {4, 6}}});
    for (const Shape& c : std::vector<Shape>{{5}, {3, 1}, {3, 5}, {}})
        e.grad_cases.push_back({{c, {3, 4}, {4, 5}}});
    for (const Shape& c : std::vector<Shape>{{127}, {33, 1}, {33, 127}, {1, 1}})
        e.cuda_cases.push_back({{c, {33, 7}, {7, 127}}});
    e.cuda_cases.push_back({{{7}, {3, 0}, {0, 7}}});
    return e;
}

// linear, linear_relu and linear_gelu: x [..., in], w [out, in], bias [out]
// (a case with two shapes has none).
enum class Act { none, relu, gelu };

// clang-format off
const std::vector<std::vector<Shape>> kLinearCases = {
    {{13, 17}, {71, 17}, {71}}, {{13, 17}, {71, 17}}, {{2, 5, 17}, {9, 17}, {9}},
    {{2, 5, 17}, {9, 17}}, {{17}, {9, 17}, {9}}, {{17}, {9, 17}}, {{1, 17}, {9, 17}, {9}},
    {{3, 1100}, {5, 1100}, {5}},
    {{4, 0}, {7, 0}, {7}}, {{4, 0}, {7, 0}}, {{0, 9}, {5, 9}, {5}}, {{2, 0, 9}, {5, 9}},
    {{3, 9}, {0, 9}, {0}},
    {{3, 4}, {5, 6}}, {{3, 4}, {5, 4}, {4}}};
const std::vector<std::vector<Shape>> kLinearGrad = {
    {{3, 4}, {5, 4}, {5}}, {{3, 4}, {5, 4}}, {{2, 3, 4}, {5, 4}, {5}}, {{4}, {5, 4}, {5}}};
// CUDA (test_cuda_matmul.cpp and test_cuda_linear.cpp): cuBLASLt's aligned
// problem with and without the bias, x as rows, a batch of rows, one vector
// and column-major (the transposed layout) against a 33 × 127 weight; a
// non-contiguous weight; K = 0 (the bias).
const std::vector<std::vector<Shape>> kLinearCuda = {
    {{64, 256}, {128, 256}, {128}}, {{64, 256}, {128, 256}},
    {{33, 127}, {33, 127}, {33}}, {{4, 7, 127}, {33, 127}, {33}}, {{127}, {33, 127}, {33}},
    {{1, 127}, {33, 127}, {33}}, {{7, 127}, {33, 127}, {33}}, {{2, 5, 127}, {33, 127}, {33}},
    {{6, 127}, {33, 127}, {33}},
    {{33, 127}, {7, 127}}, {{4, 7, 127}, {7, 127}}, {{127}, {7, 127}}, {{1, 127}, {7, 127}},
    {{7, 127}, {33, 127}}, {{2, 5, 127}, {33, 127}}, {{6, 127}, {33, 127}},
    {{9, 33}, {7, 33}, {7}}, {{4, 0}, {7, 0}, {7}}};
// clang-format on

OpEntry linear_entry(const char* name, Act act) {
    OpEntry e = product_entry(
        name, 3, [](const Sample& s) { return s.inputs[1].size(1); }, act == Act::gelu);
    // The weight at a layer's scale: the sums' terms stay small, and so does
    // the f32 rounding the CUDA comparison must absorb at K = 256.
    e.domains = {{.lo = -1, .hi = 1}, {.lo = -0.5, .hi = 0.5}, {.lo = -1, .hi = 1}};
    const auto bias = [](const std::vector<Tensor>& x) { return x.size() > 2 ? x[2] : Tensor(); };
    e.raw = [act, bias](const std::vector<Tensor>& x, const Args& a) -> Outputs {
        if (act == Act::none) return kernels::linear(x[0], x[1], bias(x));
        if (act == Act::relu) return kernels::linear_relu(x[0], x[1], bias(x));
        const kernels::LinearGelu r = kernels::linear_gelu(x[0], x[1], bias(x), a.scalar != 0.0);
        Outputs out{r.out};
        // Where the epilogue ran, pre is a view of rows padded to 8: its values.
        if (r.pre.defined()) out.push_back(r.pre.contiguous());
        return out;
    };
    e.differentiable = [act, bias](const std::vector<Tensor>& x, const Args&) {
        return act == Act::none   ? ember::linear(x[0], x[1], bias(x))
               : act == Act::relu ? ember::linear_relu(x[0], x[1], bias(x))
                                  : ember::linear_gelu(x[0], x[1], bias(x));
    };
    e.reference = [act](const Sample& s) {
        Expected want = linear_reference(s);
        if (!want.error.empty() || act == Act::none) return want;
        ExpectedOutput pre = want.outputs[0];
        for (double& v : want.outputs[0].values)
            v = act == Act::relu ? std::max(v, 0.0) : gelu_tanh(v);
        if (act == Act::gelu && s.args.scalar != 0.0) want.outputs.push_back(std::move(pre));
        return want;
    };
    e.cases = cases_of(kLinearCases);
    e.grad_cases = cases_of(kLinearGrad);
    e.cuda_cases = cases_of(kLinearCuda);
    if (act == Act::gelu) {  // the output alone (cuBLASLt's GELU_BIAS / GELU)
        const Args out_only{.scalar = 0.0};
        e.cases = e.cases + cases_of({{{13, 17}, {71, 17}, {71}}, {{2, 5, 17}, {9, 17}}}, out_only);
        e.cuda_cases = e.cuda_cases + cases_of({{{64, 256}, {128, 256}, {128}},
                                                {{64, 256}, {128, 256}},
                                                {{7, 127}, {33, 127}, {33}},
                                                {{6, 127}, {33, 127}, {33}}},
                                               out_only);
    }
    return e;
}

// linear_weight_grad: grad [rows, out] and x [rows, in]; the bias gradient
// where args.need[2].
OpEntry weight_grad_entry() {
    OpEntry e =
        product_entry("linear_weight_grad", 2, [](const Sample& s) { return s.inputs[0].size(0); });
    e.raw = [](const std::vector<Tensor>& x, const Args& a) {
        const kernels::LinearWeightGrads r = kernels::linear_weight_grad(x[0], x[1], a.need[2]);
        return r.bias.defined() ? Outputs{r.weight, r.bias} : Outputs{r.weight};
    };
    e.reference = [](const Sample& s) {
        const Tensor &g = s.inputs[0], &x = s.inputs[1];
        if (g.size(0) != x.size(0)) return error("expected grad [rows, out] and input [rows, in]");
        Mat w = product(transposed(mat(g)), mat(x));
        Expected want(w.shape, g.dtype(), std::move(w.v));
        if (s.args.need[2]) {
            const Mat ones_row{std::vector<double>(size_t(g.size(0)), 1.0), {1, g.size(0)}};
            want.outputs.push_back({{g.size(1)}, g.dtype(), product(ones_row, mat(g)).v});
        }
        return want;
    };
    // Odd sizes, one row, rows past 1024, no rows (zeros), no out or in features.
    const std::vector<std::vector<Shape>> shapes = {
        {{13, 71}, {13, 17}}, {{1, 9}, {1, 17}}, {{1100, 5}, {1100, 3}}, {{0, 5}, {0, 3}},
        {{4, 0}, {4, 3}},     {{4, 5}, {4, 0}},  {{3, 5}, {4, 3}}};
    // cuBLASLt's aligned problem (BGRADB) and test_cuda_linear.cpp's 40 rows.
    const std::vector<std::vector<Shape>> cuda = {{{64, 128}, {64, 256}}, {{40, 33}, {40, 127}}};
    for (bool bias : {true, false}) {
        const Args args{.need = {true, true, bias}};
        e.cases = e.cases + cases_of(shapes, args);
        e.cuda_cases = e.cuda_cases + cases_of(cuda, args);
    }
    e.flops = [](const Sample& s, const Outputs&) {
        return 2.0 * double(s.inputs[0].numel()) * double(s.inputs[1].size(1));
    };
    return e;
}

}  // namespace

std::vector<OpEntry> matmul_entries() {
    return {matmul_entry(),
            bmm_entry(),
            addmm_entry(),
            linear_entry("linear", Act::none),
            linear_entry("linear_relu", Act::relu),
            linear_entry("linear_gelu", Act::gelu),
            weight_grad_entry()};
}

}  // namespace ember::test

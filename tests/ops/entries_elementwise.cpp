// The elementwise entries of the op table: unary ops, binary ops with a tensor
// or a scalar right operand, comparisons, where, clamp and the activation
// backwards. Each family helper fills the shared shape tables; an entry says
// only what is particular to its op.
#include <cmath>

#include "autograd/ops/elementwise.h"
#include "kernels/elementwise.h"
#include "ops/op_table.h"
#include "ops/reference.h"

namespace ember::test {

namespace {
using kernels::BinaryOp;
using kernels::CompareOp;
using kernels::UnaryOp;
using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);
using Scalar = Tensor (*)(const Tensor&, double);

const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::f16, DType::bf16};
const std::vector<DType> kNumbers = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                     DType::i32, DType::i64, DType::u8};

std::vector<Signature> each(const std::vector<DType>& dtypes, size_t inputs) {
    std::vector<Signature> out;
    for (DType t : dtypes) out.push_back(Signature(inputs, t));
    return out;
}

// Shapes: 0-d, size-0 and size-1 dims, odd sizes; pairs broadcast both ways.
// clang-format off
const std::vector<Shape> kShapes = {{}, {1}, {0}, {7}, {3, 0, 2}, {2, 3, 4}, {1, 5, 1}, {33, 17}};
const std::vector<std::vector<Shape>> kPairs = {
    {{}, {}}, {{1}, {}}, {{7}, {7}}, {{3, 1, 5}, {4, 5}}, {{2, 3, 4}, {}}, {{}, {2, 3}},
    {{0, 3}, {3}}, {{4, 0}, {1, 1}}, {{2, 1, 3}, {1, 1, 1}}, {{5, 1}, {1, 6}},
    {{2, 3, 4, 5}, {3, 1, 5}}, {{1, 1}, {1}}};
// gradcheck: equal, broadcasting each way, a one-element [1] and a 0-d side.
const std::vector<std::vector<Shape>> kGradPairs = {
    {{2, 3}, {2, 3}}, {{3, 1, 4}, {2, 4}}, {{2, 4}, {3, 1, 4}}, {{2, 3}, {1}},
    {{1}, {2, 3}}, {{3, 1}, {1, 4}}, {{2, 3}, {}}};
// CUDA: dense with an odd size (vector tails), 2-d (transposed in the test), broadcast.
const std::vector<std::vector<Shape>> kCudaPairs = {
    {{1001}, {1001}}, {{37, 65}, {37, 65}}, {{4, 1, 33}, {5, 33}}, {{64, 128}, {128}}};
const std::vector<std::vector<Shape>> kTriples = {
    {{3, 1, 5}, {4, 5}, {}}, {{}, {2, 3}, {3}}, {{4}, {}, {}}, {{2, 0}, {1}, {2, 1}},
    {{5, 4}, {5, 4}, {5, 4}}, {{1}, {1, 1}, {}}};
// clang-format on
const std::vector<Shape> kGradShapes = {{4, 5}, {}};
const std::vector<Shape> kCudaShapes = {{1001}, {37, 65}, {4, 1, 33}};

std::vector<Case> cases_of(const std::vector<std::vector<Shape>>& shape_lists, Args args = {}) {
    std::vector<Case> out;
    for (const auto& s : shape_lists) out.push_back({s, args});
    return out;
}
std::vector<Case> unary_cases(const std::vector<Shape>& shapes) {
    std::vector<Case> out;
    for (const Shape& s : shapes) out.push_back({{s}});
    return out;
}
// Each shape with each scalar right operand.
std::vector<Case> scalar_cases(const std::vector<Shape>& shapes, const std::vector<double>& ss) {
    std::vector<Case> out;
    for (const Shape& s : shapes)
        for (double v : ss) out.push_back({{s}, {.scalar = v}});
    return out;
}
template <class T>
std::vector<T> operator+(std::vector<T> a, const std::vector<T>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// 16M f32 elements, past the caches (256K with --quick, a smoke test).
int64_t bench_n(bool quick) { return quick ? int64_t(1) << 18 : int64_t(1) << 24; }

Tolerance exact(DType, const Sample&) { return {0, 0}; }
Tolerance by_dtype(DType t, const Sample&) { return {rtol_for(t), rtol_for(t) * 0.1}; }

std::function<double(const Sample&, const Outputs&)> per_output(double flops) {
    return [flops](const Sample&, const Outputs& out) { return flops * double(out[0].numel()); };
}

// Integer results are exact and wrap in the result dtype.
Expected wrapped(Expected e) {
    for (ExpectedOutput& o : e.outputs)
        if (!is_floating(o.dtype) && o.dtype != DType::boolean)
            for (double& v : o.values) v = ref::wrap_to(v, o.dtype);
    return e;
}

const std::vector<Layout> kTwoLayouts = {Layout::contiguous, Layout::transposed};

OpEntry elementwise(std::string name, Family f, size_t inputs) {
    OpEntry e;
    e.name = std::move(name);
    e.family = f;
    e.layouts = kTwoLayouts;
    e.tolerance = by_dtype;
    e.cuda = true;
    e.flops = per_output(1);
    e.bench_cases = [inputs](bool quick) {
        return std::vector<Case>{{std::vector<Shape>(inputs, Shape{bench_n(quick)})}};
    };
    return e;
}

// neg/abs/relu keep integer dtypes (`keeps`); the others compute integers in f32.
OpEntry unary(const char* name, UnaryOp op, Unary raw, Unary diff, Domain d, double flops,
              bool keeps = false) {
    OpEntry e = elementwise(name, Family::unary, 1);
    e.raw = [raw](const std::vector<Tensor>& x, const Args&) { return raw(x[0]); };
    e.differentiable = [diff](const std::vector<Tensor>& x, const Args&) { return diff(x[0]); };
    e.dtypes = each(kNumbers, 1);
    e.domains = {d};
    e.cases = unary_cases(kShapes);
    e.reference = [op, keeps](const Sample& s) {
        const Tensor& x = s.inputs[0];
        const DType t = keeps || is_floating(x.dtype()) ? x.dtype() : DType::f32;
        return wrapped({x.shape(), t,
                        ref::map({x}, t, [&](const double* v) { return ref::unary(op, v[0]); })});
    };
    if (keeps) e.tolerance = exact;
    e.grad_cases = unary_cases(kGradShapes);
    e.cuda_exact = keeps;
    e.cuda_cases = unary_cases(kCudaShapes);
    e.flops = per_output(flops);
    return e;
}

// The two forms of a binary op or comparison: op(a, b) and op(a, s).
struct TensorOrScalar {
    Binary tensor;
    Scalar scalar;
};

// op(a, b) with broadcasting, and op(a, s); gradcheck takes s from `grad_scalars`.
OpEntry binary(const char* name, BinaryOp op, TensorOrScalar raw, TensorOrScalar diff,
               std::vector<Domain> d, std::vector<double> grad_scalars = {1.5, -0.75}) {
    OpEntry e = elementwise(name, Family::binary, 2);
    e.raw = [raw](const std::vector<Tensor>& x, const Args& a) {
        return a.scalar ? raw.scalar(x[0], *a.scalar) : raw.tensor(x[0], x[1]);
    };
    e.differentiable = [diff](const std::vector<Tensor>& x, const Args& a) {
        return a.scalar ? diff.scalar(x[0], *a.scalar) : diff.tensor(x[0], x[1]);
    };
    e.dtypes = each(kNumbers, 2);
    e.domains = std::move(d);
    e.cases = cases_of(kPairs) + scalar_cases(kShapes, {2.5, -0.75});
    e.reference = [op](const Sample& s) {
        const Tensor& a = s.inputs[0];
        if (s.args.scalar) {  // integer tensors compute in f32, the scalar in the compute dtype
            const DType t = is_floating(a.dtype()) ? a.dtype() : DType::f32;
            const double sc = t == DType::f64 ? *s.args.scalar : double(float(*s.args.scalar));
            return Expected{a.shape(), t, ref::map({a}, t, [&](const double* v) {
                                return ref::binary(op, v[0], sc, false);
                            })};
        }
        const Tensor& b = s.inputs[1];  // same dtypes; integer division is true division
        const DType t = op == BinaryOp::div && !is_floating(a.dtype()) ? DType::f32 : a.dtype();
        return wrapped(
            {ref::broadcast(a.shape(), b.shape()), t, ref::map({a, b}, t, [&](const double* v) {
                 return ref::binary(op, v[0], v[1], !is_floating(t));
             })});
    };
    if (op == BinaryOp::maximum || op == BinaryOp::minimum) e.tolerance = exact;
    e.grad_cases = cases_of(kGradPairs) + scalar_cases(kGradShapes, grad_scalars);
    e.cuda_exact = op != BinaryOp::pow;
    e.cuda_cases = cases_of(kCudaPairs) + scalar_cases(kCudaShapes, {2.5});
    e.bench_cases = [add = op == BinaryOp::add](bool quick) {
        const int64_t n = bench_n(quick), side = quick ? 512 : 4096;
        std::vector<Case> c = {{{{n}, {n}}}, {{{n}}, {.scalar = 2.0}}};
        if (add) c.push_back({{{side, side}, {side}}});  // a row broadcast down the rows
        return c;
    };
    return e;
}

OpEntry compare(const char* name, CompareOp op, TensorOrScalar raw) {
    OpEntry e = elementwise(name, Family::compare, 2);
    e.raw = [raw](const std::vector<Tensor>& x, const Args& a) {
        return a.scalar ? raw.scalar(x[0], *a.scalar) : raw.tensor(x[0], x[1]);
    };
    e.dtypes = each(kNumbers + std::vector<DType>{DType::boolean}, 2);
    e.domains = {
        {.lo = 0, .hi = 4, .int_lo = 0, .int_hi = 4, .ties = true}};  // ties for eq, le, ge
    e.cases = cases_of(kPairs) + scalar_cases(kShapes, {1.0, 2.5});
    e.reference = [op](const Sample& s) {
        const Tensor& a = s.inputs[0];
        if (s.args.scalar) {  // compared in the dtype a takes with a float scalar
            const DType t = is_floating(a.dtype()) ? a.dtype() : DType::f32;
            const double sc = t == DType::f64 ? *s.args.scalar : double(float(*s.args.scalar));
            return Expected{a.shape(), DType::boolean, ref::map({a}, t, [&](const double* v) {
                                return double(ref::compare(op, v[0], sc));
                            })};
        }
        const Tensor& b = s.inputs[1];
        return Expected{ref::broadcast(a.shape(), b.shape()), DType::boolean,
                        ref::map({a, b}, a.dtype(), [&](const double* v) {
                            return double(ref::compare(op, v[0], v[1]));
                        })};
    };
    e.tolerance = exact;
    e.cuda_exact = true;
    e.cuda_cases = cases_of(kCudaPairs) + scalar_cases(kCudaShapes, {2.5});
    e.bench_cases = [](bool quick) {
        const int64_t n = bench_n(quick);
        return std::vector<Case>{{{{n}, {n}}}, {{{n}}, {.scalar = 0.0}}};
    };
    return e;
}

// The activation backwards: (upstream gradient, saved output or input).
OpEntry activation_backward(const char* name, BinaryOp op, Binary raw, double saved_range,
                            double flops) {
    OpEntry e = elementwise(name, Family::activation_backward, 2);
    e.raw = [raw](const std::vector<Tensor>& x, const Args&) { return raw(x[0], x[1]); };
    e.dtypes = each(kFloats, 2);
    e.domains = {{}, {.lo = -saved_range, .hi = saved_range}};
    e.cases = cases_of(kPairs);
    e.reference = [op](const Sample& s) {
        const Tensor &g = s.inputs[0], &y = s.inputs[1];
        return Expected{ref::broadcast(g.shape(), y.shape()), g.dtype(),
                        ref::map({g, y}, g.dtype(), [&](const double* v) {
                            return ref::binary(op, v[0], v[1], false);
                        })};
    };
    if (op == BinaryOp::relu_backward) e.tolerance = exact;  // a select
    e.cuda_exact = op == BinaryOp::relu_backward;
    e.cuda_cases = cases_of(kCudaPairs);
    e.flops = per_output(flops);
    return e;
}

OpEntry where_entry() {
    OpEntry e = elementwise("where", Family::where, 3);
    e.raw = [](const std::vector<Tensor>& x, const Args&) {
        return kernels::where(x[0], x[1], x[2]);
    };
    e.differentiable = [](const std::vector<Tensor>& x, const Args&) {
        return ember::where(x[0], x[1], x[2]);
    };
    const DType b = DType::boolean;
    e.dtypes = {{b, DType::f32, DType::f32}, {b, DType::f64, DType::f64},
                {b, DType::f16, DType::f16}, {b, DType::bf16, DType::bf16},
                {b, DType::i64, DType::i64}, {b, DType::u8, b},
                {b, DType::i32, DType::f16}};  // a and b promote
    e.domains = {{}, {.lo = 0, .hi = 9, .int_lo = 0, .int_hi = 9}};
    e.cases = cases_of(kTriples);
    e.reference = [](const Sample& s) {
        const DType t = promote_types(s.inputs[1].dtype(), s.inputs[2].dtype());
        Shape shape = ref::broadcast(s.inputs[0].shape(), s.inputs[1].shape());
        return Expected{
            ref::broadcast(shape, s.inputs[2].shape()), t,
            ref::map(s.inputs, t, [](const double* v) { return v[0] != 0 ? v[1] : v[2]; })};
    };
    e.tolerance = exact;
    e.grad_cases = cases_of({{{3, 1, 4}, {2, 4}, {3, 2, 1}}, {{4, 1}, {4, 3}, {}}});
    e.cuda_exact = true;
    e.cuda_cases = cases_of(
        {{{1001}, {1001}, {1001}}, {{37, 65}, {37, 65}, {37, 65}}, {{4, 1, 33}, {5, 33}, {33}}});
    e.flops = nullptr;  // a select: no arithmetic
    return e;
}

OpEntry clamp_entry() {
    OpEntry e = elementwise("clamp", Family::clamp, 1);
    e.raw = [](const std::vector<Tensor>& x, const Args& a) {
        return kernels::clamp(x[0], a.lo, a.hi);
    };
    e.differentiable = [](const std::vector<Tensor>& x, const Args& a) {
        return ember::clamp(x[0], a.lo, a.hi);
    };
    e.dtypes = each(kNumbers, 1);
    e.domains = {{.int_lo = -6, .int_hi = 6}};
    using B = std::optional<double>;
    const std::pair<B, B> bounds[] = {
        {-0.5, 0.7}, {-0.5, std::nullopt}, {std::nullopt, 0.7}, {1.0, -1.0}, {-2.5, 2.5}};
    for (const Shape& s : kShapes)
        for (const auto& [lo, hi] : bounds) e.cases.push_back({{s}, {.lo = lo, .hi = hi}});
    e.reference = [](const Sample& s) {
        const Tensor& x = s.inputs[0];
        const DType t = x.dtype();
        // Integer dtypes round the bounds inward (u8 saturates at 0); floats
        // use them in the compute dtype.
        auto bound = [&](double v, bool upper) {
            if (is_floating(t)) return t == DType::f64 ? v : double(float(v));
            v = upper ? std::floor(v) : std::ceil(v);
            return t == DType::u8 ? std::max(v, 0.0) : v;
        };
        return Expected{x.shape(), t, ref::map({x}, t, [&](const double* v) {
                            double w = v[0];
                            if (s.args.lo) w = std::max(w, bound(*s.args.lo, false));
                            if (s.args.hi) w = std::min(w, bound(*s.args.hi, true));
                            return w;
                        })};
    };
    e.tolerance = exact;
    // Random values stay clear of the bounds, where clamp has kinks.
    for (const Shape& s : kGradShapes)
        for (const auto& [lo, hi] : {bounds[0], bounds[1], bounds[2]})
            e.grad_cases.push_back({{s}, {.lo = lo, .hi = hi}});
    e.cuda_exact = true;
    for (const Shape& s : kCudaShapes) e.cuda_cases.push_back({{s}, {.lo = -0.5, .hi = 0.7}});
    e.bench_cases = [](bool quick) {
        return std::vector<Case>{{{{bench_n(quick)}}, {.lo = -0.5, .hi = 0.5}}};
    };
    e.flops = per_output(2);
    return e;
}

}  // namespace

std::vector<OpEntry> elementwise_entries() {
    const Domain any = {};
    const Domain wide = {.lo = -3, .hi = 3, .int_lo = -30, .int_hi = 30};
    const Domain positive = {.lo = 0.1, .hi = 4, .int_lo = 1, .int_hi = 30};
    const Domain kink = {.lo = 0.2, .hi = 2, .int_lo = -30, .int_hi = 30, .random_sign = true};
    const Domain tails = {.lo = -4, .hi = 4, .int_lo = -30, .int_hi = 30};
    const Domain divisor = {.lo = 0.25, .hi = 2, .random_sign = true};  // integers: 0 gives inf
    const Unary gelu_tanh = [](const Tensor& x) { return kernels::gelu(x, GeluApprox::tanh); };
    const Unary gelu_tanh_ad = [](const Tensor& x) { return ember::gelu(x, GeluApprox::tanh); };
    const Unary gelu = [](const Tensor& x) { return kernels::gelu(x); };
    const Unary gelu_ad = [](const Tensor& x) { return ember::gelu(x); };
    std::vector<OpEntry> t = {
        // name, op, raw, differentiable, domain, FLOPs per element[, keeps integer dtypes]
        unary("neg", UnaryOp::neg, kernels::neg, ember::neg, wide, 1, true),
        unary("abs", UnaryOp::abs, kernels::abs, ember::abs, kink, 1, true),
        unary("relu", UnaryOp::relu, kernels::relu, ember::relu, kink, 1, true),
        unary("exp", UnaryOp::exp, kernels::exp, ember::exp, wide, 1),
        unary("log", UnaryOp::log, kernels::log, ember::log, positive, 1),
        unary("sqrt", UnaryOp::sqrt, kernels::sqrt, ember::sqrt, positive, 1),
        unary("rsqrt", UnaryOp::rsqrt, kernels::rsqrt, ember::rsqrt, positive, 2),
        unary("sigmoid", UnaryOp::sigmoid, kernels::sigmoid, ember::sigmoid, tails, 3),
        unary("tanh", UnaryOp::tanh, kernels::tanh, ember::tanh, tails, 1),
        unary("gelu", UnaryOp::gelu, gelu, gelu_ad, tails, 5),
        unary("gelu_tanh", UnaryOp::gelu_tanh, gelu_tanh, gelu_tanh_ad, tails, 9),
        unary("silu", UnaryOp::silu, kernels::silu, ember::silu, tails, 4),
        // name, op, raw, differentiable, domains of a and b
        binary("add", BinaryOp::add, {kernels::add, kernels::add}, {ember::add, ember::add}, {any}),
        binary("sub", BinaryOp::sub, {kernels::sub, kernels::sub}, {ember::sub, ember::sub}, {any}),
        binary("mul", BinaryOp::mul, {kernels::mul, kernels::mul}, {ember::mul, ember::mul}, {any}),
        binary("div", BinaryOp::div, {kernels::div, kernels::div}, {ember::div, ember::div},
               {any, divisor}),
        binary("maximum", BinaryOp::maximum, {kernels::maximum, kernels::maximum},
               {ember::maximum, ember::maximum}, {any}),
        binary("minimum", BinaryOp::minimum, {kernels::minimum, kernels::minimum},
               {ember::minimum, ember::minimum}, {any}),
        // Positive bases; integers: exact powers with exponents 0..5.
        binary("pow", BinaryOp::pow, {kernels::pow, kernels::pow}, {ember::pow, ember::pow},
               {{.lo = 0.25, .hi = 2, .int_lo = -3, .int_hi = 4}, {.int_lo = 0, .int_hi = 6}},
               {2, 3, -1.5, 0.5, 1, 0}),
        compare("eq", CompareOp::eq, {kernels::eq, kernels::eq}),
        compare("ne", CompareOp::ne, {kernels::ne, kernels::ne}),
        compare("lt", CompareOp::lt, {kernels::lt, kernels::lt}),
        compare("le", CompareOp::le, {kernels::le, kernels::le}),
        compare("gt", CompareOp::gt, {kernels::gt, kernels::gt}),
        compare("ge", CompareOp::ge, {kernels::ge, kernels::ge}),
        where_entry(),
        clamp_entry(),
        // name, op, raw, range of the saved tensor (both tails), FLOPs per element
        activation_backward("relu_backward", BinaryOp::relu_backward, kernels::relu_backward, 4, 1),
        activation_backward("sigmoid_backward", BinaryOp::sigmoid_backward,
                            kernels::sigmoid_backward, 4, 3),
        activation_backward("tanh_backward", BinaryOp::tanh_backward, kernels::tanh_backward, 4, 3),
        activation_backward("silu_backward", BinaryOp::silu_backward, kernels::silu_backward, 6, 7),
        activation_backward(
            "gelu_backward", BinaryOp::gelu_backward,
            [](const Tensor& g, const Tensor& x) { return kernels::gelu_backward(g, x); }, 6, 8),
        activation_backward(
            "gelu_tanh_backward", BinaryOp::gelu_tanh_backward,
            [](const Tensor& g, const Tensor& x) {
                return kernels::gelu_backward(g, x, GeluApprox::tanh);
            },
            6, 14),
    };
    return t;
}

}  // namespace ember::test

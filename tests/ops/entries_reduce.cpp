// The reduction and softmax entries of the op table: sum, mean, norm, var,
// std, amax, amin over sets of dims, the values of max and min along a dim,
// and softmax, log_softmax and their backwards along one dim. All have CUDA
// kernels (kernels/cuda/reduce.cu, softmax.cu), compared with the CPU's on
// their cuda_cases by tests/cuda/test_cuda_ops.cpp.
#include <cmath>

#include "autograd/ops/reduce.h"
#include "kernels/reduce.h"
#include "kernels/softmax.h"
#include "ops/op_table.h"
#include "ops/reference.h"

namespace ember::test {

namespace {

const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::f16, DType::bf16};
const std::vector<DType> kAll = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                 DType::i32, DType::i64, DType::u8,  DType::boolean};

std::vector<Signature> each(const std::vector<DType>& dtypes, size_t inputs = 1) {
    std::vector<Signature> out;
    for (DType t : dtypes) out.push_back(Signature(inputs, t));
    return out;
}

// Size-0 and size-1 dims, 0-d, all dims, non-consecutive and negative dim
// sets, and tensors big enough for the threaded paths (rows, few long rows cut
// into chunks, column strips, column strips cut into row chunks, permuted copy).
// clang-format off
const std::vector<std::pair<Shape, Shape>> kReduceCases = {
    {{}, {}},           {{}, {0}},           {{}, {-1}},           {{7}, {}},
    {{7}, {0}},         {{1}, {0}},          {{0}, {0}},           {{3, 0}, {1}},
    {{3, 0}, {0}},      {{4, 5}, {0}},       {{4, 5}, {1}},        {{4, 5}, {-1}},
    {{4, 5}, {0, 1}},   {{5, 1, 4}, {1}},    {{5, 1, 4}, {0, 2}},  {{3, 4, 5}, {1}},
    {{3, 4, 5}, {2, 0}}, {{3, 4, 5}, {-1, -2}}, {{2, 3, 4, 5}, {0, 2}}, {{2, 3, 4, 5}, {1, 3}},
    {{2, 3, 4, 5}, {3, 1, 0}}, {{6, 1, 7}, {0, 1}}, {{300, 257}, {1}}, {{300, 257}, {0}},
    {{2, 70000}, {1}},  {{150000}, {}},      {{3000, 3, 7}, {1}},  {{1, 1100, 520}, {1}},
    {{40, 30, 50}, {0, 2}}, {{40, 2500}, {0}},
};
// gradcheck: a 3-d input over one, a negative, several (unordered), all
// listed and all dims; a 0-d input over {}, {0} and {-1}.
const std::vector<std::pair<Shape, Shape>> kGradCases = {
    {{2, 3, 4}, {1}},    {{2, 3, 4}, {-1}}, {{2, 3, 4}, {0, 2}}, {{2, 3, 4}, {2, 0}},
    {{2, 3, 4}, {0, 1, 2}}, {{2, 3, 4}, {}}, {{}, {}},  {{}, {0}},  {{}, {-1}}};
// softmax: a shape and a dim.
const std::vector<std::pair<Shape, int64_t>> kSoftmaxCases = {
    {{}, 0},           {{}, -1},           {{1}, 0},         {{7}, 0},          {{7}, -1},
    {{4, 5}, 0},       {{4, 5}, 1},        {{4, 5}, -1},     {{5, 1}, 1},       {{3, 4, 5}, 1},
    {{2, 3, 4, 5}, 2}, {{2, 3, 4, 5}, -4}, {{0, 5}, 1},      {{3, 0}, 1},       {{300, 257}, 1},
    {{300, 257}, 0},   {{70, 600}, 0},     {{4, 20000}, -1}, {{3, 700, 20}, 1},
};
// CUDA against the CPU: an inner dim (warps over rows), an outer dim and a
// middle dim (threads over columns), all dims, a short row, a size-1 dim, long
// rows and columns cut into chunks, and dims needing a permuted copy.
const std::vector<std::pair<Shape, Shape>> kCudaCases = {
    {{33, 65}, {1}},     {{33, 65}, {0}},     {{4, 5, 6}, {}},       {{7}, {0}},
    {{6, 1}, {1}},       {{5, 300, 7}, {1}},  {{3, 70001}, {1}},     {{1, 150001}, {}},
    {{20001, 3}, {0}},   {{2, 3, 4, 5}, {0, 2}}, {{1000, 9}, {1}},
};
// clang-format on

// Each case with keepdim off and on, for each value of `vary` set by `set`.
template <class Set>
std::vector<Case> reduce_cases(const std::vector<std::pair<Shape, Shape>>& table,
                               const std::vector<double>& vary, Set set) {
    std::vector<Case> out;
    for (const auto& [shape, dims] : table)
        for (bool keepdim : {false, true})
            for (double v : vary) {
                Case c{{shape}, {.dims = dims, .keepdim = keepdim}};
                set(c.args, v);
                out.push_back(c);
            }
    return out;
}
const auto kNoVariant = [](Args&, double) {};

// kCudaCases (keepdim off) for each value of `vary` set by `set`.
template <class Set>
std::vector<Case> cuda_cases(const std::vector<double>& vary, Set set) {
    std::vector<Case> out;
    for (const auto& [shape, dims] : kCudaCases)
        for (double v : vary) {
            Case c{{shape}, {.dims = dims}};
            set(c.args, v);
            out.push_back(c);
        }
    return out;
}

int64_t side(bool quick) { return quick ? 1024 : 4096; }

std::function<double(const Sample&, const Outputs&)> per_input(double flops) {
    return [flops](const Sample& s, const Outputs&) { return flops * double(s.inputs[0].numel()); };
}

// What the reference computes (max and min along a dim are amax and amin of one dim).
enum class Kind { sum, mean, norm, var, std, amax, amin };

OpEntry reduction(const char* name, Kind kind, std::vector<DType> dtypes, Domain d, double flops) {
    OpEntry e;
    e.name = name;
    e.family = Family::reduce;
    e.dtypes = each(dtypes);
    e.domains = {d};
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::strided, Layout::reversed};
    e.reference = [kind, name = std::string(name)](const Sample& s) {
        const Tensor& x = s.inputs[0];
        const ref::Groups g = ref::groups(x.shape(), s.args.dims, s.args.keepdim);
        const std::vector<double> v = values(x);
        Expected want{g.out_shape, x.dtype()};
        ExpectedOutput& out = want.outputs[0];
        switch (kind) {
            case Kind::sum:  // integers and bool sum in i64
                if (!is_floating(x.dtype())) out.dtype = DType::i64;
                out.values = ref::sum(v, g);
                break;
            case Kind::mean:
                out.values = ref::mean(v, g);
                break;
            case Kind::norm:
                out.values = ref::norm(v, g, s.args.p);
                break;
            case Kind::var:
                out.values = ref::var(v, g, s.args.correction);
                break;
            case Kind::std:
                out.values = ref::var(v, g, s.args.correction);
                for (double& w : out.values) w = std::sqrt(w);
                break;
            case Kind::amax:
            case Kind::amin:
                if (g.size == 0 && g.outputs > 0)
                    want.error = name + ": cannot reduce over";
                else
                    out.values = ref::extreme(v, g, kind == Kind::amax);
                break;
        }
        return want;
    };
    e.tolerance = [kind](DType t, const Sample& s) -> Tolerance {
        const double rtol = rtol_for(t);
        // Sums of random signs cancel: an absolute term the size of a random walk's.
        const int64_t size = ref::group_size(s.inputs[0].shape(), s.args.dims);
        const double n = double(std::max<int64_t>(size, 1)), walk = rtol * std::sqrt(n);
        switch (kind) {
            case Kind::sum:
                return {rtol, walk};
            case Kind::mean:
                return {rtol, walk / n};
            case Kind::norm:
                return {rtol, 1e-6};
            case Kind::var:
            case Kind::std:
                return {rtol, rtol};
            default:
                return {0, 0};  // amax, amin: one of the inputs
        }
    };
    e.bench_cases = [](bool quick) {
        return std::vector<Case>{{{{side(quick), side(quick)}}, {.dims = {1}}}};
    };
    e.flops = per_input(flops);
    // Sums, means and extremes add in the CPU's order (Note [Reduction order] in
    // kernels/cuda/reduce_plan.h): bit for bit. Norms and variances may differ by
    // FMA contraction of their squares.
    e.cuda = true;
    e.cuda_exact =
        kind == Kind::sum || kind == Kind::mean || kind == Kind::amax || kind == Kind::amin;
    return e;
}

using Reduce = Tensor (*)(const Tensor&, const Shape&, bool);
using Moment = Tensor (*)(const Tensor&, const Shape&, double, bool);
using Norm = Tensor (*)(const Tensor&, double, const Shape&, bool);

OpEntry simple(const char* name, Kind kind, Reduce raw, Reduce diff, std::vector<DType> dtypes,
               double flops) {
    OpEntry e = reduction(name, kind, std::move(dtypes), {.int_lo = -1000, .int_hi = 1000}, flops);
    e.raw = [raw](const std::vector<Tensor>& x, const Args& a) {
        return raw(x[0], a.dims, a.keepdim);
    };
    e.differentiable = [diff](const std::vector<Tensor>& x, const Args& a) {
        return diff(x[0], a.dims, a.keepdim);
    };
    e.cases = reduce_cases(kReduceCases, {0}, kNoVariant);
    e.grad_cases = reduce_cases(kGradCases, {0}, kNoVariant);
    e.cuda_cases = cuda_cases({0}, kNoVariant);
    if (kind == Kind::sum)  // rows, columns and everything
        e.bench_cases = [](bool quick) {
            const int64_t n = side(quick);
            return std::vector<Case>{
                {{{n, n}}, {.dims = {1}}}, {{{n, n}}, {.dims = {0}}}, {{{n * n}}}};
        };
    return e;
}

OpEntry moment(const char* name, Kind kind, Moment raw, Moment diff,
               const std::vector<double>& corrections) {
    OpEntry e = reduction(name, kind, kFloats, {}, 4);
    e.raw = [raw](const std::vector<Tensor>& x, const Args& a) {
        return raw(x[0], a.dims, a.correction, a.keepdim);
    };
    e.differentiable = [diff](const std::vector<Tensor>& x, const Args& a) {
        return diff(x[0], a.dims, a.correction, a.keepdim);
    };
    const auto set = [](Args& a, double c) { a.correction = c; };
    e.cases = reduce_cases(kReduceCases, corrections, set);
    e.cuda_cases = cuda_cases({0, 1}, set);
    // The 0-d input only with correction 0: its variance is 0 (one element).
    e.grad_cases = reduce_cases({kGradCases.begin(), kGradCases.end() - 3}, {0, 1}, set);
    if (kind == Kind::var)
        e.grad_cases.push_back({{{}}, {.dims = {0}, .keepdim = true, .correction = 0}});
    return e;
}

OpEntry norm_entry() {
    // |x| >= 0.2 with both signs: p = 1 has a kink at 0, and the sign of the
    // largest element matters for p = inf.
    OpEntry e =
        reduction("norm", Kind::norm, kFloats, {.lo = 0.2, .hi = 2, .random_sign = true}, 2);
    e.raw = [](const std::vector<Tensor>& x, const Args& a) {
        return kernels::norm(x[0], a.p, a.dims, a.keepdim);
    };
    e.differentiable = [](const std::vector<Tensor>& x, const Args& a) {
        return ember::norm(x[0], a.p, a.dims, a.keepdim);
    };
    const auto set = [](Args& a, double p) { a.p = p; };
    e.cases = reduce_cases(kReduceCases, {1, 2, INFINITY}, set);
    e.cuda_cases = cuda_cases({1, 2, INFINITY}, set);
    e.grad_cases = reduce_cases(kGradCases, {1, 2, INFINITY}, set);
    return e;
}

// max / min along one dim: the values. The indices, with ties and NaN, are
// checked in tests/kernels/test_reduce.cpp.
OpEntry along_dim(const char* name, bool is_max) {
    OpEntry e = reduction(
        name, is_max ? Kind::amax : Kind::amin,
        {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8},
        {.int_lo = -1000, .int_hi = 1000}, 1);
    e.raw = [is_max](const std::vector<Tensor>& x, const Args& a) {
        const int64_t dim = a.dims.at(0);
        return (is_max ? kernels::max(x[0], dim, a.keepdim) : kernels::min(x[0], dim, a.keepdim))
            .values;
    };
    e.differentiable = [is_max](const std::vector<Tensor>& x, const Args& a) {
        const int64_t dim = a.dims.at(0);
        return (is_max ? ember::max(x[0], dim, a.keepdim) : ember::min(x[0], dim, a.keepdim))
            .values;
    };
    std::vector<std::pair<Shape, Shape>> one_dim;
    for (const auto& c : kReduceCases)
        if (c.second.size() == 1) one_dim.push_back(c);
    e.cases = reduce_cases(one_dim, {0}, kNoVariant);
    for (const auto& [shape, dims] : kCudaCases)
        if (dims.size() == 1) e.cuda_cases.push_back({{shape}, {.dims = dims}});
    e.cuda_exact = true;  // the extremes and their first index: exact
    e.grad_cases = reduce_cases({{{2, 3, 4}, {0}},
                                 {{2, 3, 4}, {1}},
                                 {{2, 3, 4}, {2}},
                                 {{2, 3, 4}, {-1}},
                                 {{}, {0}},
                                 {{}, {-1}}},
                                {0}, kNoVariant);
    return e;
}

// softmax and log_softmax, or (`backward`) their backwards from the output y.
OpEntry softmax(const char* name, bool log, bool backward) {
    OpEntry e;
    e.name = name;
    e.family = Family::softmax;
    e.dtypes = each(kFloats, backward ? 2 : 1);
    // Backwards: g, then y a softmax output (probabilities) or a log_softmax output.
    e.domains =
        backward ? std::vector<Domain>{{.lo = -1, .hi = 1},
                                       log ? Domain{.lo = -4, .hi = 0} : Domain{.lo = 0, .hi = 1}}
                 : std::vector<Domain>{{.lo = -4, .hi = 4}};
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::strided};
    for (const auto& [shape, dim] : kSoftmaxCases)
        e.cases.push_back({std::vector<Shape>(backward ? 2 : 1, shape), {.dims = {dim}}});
    // CUDA (kernels/cuda/softmax.cu): each launch mapping of softmax_plan.h —
    // a warp per row (4, 16 and 32 values per lane), a block per row, a
    // thread per column — with odd sizes, size 1 and 0, and a 0-d input.
    // Not bit for bit: the device's exp differs from the CPU's by a few ulp.
    e.cuda = true;
    for (const auto& [shape, dim] : std::vector<std::pair<Shape, int64_t>>{{{}, 0},
                                                                           {{7}, 0},
                                                                           {{4, 5}, 1},
                                                                           {{4, 5}, 0},
                                                                           {{5, 1}, 1},
                                                                           {{3, 0}, 1},
                                                                           {{33, 129}, 1},
                                                                           {{300, 257}, 1},
                                                                           {{9, 1000}, -1},
                                                                           {{3, 1025}, 1},
                                                                           {{4, 20000}, -1},
                                                                           {{3, 700, 20}, 1},
                                                                           {{2, 3, 4, 5}, 2},
                                                                           {{70, 600}, 0}})
        e.cuda_cases.push_back({std::vector<Shape>(backward ? 2 : 1, shape), {.dims = {dim}}});
    if (backward) {
        e.raw = [log](const std::vector<Tensor>& x, const Args& a) {
            return log ? kernels::log_softmax_backward(x[0], x[1], a.dims[0])
                       : kernels::softmax_backward(x[0], x[1], a.dims[0]);
        };
        e.reference = [log](const Sample& s) {
            const Tensor& g = s.inputs[0];
            return Expected{g.shape(), g.dtype(),
                            ref::softmax_backward(g, s.inputs[1], s.args.dims[0], log)};
        };
        // The sums cancel: an absolute term scaled like the row's gradient.
        e.tolerance = [](DType t, const Sample&) {
            return Tolerance{4 * rtol_for(t), 4 * rtol_for(t)};
        };
    } else {
        e.raw = [log](const std::vector<Tensor>& x, const Args& a) {
            return log ? kernels::log_softmax(x[0], a.dims[0]) : kernels::softmax(x[0], a.dims[0]);
        };
        e.differentiable = [log](const std::vector<Tensor>& x, const Args& a) {
            return log ? ember::log_softmax(x[0], a.dims[0]) : ember::softmax(x[0], a.dims[0]);
        };
        e.reference = [log](const Sample& s) {
            const Tensor& x = s.inputs[0];
            return Expected{x.shape(), x.dtype(), ref::softmax(x, s.args.dims[0], log)};
        };
        e.tolerance = [log](DType t, const Sample&) {
            return Tolerance{rtol_for(t), log ? rtol_for(t) : 1e-7};
        };
        for (const auto& [shape, dim] : std::vector<std::pair<Shape, int64_t>>{
                 {{3, 4, 2}, 0}, {{3, 4, 2}, 1}, {{3, 4, 2}, -1}, {{5}, 0}, {{5}, -1}})
            e.grad_cases.push_back({{shape}, {.dims = {dim}}});
    }
    // Long rows and short rows; the backwards on the long ones.
    e.bench_cases = [backward](bool quick) {
        const Shape big = {side(quick), side(quick)},
                    rows = quick ? Shape{2048, 512} : Shape{32768, 512};
        std::vector<Case> c = {{std::vector<Shape>(backward ? 2 : 1, big), {.dims = {1}}}};
        if (!backward) c.push_back({{rows}, {.dims = {1}}});
        return c;
    };
    // max, subtract, exp, add, divide (or log); backwards: two multiplies, an add, a subtract.
    e.flops = [backward](const Sample& s, const Outputs&) {
        return (backward ? 4.0 : 5.0) * double(s.inputs[0].numel());
    };
    return e;
}

}  // namespace

std::vector<OpEntry> reduce_entries() {
    const std::vector<DType> sums = kAll;  // integers and bool sum into i64
    const std::vector<DType> extremes = kAll;
    return {
        // name, kind, raw, differentiable, dtypes, FLOPs per input element
        simple("sum", Kind::sum, kernels::sum, ember::sum, sums, 1),
        simple("mean", Kind::mean, kernels::mean, ember::mean, kFloats, 1),
        simple("amax", Kind::amax, kernels::amax, ember::amax, extremes, 1),
        simple("amin", Kind::amin, kernels::amin, ember::amin, extremes, 1),
        along_dim("max", true),
        along_dim("min", false),
        norm_entry(),
        // name, kind, raw, differentiable, corrections in the reference test
        moment("var", Kind::var, kernels::var, ember::var, {0, 1}),
        moment("std", Kind::std, kernels::std, ember::std, {1}),
        // name, log, backward
        softmax("softmax", false, false),
        softmax("log_softmax", true, false),
        softmax("softmax_backward", false, true),
        softmax("log_softmax_backward", true, true),
    };
}

}  // namespace ember::test

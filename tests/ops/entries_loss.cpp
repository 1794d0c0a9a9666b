// The loss entries of the op table: the fused cross-entropy's forward (the
// per-sample loss and the lse its backward saves) and backward, against naive
// f64 loops over PyTorch's definition with label smoothing and ignore_index.
// CUDA (kernels/cuda/loss.cu) sums in its own order and takes the forward's
// exp in f32 (f64 for f64 logits): tests/cuda/test_cuda_ops.cpp compares it
// with the CPU within cuda_tolerance, set by the logits' dtype, on the
// cuda_cases.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "autograd/ops/nn_ops.h"
#include "kernels/loss.h"
#include "ops/op_table.h"

namespace ember::test {

namespace {

const std::vector<DType> kFloats = {DType::f32, DType::f64, DType::f16, DType::bf16};

// The Args of a case: label_smoothing and ignore_index; its one shape is the
// logits' [N, C] (generate makes the rest). With ignore_index other than the
// default -100, every fifth row from row 2 has target ignore_index; an
// in-range ignore_index also ignores the rows that drew it. draw.bad puts
// that (bad) target at row 2.
std::vector<int64_t> targets(int64_t n, int64_t c, const Args& a, uint64_t seed) {
    std::vector<int64_t> t =
        random_input({n}, DType::i64, {.int_lo = 0, .int_hi = double(std::max<int64_t>(c, 1))},
                     seed)
            .to_vector<int64_t>();
    if (a.ignore_index != Args{}.ignore_index)
        for (int64_t i = 2; i < n; i += 5) t[size_t(i)] = a.ignore_index;
    if (a.draw.bad && n > 2) t[2] = *a.draw.bad;
    return t;
}

// Logits uniform in [-4, 4) and the targets.
std::vector<Tensor> forward_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    const Shape& s = c.shapes[0];
    return {random_input(s, sig[0], {.lo = -4, .hi = 4}, seed * 31),
            from_vector(targets(s[0], s[1], c.args, seed * 31 + 1), {s[0]})};
}

// grad_loss in [-1, 1), logits, the forward's lse (from in-range targets: lse
// does not depend on them) and the targets.
std::vector<Tensor> backward_inputs(const Case& c, const Signature& sig, uint64_t seed) {
    Case clean = c;
    clean.args.draw.bad.reset();
    const std::vector<Tensor> in = forward_inputs(clean, {sig[1]}, seed);
    const Tensor lse = kernels::cross_entropy_forward(in[0], in[1], 0, c.args.ignore_index).lse;
    const int64_t n = c.shapes[0][0];
    return {random_input({n}, sig[0], {.lo = -1, .hi = 1}, seed * 31 + 2), in[0], lse,
            from_vector(targets(n, c.shapes[0][1], c.args, seed * 31 + 1), {n})};
}

// ---- The f64 reference ----

// The error the front throws for these logits, targets and smoothing, if any.
std::string error_of(const char* op, const Tensor& logits, const std::vector<double>& t,
                     const Args& a) {
    std::ostringstream os;
    const int64_t C = logits.size(1);
    if (C < 1) {
        os << "have no classes";  // after the logits' description
    } else if (!(a.label_smoothing >= 0 && a.label_smoothing <= 1)) {
        os << op << ": label_smoothing must be in [0, 1], got " << a.label_smoothing;
    } else {
        for (size_t i = 0; i < t.size(); ++i)
            if (t[i] != double(a.ignore_index) && (t[i] < 0 || t[i] >= double(C))) {
                os << op << ": target " << int64_t(t[i]) << " at row " << i
                   << " is out of range for " << C << " classes (ignore_index " << a.ignore_index
                   << ")";
                break;
            }
    }
    return os.str();
}

Expected failure(const std::string& error) {
    Expected e;
    e.error = error;
    return e;
}

// loss_i = lse_i − (1 − ε)·x[i, t_i] − (ε / C)·Σ_c x[i, c], 0 where t_i is
// ignore_index, with lse_i = m + log Σ_c exp(x[i, c] − m).
Expected forward_ref(const Sample& s) {
    const Tensor& x = s.inputs[0];
    const std::vector<double> v = values(x), t = values(s.inputs[1]);
    const std::string error = error_of("cross_entropy_forward", x, t, s.args);
    if (!error.empty()) return failure(error);
    const int64_t n = x.size(0), C = x.size(1);
    const double eps = s.args.label_smoothing;
    std::vector<double> loss, lse;
    for (int64_t i = 0; i < n; ++i) {
        const double* row = v.data() + i * C;
        const double m = *std::max_element(row, row + C);
        double sum = 0, sum_x = 0;
        for (int64_t c = 0; c < C; ++c) sum += std::exp(row[c] - m), sum_x += row[c];
        lse.push_back(m + std::log(sum));
        loss.push_back(t[size_t(i)] == double(s.args.ignore_index)
                           ? 0.0
                           : lse.back() - (1 - eps) * row[int64_t(t[size_t(i)])] -
                                 eps / double(C) * sum_x);
    }
    const DType acc = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
    return Expected(std::vector<ExpectedOutput>{{{n}, acc, loss}, {{n}, DType::f64, lse}});
}

// grad[i, c] = g_i·(exp(x[i, c] − lse_i) − (1 − ε)·[c == t_i] − ε / C), zero
// rows where t_i is ignore_index; lse is the input's.
Expected backward_ref(const Sample& s) {
    const Tensor& x = s.inputs[1];
    const std::vector<double> g = values(s.inputs[0]), v = values(x), lse = values(s.inputs[2]),
                              t = values(s.inputs[3]);
    const std::string error = error_of("cross_entropy_backward", x, t, s.args);
    if (!error.empty()) return failure(error);
    const int64_t n = x.size(0), C = x.size(1);
    const double eps = s.args.label_smoothing;
    std::vector<double> out(size_t(n * C), 0.0);
    for (int64_t i = 0; i < n; ++i) {
        if (t[size_t(i)] == double(s.args.ignore_index)) continue;
        for (int64_t c = 0; c < C; ++c)
            out[size_t(i * C + c)] =
                g[size_t(i)] * (std::exp(v[size_t(i * C + c)] - lse[size_t(i)]) -
                                (1 - eps) * double(c == int64_t(t[size_t(i)])) - eps / double(C));
    }
    return Expected{x.shape(), x.dtype(), out};
}

// ---- Cases ----

// Rows of C classes: none, one class, a warp per row with 4, 16 and 32 values
// per lane and a block per row on a GPU (kernels/cuda/softmax_plan.h).
const std::vector<Shape> kShapes = {{0, 5},    {1, 1},     {7, 3},   {33, 129},
                                    {300, 10}, {16, 1000}, {5, 1025}};
// The same for CUDA, with block-per-row lengths of 256, 512 and 1024 threads.
const std::vector<Shape> kCudaShapes = {{0, 5},     {1, 1},    {7, 3},    {33, 129}, {300, 10},
                                        {16, 1000}, {5, 1025}, {4, 6000}, {3, 50000}};

std::vector<Case> cases(const std::vector<Shape>& shapes, const std::vector<double>& smoothing,
                        const std::vector<int64_t>& ignore) {
    std::vector<Case> out;
    for (const Shape& s : shapes)
        for (double eps : smoothing)
            for (int64_t i : ignore)
                out.push_back({{s}, {.label_smoothing = eps, .ignore_index = i}});
    return out;
}

// Errors: a target past the classes or negative (row 2), a smoothing above 1.
const std::vector<Case> kBad = {
    {{{4, 5}}, {.draw = {.bad = 5}}},
    {{{6, 5}}, {.ignore_index = 3, .draw = {.bad = -1}}},
    {{{4, 5}}, {.label_smoothing = 1.5}},
};

OpEntry loss_entry(const char* name, bool backward) {
    OpEntry e;
    e.name = name;
    e.family = Family::loss;
    e.generate = backward ? backward_inputs : forward_inputs;
    e.layouts = {Layout::contiguous, Layout::transposed, Layout::strided};
    e.cases = cases(kShapes, {0, 0.1, 1}, {-100, 2, -1});
    e.cases.insert(e.cases.end(), kBad.begin(), kBad.end());
    // CUDA against the CPU; logits and targets copied to contiguous first
    // (transposed: the copy), smoothing 0.05 on a 300-class block.
    e.cuda = true;
    // ignore_index -1 plants ignored rows (as the default -100 does not):
    // every launch mapping skips rows.
    e.cuda_cases = cases(kCudaShapes, {0, 0.1}, {-100, 2, -1});
    e.cuda_cases.push_back({{{40, 300}}, {.label_smoothing = 0.05}});
    // bench/nn.cpp's 1000-class rows, label smoothing 0.1, no target ignored.
    e.bench_cases = [](bool quick) {
        return std::vector<Case>{{{{quick ? 512 : 8192, 1000}}, {.label_smoothing = 0.1}}};
    };
    e.bench_label = [backward](const Case&) {
        return std::string(backward ? "cross_entropy bwd" : "cross_entropy fwd");
    };
    // The logits read (and the gradient written): the [N] vectors are noise.
    e.bytes = [backward](const Sample& s, const Outputs&) {
        const Tensor& x = s.inputs[backward ? 1 : 0];
        return double((backward ? 2 : 1) * x.numel() * x.element_size());
    };
    // Per logit: max, subtract, exp, two adds (forward); subtract, exp,
    // subtract, multiply (backward).
    e.flops = [backward](const Sample& s, const Outputs&) {
        return (backward ? 4.0 : 5.0) * double(s.inputs[backward ? 1 : 0].numel());
    };
    return e;
}

OpEntry forward_entry() {
    OpEntry e = loss_entry("cross_entropy_forward", false);
    for (DType t : kFloats) e.dtypes.push_back({t, DType::i64});
    e.cases.push_back({{{2, 0}}});  // no classes
    e.raw = [](const std::vector<Tensor>& x, const Args& a) -> Outputs {
        const kernels::CrossEntropyForward f =
            kernels::cross_entropy_forward(x[0], x[1], a.label_smoothing, a.ignore_index);
        return {f.loss, f.lse};
    };
    // Reduction none returns the forward's per-sample loss.
    e.differentiable = [](const std::vector<Tensor>& x, const Args& a) {
        return ember::cross_entropy(x[0], x[1],
                                    {a.label_smoothing, Reduction::none, a.ignore_index});
    };
    e.grad_cases = cases({{4, 5}, {6, 3}}, {0, 0.1}, {-100, 2});
    e.grad_cases.push_back({{{1, 1}}});
    e.reference = forward_ref;
    // The exps of f32, f16 and bf16 logits are taken in f32 (a few ulp each),
    // summed in f64: lse and the loss (rounded once) are good to ~2e-7
    // absolute, and the loss cancels when one logit dominates. f64: the sums of
    // a row in f64.
    e.tolerance = [](DType t, const Sample& s) {
        if (s.inputs[0].dtype() == DType::f64) return Tolerance{1e-12, 1e-12};
        return Tolerance{t == DType::f64 ? 1e-6 : rtol_for(t), 1e-6};
    };
    // By the logits' dtype, for both outputs: the loss and lse of f32, f16 and
    // bf16 logits (from f32 exps on both backends, summed in different orders;
    // lse is f64 but carries f32 precision) agree to 2e-6, those of f64 logits
    // (f64 exps and sums) to 1e-12.
    e.cuda_tolerance = [](DType, const Sample& s, size_t) {
        return s.inputs[0].dtype() == DType::f64 ? 1e-12 : 2e-6;
    };
    return e;
}

OpEntry backward_entry() {
    OpEntry e = loss_entry("cross_entropy_backward", true);
    // grad_loss in the accumulation dtype, or f16 (cast to f32 by the front).
    for (DType t : kFloats)
        e.dtypes.push_back({t == DType::f64 ? DType::f64 : DType::f32, t, DType::f64, DType::i64});
    e.dtypes.push_back({DType::f16, DType::f32, DType::f64, DType::i64});
    e.raw = [](const std::vector<Tensor>& x, const Args& a) {
        return kernels::cross_entropy_backward(x[0], x[1], x[2], x[3], a.label_smoothing,
                                               a.ignore_index);
    };
    e.reference = backward_ref;
    // exp(x − lse) in f64 rounded to f32, less the one-hot in f32 (cancelling
    // to ~1e-7 absolute near 1), times |g| <= 1, rounded to the logits' dtype.
    e.tolerance = [](DType t, const Sample&) {
        return t == DType::f64 ? Tolerance{1e-12, 1e-14} : Tolerance{rtol_for(t), 1e-6};
    };
    // Both backends take exp in f64 and the rest in the same order: a tenth
    // of the result dtype's rtol_for (an ulp of the f64 exp, seldom visible).
    e.cuda_tolerance = [](DType t, const Sample&, size_t) {
        return t == DType::f64 ? 1e-13 : t == DType::f32 ? 2e-7 : rtol_for(t) / 10;
    };
    return e;
}

}  // namespace

std::vector<OpEntry> loss_entries() { return {forward_entry(), backward_entry()}; }

}  // namespace ember::test

// The op table: each op once — its raw (kernels::) and differentiable
// (ember::) calls, the shapes, dtypes and value ranges of its inputs, an f64
// reference, tolerances, bytes and FLOPs — driving the reference test
// (tests/ops/test_op_reference.cpp), gradcheck (test_op_gradcheck.cpp), CUDA
// against CPU (tests/cuda/test_cuda_ops.cpp) and the benchmark rows
// (bench/ops.cpp). No Catch2 here: the benchmarks link it too.
// docs/adding-an-op.md, "The op table", says how to add an entry.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/oracle.h"

namespace ember::test {

/// What kind of op an entry is: sets its shape tables and its bench family.
enum class Family { unary, binary, compare, where, clamp, activation_backward, reduce, softmax };
const char* family_name(Family f);

/// Non-tensor arguments of one call; each op reads the ones it takes.
struct Args {
    std::optional<double> scalar;  // binary and compare: the scalar form op(a, s)
    Shape dims;                    // reductions: dims to reduce ({} = all); softmax: {dim}
    bool keepdim = false;
    double p = 2;                  // norm
    double correction = 1;         // var, std
    std::optional<double> lo, hi;  // clamp
};

/// One call: a shape per tensor input, and the other arguments.
struct Case {
    std::vector<Shape> shapes;
    Args args = {};
};

/// The dtype of each tensor input of one call (a scalar form op(a, s) takes
/// the first).
using Signature = std::vector<DType>;

/// Where an input's random values come from.
struct Domain {
    double lo = -2, hi = 2;            // floating inputs: uniform in [lo, hi)
    double int_lo = -50, int_hi = 50;  // integer inputs (u8 from 0); bool: a coin flip
    bool random_sign = false;          // floats: |x| in [lo, hi) with either sign (a kink at 0)
    bool ties = false;                 // integers in [lo, hi) in every dtype: equal values common
};

/// Memory layouts the reference test runs each case in (tests/ops/oracle.h).
enum class Layout {
    contiguous,
    transposed,  // non_contiguous(): last two dims transposed in memory, or a step-2 slice
    strided,     // every other row of a larger buffer whose gaps hold 7s
    reversed,    // dense, memory order of the dims reversed (3 or more dims)
};

/// One call ready to run: its inputs in one layout and its arguments.
struct Sample {
    std::string label;  // "f32 [3, 1, 5], f32 [4, 5] transposed", for messages
    std::vector<Tensor> inputs;
    Args args;
    size_t case_index = 0;  // into OpEntry::cases: the layouts of one case hold the same values
    Layout layout = Layout::contiguous;
};

/// What the reference says a call returns, or the error it must throw.
struct Expected {
    Shape shape;
    DType dtype = DType::f32;
    std::vector<double> values;  // row-major, before rounding to dtype
    std::string error;           // non-empty: the call throws an ember::Error containing this
};

struct Tolerance {
    double rtol = 0, atol = 0;
};

using OpFn = std::function<Tensor(const std::vector<Tensor>&, const Args&)>;

/// One op. Entries come from the family helpers in ops/entries_*.cpp, which
/// fill the shape tables, layouts, bench shapes and default tolerances.
struct OpEntry {
    std::string name;  // as in kernels:: and ember::
    Family family;
    OpFn raw;             // the front function (kernels::...)
    OpFn differentiable;  // ember::..., checked by gradcheck; empty when there is none
    std::vector<Signature> dtypes;
    std::vector<Domain> domains;  // one per tensor input
    std::vector<Case> cases;      // the reference test's shapes
    std::vector<Layout> layouts;  // the reference test's layouts
    std::function<Expected(const Sample&)> reference;
    std::function<Tolerance(DType result, const Sample&)> tolerance;
    std::vector<Case> grad_cases;  // gradcheck (f64), contiguous and transposed
    bool cuda = false;             // has a CUDA kernel: compared with the CPU's
    bool cuda_exact = false;       // ... bit for bit (no device math library calls)
    std::vector<Case> cuda_cases;
    std::function<std::vector<Case>(bool quick)> bench_cases;  // f32, one bench row each
    /// Floating-point operations of one call; a transcendental function
    /// (exp, log, tanh, erf, pow, sqrt) counts as one.
    std::function<double(const Sample&, const Tensor& out)> flops;
};

/// Every op, in family order.
const std::vector<OpEntry>& op_table();
/// The entries of one family.
std::vector<const OpEntry*> entries(Family f);

/// Seeded random inputs for one case in `sig` (contiguous, on the CPU).
std::vector<Tensor> make_inputs(const OpEntry& e, const Case& c, const Signature& sig,
                                uint64_t seed);
/// Every case of `e` in every layout of `e`, for one signature. A layout that
/// changes no input is skipped, and so is any but contiguous for keepdim
/// (keepdim only reshapes the result).
std::vector<Sample> samples(const OpEntry& e, const Signature& sig, uint64_t seed);
/// `inputs` in `layout`, or nothing when the layout changes none of them.
std::optional<std::vector<Tensor>> in_layout(const std::vector<Tensor>& inputs, Layout layout);
/// "f32 [3, 1, 5], f32 [4, 5], s = 2.5", for messages and bench rows.
std::string describe_case(const std::vector<Tensor>& inputs, const Args& args);

/// Bytes one call moves: every input read once and the output written once.
double bytes_moved(const Sample& s, const Tensor& out);

/// The expected values rounded to the result dtype (integers must be exact).
std::vector<double> rounded(const Expected& e);

}  // namespace ember::test

// The op table: each op once — its raw (kernels::) and differentiable
// (ember::) calls, the shapes, dtypes and value ranges of its inputs, an f64
// reference of every output, tolerances, bytes and FLOPs — driving the reference test
// (tests/ops/test_op_reference.cpp), gradcheck (test_op_gradcheck.cpp), CUDA
// against CPU (tests/cuda/test_cuda_ops.cpp) and the benchmark rows
// (bench/ops.cpp). No Catch2 here: the benchmarks link it too.
// docs/adding-an-op.md, "The op table", says how to add an entry.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "kernels/op_types.h"
#include "ops/oracle.h"

namespace ember::test {

/// What kind of op an entry is: sets its shape tables and its bench family.
enum class Family {
    unary,
    binary,
    compare,
    where,
    clamp,
    activation_backward,
    reduce,
    softmax,
    // The multi-input, multi-output families (ops/entries_<family>.cpp).
    norm,
    conv,
    pool,
    matmul,
    loss,
    index,
};
const char* family_name(Family f);

/// How an entry's generate draws a case's inputs where it has more than one
/// way; the family file says what each means for its ops.
struct Draw {
    bool ties = false;            // values with many ties (pool: and NaN, −inf)
    bool any_index = false;       // indices anywhere in range, not a forward's picks
    bool expanded_index = false;  // the index read with stride 0 along its dim 0
    std::optional<double> range;  // floats uniform in [−range, range)
    std::optional<int64_t> bad;   // an invalid value planted (a target, an index)
    bool operator==(const Draw&) const = default;
};

/// Non-tensor arguments of one call; each op reads the ones it takes.
struct Args {
    std::optional<double> scalar;  // binary and compare: the scalar form op(a, s)
    Shape dims;                    // reductions: dims to reduce ({} = all); softmax: {dim}
    bool keepdim = false;
    double p = 2;                  // norm (the vector norm)
    double correction = 1;         // var, std
    std::optional<double> lo, hi;  // clamp
    // conv and pool (pool's stride {0, 0}: the kernel's)
    Int2 window = {0, 0};  // pool: the kernel; adaptive pool: the output size
    Int2 stride = {1, 1}, padding = {0, 0}, dilation = {1, 1};
    int64_t groups = 1;
    bool ceil_mode = false;
    bool count_include_pad = true;  // avg pool: the divisor counts the padding
    // normalization
    double eps = 1e-5, momentum = 0.1;
    bool affine = true;   // weight and bias given (else neither)
    bool running = true;  // running statistics given (else none)
    // loss
    double label_smoothing = 0;
    int64_t ignore_index = -100;
    // backwards: which gradients to compute (input, weight, bias)
    std::array<bool, 3> need = {true, true, true};
    Draw draw = {};
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
    transposed,     // non_contiguous(): last two dims transposed in memory, or a step-2 slice
    strided,        // every other row of a larger buffer whose gaps hold 7s
    reversed,       // dense, memory order of the dims reversed (3 or more dims)
    channels_last,  // 4-d inputs NHWC in memory (MemoryFormat::channels_last)
};

/// One call ready to run: its inputs in one layout and its arguments.
struct Sample {
    std::string label;  // "f32 [3, 1, 5], f32 [4, 5] transposed", for messages
    std::vector<Tensor> inputs;
    Args args;
    size_t case_index = 0;  // into OpEntry::cases (cuda_cases on CUDA): the layouts of
                            // one case hold the same values
    Layout layout = Layout::contiguous;
};

/// The tensors one call returns, in the order its result struct declares
/// them (a gradient not asked for is left out). A single Tensor converts.
struct Outputs : std::vector<Tensor> {
    Outputs() = default;
    Outputs(Tensor t) { push_back(std::move(t)); }  // NOLINT: one output is the common case
    Outputs(std::initializer_list<Tensor> ts) : std::vector<Tensor>(ts) {}
};

/// What the reference says one output is.
struct ExpectedOutput {
    Shape shape;
    DType dtype = DType::f32;
    std::vector<double> values;  // row-major, before rounding to dtype
};

/// What the reference says a call returns, or the error it must throw.
struct Expected {
    std::vector<ExpectedOutput> outputs;  // one per tensor of Outputs
    std::string error;  // non-empty: the call throws an ember::Error containing this
    Expected() = default;
    /// One output.
    Expected(Shape shape, DType dtype, std::vector<double> values = {})
        : outputs{{std::move(shape), dtype, std::move(values)}} {}
    explicit Expected(std::vector<ExpectedOutput> outs) : outputs(std::move(outs)) {}
};

struct Tolerance {
    double rtol = 0, atol = 0;
};

/// CUDA against the CPU where the device's math library (exp, log, tanh,
/// erf, pow) differs from the host's by a few ulp: the relative and absolute
/// tolerance for a result of dtype t.
double device_library_tolerance(DType t);

using OpFn = std::function<Outputs(const std::vector<Tensor>&, const Args&)>;
/// A differentiable op returns one tensor: the raw call's first output.
using DiffFn = std::function<Tensor(const std::vector<Tensor>&, const Args&)>;

/// One op. Entries come from the family helpers in ops/entries_*.cpp, which
/// fill the shape tables, layouts, bench shapes and default tolerances.
struct OpEntry {
    std::string name;  // as in kernels:: and ember::
    Family family;
    OpFn raw;               // the front function (kernels::...)
    DiffFn differentiable;  // ember::..., checked by gradcheck; empty when there is none
    std::vector<Signature> dtypes;
    std::vector<Domain> domains;  // one per tensor input
    /// Makes a call's inputs where they depend on one another (indices in
    /// range, a backward's saved statistics); empty: each input drawn from its
    /// domain by make_inputs. Contiguous, on the CPU.
    std::function<std::vector<Tensor>(const Case&, const Signature&, uint64_t seed)> generate;
    std::vector<Case> cases;      // the reference test's shapes
    std::vector<Layout> layouts;  // the reference test's layouts
    std::function<Expected(const Sample&)> reference;
    std::function<Tolerance(DType result, const Sample&)> tolerance;
    std::vector<Case> grad_cases;  // gradcheck (f64), contiguous and transposed
    bool cuda = false;             // has a CUDA kernel: compared with the CPU's
    bool cuda_exact = false;       // ... bit for bit (no device math library calls)
    std::vector<Case> cuda_cases;
    std::vector<Layout> cuda_layouts = {Layout::contiguous, Layout::transposed};
    /// CUDA against the CPU when not cuda_exact: the relative and absolute
    /// tolerance for output `output` (an index into Outputs) of dtype `result`
    /// of the call `s` (the CPU inputs in the layout under test, and the
    /// Args), for results whose precision is not their dtype's: an f64 result
    /// computed from f32 values, a statistic beside a value. Default:
    /// device_library_tolerance by result dtype.
    std::function<double(DType result, const Sample& s, size_t output)> cuda_tolerance =
        [](DType result, const Sample&, size_t) { return device_library_tolerance(result); };
    std::function<std::vector<Case>(bool quick)> bench_cases;  // f32, one bench row each
    /// The bench row's label ("batch_norm fwd"); empty: the name and the case's
    /// dims, scalar or softmax dim.
    std::function<std::string(const Case&)> bench_label;
    /// Bytes one call must move; empty: bytes_moved.
    std::function<double(const Sample&, const Outputs& out)> bytes;
    /// Floating-point operations of one call; a transcendental function
    /// (exp, log, tanh, erf, pow, sqrt) counts as one.
    std::function<double(const Sample&, const Outputs& out)> flops;
};

/// Every op, in family order.
const std::vector<OpEntry>& op_table();
/// The entries of one family.
std::vector<const OpEntry*> entries(Family f);

/// Seeded random values of `dtype` from domain `d` (contiguous, on the CPU).
Tensor random_input(const Shape& shape, DType dtype, const Domain& d, uint64_t seed);
/// Seeded random inputs for one case in `sig` (contiguous, on the CPU): the
/// entry's generate, or each input from its domain.
std::vector<Tensor> make_inputs(const OpEntry& e, const Case& c, const Signature& sig,
                                uint64_t seed);
/// Every case of `e` in every layout of `e`, for one signature. A layout that
/// changes no input is skipped, and so is any but contiguous for keepdim
/// (keepdim only reshapes the result).
std::vector<Sample> samples(const OpEntry& e, const Signature& sig, uint64_t seed);
/// " transposed", " channels-last", ...: a label's suffix ("" for contiguous).
const char* layout_name(Layout l);
/// `inputs` in `layout`, or nothing when the layout changes none of them.
std::optional<std::vector<Tensor>> in_layout(const std::vector<Tensor>& inputs, Layout layout);
/// "f32 [3, 1, 5], f32 [4, 5], s = 2.5", for messages and bench rows.
std::string describe_case(const std::vector<Tensor>& inputs, const Args& args);

/// Bytes one call moves: every input read once and every output written once.
double bytes_moved(const Sample& s, const Outputs& out);

/// The expected values rounded to the output's dtype (integers must be exact).
std::vector<double> rounded(const ExpectedOutput& e);

}  // namespace ember::test

// The nn family: the ops a training step runs besides matmul, conv and the
// elementwise, reduce and softmax rows. Batch norm (alone and fused with a
// ReLU or a residual and a ReLU), layer norm, cross-entropy, max, average
// and adaptive pooling, the embedding gather and its index_add backward,
// gather and scatter_add, forward and backward, come from the op table's
// norm, pool, loss and index entries (bench/op_rows.h: their bench cases,
// bytes and labels are in tests/ops/entries_<family>.cpp). Written here: the
// unfused batch norm + ReLU pairs the fused op replaces, and dropout (random:
// no f64 reference). Shapes are a training step's: resnet8's first block
// (batch 128, 16 or 32 channels of 28×28), a 1024-wide transformer row, 1000
// classes, a 32768 × 256 embedding table.
//
// The rows written here are checked before they are timed: on the CPU
// against the same op on f64 inputs (the f32 instantiation against the f64
// one), on a GPU against the CPU's result. Bytes: what the op must move at
// least — each input it reads in full read once, each output written once —
// against the copy bandwidth measured in the same run (docs/benchmarks.md);
// two-pass kernels (batch norm reads x for its statistics and again to apply
// them) cannot reach 100 % of it.
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/op_rows.h"
#include "core/error.h"
#include "core/generator.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/norm.h"
#include "ops/oracle.h"

namespace ember::bench {

namespace {
using Inputs = std::vector<Tensor>;

/// One row: its inputs (made on the CPU in f32; integer inputs stay i64 or
/// u8), the timed call returning the output that is checked, and its bytes.
struct NnRow {
    const char* kernel;
    Inputs inputs;
    std::function<Tensor(const Inputs&)> call;
    double bytes;
    double tol;              // relative and absolute tolerance of the checks
    std::string shape = {};  // the label; empty: the first input's shape
};

Inputs on(Device d, const Inputs& ts, bool to_f64 = false) {
    Inputs out;
    for (const Tensor& t : ts) {
        Tensor u = to_f64 && t.dtype() == DType::f32 ? t.to(DType::f64) : t;
        out.push_back(u.to(d));
    }
    return out;
}

double nbytes(const Tensor& t) { return double(t.numel()) * double(dtype_size(t.dtype())); }

std::vector<NnRow> rows(bool quick) {
    std::vector<NnRow> r;
    Generator gen(2024);
    const auto normal = [&](const Shape& s) { return randn(s, {}, &gen); };
    const int64_t n = quick ? 8 : 128;

    {  // the unfused batch norm + ReLU on resnet8's first block: [N, 16, 28, 28]
        // Beside the fused rows of the op table, with the same bytes (what
        // the result needs at least), so the GB/s compare directly; bwd reads
        // g, y and x and writes dx.
        const Tensor x = normal({n, 16, 28, 28}), w = normal({16}), b = normal({16});
        const Tensor gy = normal(x.shape());
        const auto fr = kernels::batch_norm_relu_forward(x, w, b, {}, {}, 0.1, 1e-5);
        r.push_back(
            {"batch_norm+relu fwd (unfused)",
             {x, w, b},
             [](const Inputs& i) {
                 return kernels::relu(
                     kernels::batch_norm_forward(i[0], i[1], i[2], {}, {}, 0.1, 1e-5).output);
             },
             2 * nbytes(x),
             1e-4});
        const Inputs bwd_in = {gy, fr.output, x, w, fr.save_mean, fr.save_invstd};
        r.push_back({"batch_norm+relu bwd (unfused)", bwd_in,
                     [](const Inputs& i) {
                         return kernels::batch_norm_backward(kernels::relu_backward(i[0], i[1]),
                                                             i[2], i[3], i[4], i[5],
                                                             {true, true, true})
                             .input;
                     },
                     4 * nbytes(x), 1e-4});
    }
    {  // dropout over 16M elements
        const Tensor x = normal({quick ? (int64_t(1) << 18) : (int64_t(1) << 24)});
        const auto fwd = kernels::dropout_forward(x, 0.1, 7, 0);
        r.push_back(
            {"dropout fwd",
             {x},
             [](const Inputs& i) { return kernels::dropout_forward(i[0], 0.1, 7, 0).output; },
             2 * nbytes(x) + nbytes(fwd.mask),
             1e-6});
        r.push_back({"dropout bwd",
                     {x, fwd.mask},
                     [](const Inputs& i) { return kernels::dropout_backward(i[0], i[1], 0.1); },
                     2 * nbytes(x) + nbytes(fwd.mask),
                     1e-6});
    }
    return r;
}

// A wrong result is not worth timing: on the CPU the f32 call against the
// same call on f64 inputs, on a GPU against the CPU's f32 result.
void validate(const NnRow& row, Device d) {
    const Tensor got = row.call(on(d, row.inputs)).to(Device::cpu());
    const Tensor want = d.is_cuda() ? row.call(row.inputs) : row.call(on(d, row.inputs, true));
    const test::CloseReport r = test::close_report(got, test::values(want), row.tol, row.tol);
    EMBER_CHECK(r.ok(), "bench nn: ", row.kernel, " on ", d, " is wrong in ", r.mismatches,
                " elements:\n", r.first);
}

void add_rows(const std::vector<NnRow>& rs, Device d, const Options& o, Report& rep) {
    const bool gpu = d.is_cuda();
    const double limit = gpu ? measure_gpu_copy_gbps(d, o) : measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    for (const NnRow& row : rs) {
        validate(row, d);
        const Inputs in = on(d, row.inputs);
        const auto call = [&] { (void)row.call(in); };
        const Timing ms = gpu ? gpu_median_ms(d, call, o) : median_ms(call, o.warmup, o.repeats);
        const double gbps = row.bytes / (ms * 1e6);
        const std::string shape =
            row.shape.empty() ? shape_str(row.inputs.front().shape()) : row.shape;
        Row out{"nn", row.kernel, shape, ms, gbps, -1, gbps / limit, lim};
        out.device = d.str();
        rep.add(out, ms);
    }
}

}  // namespace

void run_nn(const Options& o, Report& rep) {
    run_op_rows("nn",
                {test::Family::norm, test::Family::pool, test::Family::loss, test::Family::index},
                o, rep);
    const std::vector<NnRow> rs = rows(o.quick);
    add_rows(rs, Device::cpu(), o, rep);
    if (const auto gpu = bench_gpu()) add_rows(rs, *gpu, o, rep);
}

}  // namespace ember::bench

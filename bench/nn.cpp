// The nn family: the ops a training step runs besides matmul, conv and the
// op table's elementwise, reduce and softmax rows — batch norm (alone and
// fused with a ReLU, beside the unfused pair) and layer norm forward and
// backward, cross-entropy forward and backward, max, average and adaptive
// pooling and their backwards, the embedding gather and its index_add
// backward, dropout — on the CPU and, where a GPU is present, on it.
// Shapes are a training step's: resnet8's first block (batch 128, 16 or 32
// channels of 28×28), a 1024-wide transformer row, 1000 classes.
//
// Each row is checked before it is timed: on the CPU against the same op on
// f64 inputs (the f32 instantiation against the f64 one), on a GPU against
// the CPU's result. Bytes: what the op must move at least — each input it
// reads in full read once, each output written once; the embedding reads the
// rows it gathers (the output's size), not the whole table; index_add reads
// and writes the rows it adds into. The limit is the copy bandwidth measured in
// the same run (docs/benchmarks.md); two-pass kernels (batch norm reads x for
// its statistics and again to apply them) cannot reach 100 % of it.
#include <functional>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "core/error.h"
#include "core/generator.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/index.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/pool.h"
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
    double tol;         // relative and absolute tolerance of the checks
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

    {  // batch norm on resnet8's first block: [N, 16, 28, 28]
        const Tensor x = normal({n, 16, 28, 28}), w = normal({16}), b = normal({16});
        const Tensor gy = normal(x.shape());
        const auto fwd = kernels::batch_norm_forward(x, w, b, {}, {}, 0.1, 1e-5);
        r.push_back(
            {"batch_norm fwd",
             {x, w, b},
             [](const Inputs& i) {
                 return kernels::batch_norm_forward(i[0], i[1], i[2], {}, {}, 0.1, 1e-5).output;
             },
             2 * nbytes(x),
             1e-4});
        r.push_back({"batch_norm bwd",
                     {gy, x, w, fwd.save_mean, fwd.save_invstd},
                     [](const Inputs& i) {
                         return kernels::batch_norm_backward(i[0], i[1], i[2], i[3], i[4],
                                                             {true, true, true})
                             .input;
                     },
                     3 * nbytes(x),
                     1e-4});
        // The fused batch norm + ReLU of ConvBNReLU, beside the unfused pair
        // it replaces (the same bytes: what the result needs at least, so
        // the GB/s compare directly). bwd reads g, y and x and writes dx.
        const auto fr = kernels::batch_norm_relu_forward(x, w, b, {}, {}, 0.1, 1e-5);
        r.push_back({"batch_norm_relu fwd",
                     {x, w, b},
                     [](const Inputs& i) {
                         return kernels::batch_norm_relu_forward(i[0], i[1], i[2], {}, {}, 0.1,
                                                                 1e-5)
                             .output;
                     },
                     2 * nbytes(x),
                     1e-4});
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
        r.push_back({"batch_norm_relu bwd", bwd_in,
                     [](const Inputs& i) {
                         return kernels::batch_norm_relu_backward(i[0], i[1], i[2], i[3], i[4],
                                                                  i[5], {true, true, true})
                             .input;
                     },
                     4 * nbytes(x), 1e-4});
        r.push_back({"batch_norm+relu bwd (unfused)", bwd_in,
                     [](const Inputs& i) {
                         return kernels::batch_norm_backward(kernels::relu_backward(i[0], i[1]),
                                                             i[2], i[3], i[4], i[5],
                                                             {true, true, true})
                             .input;
                     },
                     4 * nbytes(x), 1e-4});
    }
    {  // layer norm over 1024-wide rows
        const int64_t rows_n = quick ? 512 : 8192;
        const Tensor x = normal({rows_n, 1024}), w = normal({1024}), b = normal({1024});
        const Tensor gy = normal(x.shape());
        const auto fwd = kernels::layer_norm_forward(x, {1024}, w, b, 1e-5);
        r.push_back({"layer_norm fwd",
                     {x, w, b},
                     [](const Inputs& i) {
                         return kernels::layer_norm_forward(i[0], {1024}, i[1], i[2], 1e-5).output;
                     },
                     2 * nbytes(x),
                     1e-4});
        r.push_back({"layer_norm bwd",
                     {gy, x, w, fwd.mean, fwd.rstd},
                     [](const Inputs& i) {
                         return kernels::layer_norm_backward(i[0], i[1], {1024}, i[2], i[3], i[4],
                                                             {true, true, true})
                             .input;
                     },
                     3 * nbytes(x),
                     1e-4});
    }
    {  // cross-entropy over 1000 classes
        const int64_t rows_n = quick ? 512 : 8192;
        const Tensor logits = normal({rows_n, 1000});
        const Tensor target = randint(0, 1000, {rows_n}, {DType::i64}, &gen);
        const Tensor grad = full({rows_n}, 1.0 / double(rows_n));
        const auto fwd = kernels::cross_entropy_forward(logits, target, 0.1, -100);
        r.push_back({"cross_entropy fwd",
                     {logits, target},
                     [](const Inputs& i) {
                         return kernels::cross_entropy_forward(i[0], i[1], 0.1, -100).loss;
                     },
                     nbytes(logits),
                     1e-4});
        r.push_back({"cross_entropy bwd",
                     {grad, logits, fwd.lse, target},
                     [](const Inputs& i) {
                         return kernels::cross_entropy_backward(i[0], i[1], i[2], i[3], 0.1, -100);
                     },
                     2 * nbytes(logits),
                     1e-4});
    }
    {  // pooling: resnet8's 2×2 max pool and its global average pool
        const Tensor x = normal({n, 32, 28, 28});
        const auto mp = kernels::max_pool2d(x, {2, 2});
        const Tensor gy = normal(mp.values.shape());
        r.push_back({"max_pool2d fwd",
                     {x},
                     [](const Inputs& i) {
                         return kernels::max_pool2d(i[0], {2, 2}).values;
                     },
                     nbytes(x) + 3 * nbytes(mp.values),
                     0});
        r.push_back({"max_pool2d bwd",
                     {gy, x, mp.indices},
                     [](const Inputs& i) { return kernels::max_pool2d_backward(i[0], i[1], i[2]); },
                     nbytes(gy) + nbytes(mp.indices) + nbytes(x),
                     0});
        r.push_back({"avg_pool2d fwd 3x3",
                     {x},
                     [](const Inputs& i) {
                         return kernels::avg_pool2d(i[0], {3, 3}, {1, 1}, {1, 1});
                     },
                     2 * nbytes(x),
                     1e-5});
        const Tensor g = normal(x.shape());
        r.push_back({"avg_pool2d bwd 3x3",
                     {g, x},
                     [](const Inputs& i) {
                         return kernels::avg_pool2d_backward(i[0], i[1], {3, 3}, {1, 1}, {1, 1},
                                                             false, true);
                     },
                     2 * nbytes(x),
                     1e-5});
        const Tensor a = normal({n, 64, 7, 7}), ga = normal({n, 64, 1, 1});
        r.push_back({"adaptive_avg_pool2d fwd",
                     {a},
                     [](const Inputs& i) {
                         return kernels::adaptive_avg_pool2d(i[0], {1, 1});
                     },
                     nbytes(a) + nbytes(ga),
                     1e-5});
        r.push_back(
            {"adaptive_avg_pool2d bwd",
             {ga, a},
             [](const Inputs& i) { return kernels::adaptive_avg_pool2d_backward(i[0], i[1]); },
             nbytes(a) + nbytes(ga),
             1e-5});
    }
    {  // an embedding table of 32768 × 256 and 65536 lookups
        const int64_t lookups = quick ? 4096 : 65536;
        const Tensor table = normal({32768, 256});
        const Tensor idx = randint(0, 32768, {lookups}, {DType::i64}, &gen);
        const Tensor grad = normal({lookups, 256});
        r.push_back({"embedding fwd",
                     {table, idx},
                     [](const Inputs& i) { return kernels::embedding(i[0], i[1]); },
                     2 * nbytes(grad) + nbytes(idx),
                     0,
                     str(shape_str(table.shape()), " ", shape_str(idx.shape()))});
        r.push_back(
            {"embedding bwd (index_add)",
             {table, idx, grad},
             [](const Inputs& i) { return kernels::index_add(zeros_like(i[0]), 0, i[1], i[2]); },
             nbytes(table) + 2 * nbytes(grad) + nbytes(idx),
             1e-5,
             str(shape_str(table.shape()), " ", shape_str(idx.shape()))});
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
    const std::vector<NnRow> rs = rows(o.quick);
    add_rows(rs, Device::cpu(), o, rep);
    if (const auto gpu = bench_gpu()) add_rows(rs, *gpu, o, rep);
}

}  // namespace ember::bench

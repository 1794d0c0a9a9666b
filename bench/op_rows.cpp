// The op table's benchmark rows: every entry of the requested families on
// each of its bench cases in f32 through its front function, after checking it
// against the entry's f64 reference on the case cut 16-fold; then, where a GPU
// is present, the entries with a CUDA kernel on it (CUDA events, L2 flushed).
// Bytes: the entry's count, or each input read once and each output written
// once (docs/benchmarks.md); FLOPs from the table. The fronts allocate their
// outputs; the host block cache (core/host_cache.h) keeps that cheap.
#include "bench/op_rows.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace ember::bench {

namespace {

using OpFamily = test::Family;  // bench::Family is a benchmark family

// "add", "add scalar", "sum dims [0]", "sum all", "softmax dim 1".
std::string kernel_label(const test::OpEntry& e, const test::Case& c) {
    if (e.bench_label) return e.bench_label(c);
    std::string s = e.name;
    if (c.args.scalar) s += " scalar";
    if (e.family == OpFamily::softmax) s += str(" dim ", c.args.dims.at(0));
    if (e.family == OpFamily::reduce)
        s += c.args.dims.empty() ? std::string(" all") : str(" dims ", shape_str(c.args.dims));
    return s;
}

// The input shapes, each once: "[4096, 4096]", "[4096, 4096] [4096]".
std::string shape_label(const test::Case& c) {
    std::string s = shape_str(c.shapes.at(0));
    for (size_t i = 1; i < c.shapes.size(); ++i)
        if (c.shapes[i] != c.shapes[0]) s += str(" ", shape_str(c.shapes[i]));
    return s;
}

// The case with the leading dim of its highest-rank inputs cut 16-fold: the
// same kernel path at a size the f64 reference checks in a moment.
test::Case smaller(test::Case c) {
    size_t rank = 0;
    for (const Shape& s : c.shapes) rank = std::max(rank, s.size());
    for (Shape& s : c.shapes)
        if (s.size() == rank && rank > 0) s[0] = std::max<int64_t>(1, s[0] / 16);
    return c;
}

std::vector<Tensor> on(Device d, const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(t.to(d));
    return out;
}

// A wrong result is not worth timing: the entry on device `d` against its f64 reference.
void validate(const test::OpEntry& e, const test::Case& c, Device d) {
    test::Sample s{"", test::make_inputs(e, c, e.dtypes.front(), 7), c.args};
    s.label = test::describe_case(s.inputs, s.args);
    const test::Outputs out = e.raw(on(d, s.inputs), s.args);
    const test::Expected want = e.reference(s);
    EMBER_CHECK(want.error.empty() && out.size() == want.outputs.size(), "bench: ", e.name, "(",
                s.label, ") on ", d, " gave ", out.size(), " outputs, expected ",
                want.outputs.size(), want.error);
    for (size_t i = 0; i < out.size(); ++i) {
        const test::ExpectedOutput& w = want.outputs[i];
        EMBER_CHECK(out[i].dtype() == w.dtype && out[i].shape() == w.shape, "bench: ", e.name,
                    "(", s.label, ") on ", d, " gave ", dtype_name(out[i].dtype()), " ",
                    shape_str(out[i].shape()), ", expected ", dtype_name(w.dtype), " ",
                    shape_str(w.shape));
        const test::Tolerance tol = e.tolerance(w.dtype, s);
        const test::CloseReport r =
            test::close_report(out[i].to(Device::cpu()), test::rounded(w), tol.rtol, tol.atol);
        EMBER_CHECK(r.ok(), "bench: ", e.name, "(", s.label, ") on ", d, " is wrong in output ", i,
                    ", ", r.mismatches, " elements:\n", r.first);
    }
}

// One row per bench case of every entry of `families` on device `d` (a GPU:
// only the entries with a CUDA kernel, timed with CUDA events).
void add_rows(const char* name, std::initializer_list<OpFamily> families, Device d,
              const Options& o, Report& rep) {
    const bool gpu = d.is_cuda();
    const double limit = gpu ? measure_gpu_copy_gbps(d, o) : measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    for (OpFamily f : families)
        for (const test::OpEntry* e : test::entries(f)) {
            if ((gpu && !e->cuda) || !e->bench_cases) continue;
            for (const test::Case& c : e->bench_cases(o.quick)) {
                validate(*e, smaller(c), d);
                const test::Signature& sig = e->dtypes.front();  // f32 (a condition: bool)
                const test::Sample s{"", on(d, test::make_inputs(*e, c, sig, 2024)), c.args};
                const test::Outputs out = e->raw(s.inputs, s.args);
                const auto call = [&] { (void)e->raw(s.inputs, s.args); };
                const Timing ms =
                    gpu ? gpu_median_ms(d, call, o) : median_ms(call, o.warmup, o.repeats);
                const double bytes = e->bytes ? e->bytes(s, out) : test::bytes_moved(s, out);
                const double gbps = bytes / (ms * 1e6);
                const double gflops = e->flops ? e->flops(s, out) / (ms * 1e6) : -1;
                Row r{name, kernel_label(*e, c), shape_label(c), ms, gbps, gflops, gbps / limit,
                      lim};
                r.device = d.str();
                // Each call allocates its output: on a GPU from the caching
                // allocator (core/caching_allocator.h), no cudaMalloc once warm.
                if (gpu) r.note = "front, allocates";
                rep.add(r, ms);
            }
        }
}

}  // namespace

void run_op_rows(const char* name, std::initializer_list<OpFamily> families, const Options& o,
                 Report& rep) {
    add_rows(name, families, Device::cpu(), o, rep);
    bool any_cuda = false;
    for (OpFamily f : families)
        for (const test::OpEntry* e : test::entries(f)) any_cuda |= e->cuda;
    const auto gpu = bench_gpu();
    if (gpu && any_cuda) add_rows(name, families, *gpu, o, rep);
}

}  // namespace ember::bench

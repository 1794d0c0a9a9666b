// Optimizer family: one step of the fused optimizers over 10 M and 100 M f32
// parameters split into the tensor sizes of a transformer-like model, and
// over 10,000 small tensors; beside each AdamW row, the same update as an
// unfused loop of per-tensor ops (what a framework without fused optimizers
// runs). Bytes per parameter: AdamW 28 (p, g, m, v read; p, m, v written),
// SGD with momentum 20, LAMB 44 (two passes); the limit is the copy
// bandwidth measured in the same run. The fused and the unfused AdamW are
// checked against each other first. With a GPU, the fused rows again on
// cuda:0 (the parameters copied there, checked against the CPU's step first),
// timed with CUDA events against the device's copy bandwidth, with the
// kernel launches one step makes, counted at the launch sites
// (core/launch_count.h) over one step: AdamW and SGD should make one per
// group of up to 256 tensors, LAMB three. The CPU rows launch nothing ("-").
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "bench/bench.h"
#include "ember/ember.h"
#include "ember/kernels.h"

namespace ember::bench {

namespace {

// Tensor sizes adding up to about `total` parameters: blocks of a
// transformer layer (d×d attention matrices, 4d×d and d×4d MLP matrices,
// biases and norm weights), repeated.
std::vector<Shape> model_shapes(int64_t total, int64_t d) {
    const std::vector<Shape> block = {{d, d}, {d, d}, {d, d}, {d, d}, {4 * d, d}, {d, 4 * d},
                                      {d},    {d},    {4 * d}, {d},   {d},        {d}};
    std::vector<Shape> shapes;
    int64_t n = 0;
    while (n < total)
        for (const Shape& s : block) {
            shapes.push_back(s);
            n += shape_numel(s);
        }
    return shapes;
}

struct Model {
    std::vector<Tensor> params;
    int64_t numel = 0;
    std::string label;
};

// The model's parameters and gradients copied to `d`.
Model model_on(const Model& m, Device d) {
    Model out = m;
    out.params.clear();
    for (const Tensor& p : m.params) {
        Tensor q = p.to(d).clone().set_requires_grad(true);
        q.set_grad(p.grad().to(d).clone());
        out.params.push_back(q);
    }
    return out;
}

// The kernel launches of one call of step(), counted on this thread.
int64_t launches_of(const std::function<void()>& step) {
    kernel_launches();
    step();
    const int64_t n = kernel_launch_total();
    kernel_launches();
    return n;
}

Model make_model(const std::vector<Shape>& shapes, uint64_t seed) {
    Model m;
    Generator g(seed);
    for (const Shape& s : shapes) {
        Tensor p = randn(s, {}, &g).set_requires_grad(true);
        p.set_grad(randn(s, {}, &g));
        m.numel += p.numel();
        m.params.push_back(p);
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1fM in %zu tensors", double(m.numel) / 1e6, shapes.size());
    m.label = buf;
    return m;
}

// AdamW as a loop of per-tensor ops: several passes and temporaries per tensor.
struct UnfusedAdamW {
    std::vector<Tensor> m, v;
    int64_t t = 0;
    void step(const std::vector<Tensor>& ps, double lr, double wd) {
        NoGradGuard no_grad;
        if (m.empty())
            for (const Tensor& p : ps) m.push_back(zeros_like(p)), v.push_back(zeros_like(p));
        ++t;
        const double b1 = 0.9, b2 = 0.999, bc1 = 1 - std::pow(b1, double(t)),
                     bc2 = 1 - std::pow(b2, double(t));
        for (size_t i = 0; i < ps.size(); ++i) {
            const Tensor g = ps[i].grad();
            kernels::mul_(ps[i], 1 - lr * wd);
            kernels::add_(kernels::mul_(m[i], b1), kernels::mul(g, 1 - b1));
            kernels::add_(kernels::mul_(v[i], b2), kernels::mul(kernels::mul(g, g), 1 - b2));
            const Tensor denom =
                kernels::add(kernels::div(kernels::sqrt(v[i]), std::sqrt(bc2)), 1e-8);
            kernels::sub_(ps[i], kernels::mul(kernels::div(m[i], denom), lr / bc1));
        }
    }
};

}  // namespace

void run_optim(const Options& o, Report& rep) {
    const double limit = measure_copy_gbps(o);
    const std::string lim = limit_label("copy", limit, "GB/s");
    const int64_t d = o.quick ? 128 : 1024;
    std::vector<std::vector<Shape>> cases = {model_shapes(o.quick ? 1'000'000 : 10'000'000, d)};
    if (!o.quick) cases.push_back(model_shapes(100'000'000, d));
    cases.push_back(std::vector<Shape>(o.quick ? 1000 : 10000, Shape{100}));

    {  // The fused and the unfused AdamW agree (a small model, three steps).
        Model a = make_model(model_shapes(200'000, 64), 1), b = make_model(model_shapes(200'000, 64), 1);
        optim::AdamW fused(a.params, {.lr = 1e-3, .weight_decay = 0.01});
        UnfusedAdamW loop;
        for (int s = 0; s < 3; ++s) {
            fused.step();
            loop.step(b.params, 1e-3, 0.01);
        }
        for (size_t i = 0; i < a.params.size(); ++i) {
            const double err =
                kernels::amax(kernels::abs(kernels::sub(a.params[i], b.params[i]))).item();
            EMBER_CHECK(err < 1e-5, "bench optim: fused AdamW differs from the per-tensor loop by ",
                        err, " in tensor ", i);
        }
    }

    const std::optional<Device> gpu = bench_gpu();
    if (gpu) {  // The fused AdamW on the GPU agrees with the CPU's.
        Model a = make_model(model_shapes(200'000, 64), 1);
        Model b = model_on(a, *gpu);
        optim::AdamW on_cpu(a.params, {.lr = 1e-3, .weight_decay = 0.01});
        optim::AdamW on_gpu(b.params, {.lr = 1e-3, .weight_decay = 0.01});
        for (int s = 0; s < 3; ++s) on_cpu.step(), on_gpu.step();
        for (size_t i = 0; i < a.params.size(); ++i) {
            const double err = kernels::amax(kernels::abs(kernels::sub(
                                                 a.params[i], b.params[i].to(Device::cpu()))))
                                   .item();
            EMBER_CHECK(err <= 1e-6, "bench optim: AdamW on ", *gpu, " differs from the CPU's by ",
                        err, " in tensor ", i);
        }
    }
    const double gpu_limit = gpu ? measure_gpu_copy_gbps(*gpu, o) : 0;
    const std::string gpu_lim = gpu ? limit_label("copy", gpu_limit, "GB/s") : "";

    for (const auto& shapes : cases) {
        Model m = make_model(shapes, 2);
        struct Variant {
            const char* kernel;
            double bytes_per_param;
            std::unique_ptr<optim::Optimizer> opt;
        };
        std::vector<Variant> variants;
        variants.push_back({"adamw fused", 28, std::make_unique<optim::AdamW>(m.params, optim::AdamWOptions{})});
        variants.push_back({"sgd momentum fused", 20,
                            std::make_unique<optim::SGD>(m.params, optim::SGDOptions{.lr = 1e-3, .momentum = 0.9})});
        variants.push_back({"lamb fused", 44, std::make_unique<optim::LAMB>(m.params, optim::LAMBOptions{})});
        for (Variant& v : variants) {
            v.opt->step();  // state allocated outside the timing
            const Timing ms = median_ms([&] { v.opt->step(); }, o.warmup, o.repeats);
            const double gbps = v.bytes_per_param * double(m.numel) / (ms * 1e6);
            rep.add({"optim", v.kernel, m.label, ms, gbps, -1, gbps / limit, lim}, ms);
        }
        if (gpu) {
            const Model g = model_on(m, *gpu);
            std::vector<Variant> gv;
            gv.push_back({"adamw fused", 28, std::make_unique<optim::AdamW>(g.params, optim::AdamWOptions{})});
            gv.push_back({"sgd momentum fused", 20,
                          std::make_unique<optim::SGD>(g.params, optim::SGDOptions{.lr = 1e-3, .momentum = 0.9})});
            gv.push_back({"lamb fused", 44, std::make_unique<optim::LAMB>(g.params, optim::LAMBOptions{})});
            for (Variant& v : gv) {
                v.opt->step();  // state allocated outside the timing and the count
                const int64_t launches = launches_of([&] { v.opt->step(); });
                const Timing ms = gpu_median_ms(*gpu, [&] { v.opt->step(); }, o);
                const double gbps = v.bytes_per_param * double(m.numel) / (ms * 1e6);
                Row r{"optim", v.kernel, m.label, ms, gbps, -1, gbps / gpu_limit, gpu_lim};
                r.device = gpu->str();
                r.launches = launches;
                rep.add(r, ms);
            }
        }
        UnfusedAdamW loop;
        loop.step(m.params, 1e-3, 0.01);
        const Timing ms = median_ms([&] { loop.step(m.params, 1e-3, 0.01); }, o.warmup, o.repeats);
        const double gbps = 28 * double(m.numel) / (ms * 1e6);
        Row r{"optim", "adamw per-tensor ops", m.label, ms, gbps, -1, gbps / limit, lim};
        r.note = "unfused: the same update as a loop of ops";
        rep.add(r, ms);
    }
}

}  // namespace ember::bench

// The fused multi-tensor updates and gradient passes on CUDA
// (kernels/cuda/optim.cu) against the CPU's (kernels/cpu/optim.cpp), on
// seeded random sets of many small tensors, a few spanning several chunks,
// empty ones and misaligned slices (the scalar path): the element updates
// and the low-precision copies (stochastic rounding included) bit for bit;
// what goes through a per-tensor norm (LAMB, LARS, the global norm) to f64
// sums in another order. Then whole optimizer steps over a module on the
// GPU, with the host-sync counter at 0; the loss scaler on the GPU: skipped
// steps bit-unchanged, scale and counters and results equal to the CPU's,
// scale → backward → step → update with no host sync.
#include <cmath>
#include <cstring>
#include <map>

#include "support/support.h"

using namespace ember;
using namespace ember::test;
using kernels::UpdateTensors;

namespace {

const Device kGpu = Device::cuda(0);

// 300 small tensors (two launches of at most 256), three spanning 2-3 chunks
// of 16,384, empty ones, and a slice at an odd element offset (misaligned).
std::vector<Shape> many_shapes() {
    std::vector<Shape> s = {{0}, {40000}, {1}, {16385}, {3, 0}, {129, 257}};
    for (int i = 0; i < 300; ++i) s.push_back({int64_t(1 + (i * 37) % 61)});
    return s;
}

// The tensor of many_shapes() given at an odd offset: two chunks, no vector loads.
constexpr size_t kMisaligned = 3;

// A dense tensor of `shape` whose data starts one element into its storage:
// contiguous, but not 16-byte aligned.
Tensor misaligned(const Tensor& t) {
    Tensor base = empty({t.numel() + 1}, {t.dtype(), t.device()});
    Tensor v = base.narrow(0, 1, t.numel()).view(t.shape());
    kernels::copy(v, t);
    return v;
}

// The same random tensors on the CPU and on the GPU.
struct Pair {
    std::vector<Tensor> cpu, gpu;
};

Pair random_pair(const std::vector<Shape>& shapes, DType dtype, uint64_t seed, double lo = -2,
                 double hi = 2) {
    Pair p;
    for (size_t i = 0; i < shapes.size(); ++i) {
        const Tensor t = random_tensor(shapes[i], dtype, seed + i, lo, hi);
        p.cpu.push_back(i == kMisaligned ? misaligned(t) : t);
        p.gpu.push_back(i == kMisaligned ? misaligned(t.to(kGpu)) : t.to(kGpu));
    }
    return p;
}

Pair zeros_pair(const std::vector<Shape>& shapes, DType dtype) {
    Pair p;
    for (const Shape& s : shapes) {
        p.cpu.push_back(zeros(s, {dtype}));
        p.gpu.push_back(zeros(s, {dtype, kGpu}));
    }
    return p;
}

// The GPU tensors hold the CPU's bits exactly.
void check_bits(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu, const char* what) {
    REQUIRE(gpu.size() == cpu.size());
    for (size_t i = 0; i < gpu.size(); ++i) {
        const Tensor g = gpu[i].to(Device::cpu()).contiguous(), c = cpu[i].contiguous();
        REQUIRE(g.dtype() == c.dtype());
        REQUIRE(g.shape() == c.shape());
        const size_t bytes = size_t(c.numel() * dtype_size(c.dtype()));
        if (bytes == 0 || std::memcmp(g.data_ptr(), c.data_ptr(), bytes) == 0) continue;
        const std::vector<double> gv = values(g), cv = values(c);
        size_t k = 0;
        while (k < gv.size() && std::memcmp(&gv[k], &cv[k], sizeof(double)) == 0) ++k;
        FAIL(what << " " << i << " " << shape_str(c.shape()) << " " << dtype_name(c.dtype())
                  << ": first difference at element " << k << ": cuda " << gv[k] << ", cpu "
                  << cv[k]);
    }
}

void check_close_all(const std::vector<Tensor>& gpu, const std::vector<Tensor>& cpu, double rtol,
                     double atol) {
    for (size_t i = 0; i < gpu.size(); ++i) {
        INFO("tensor " << i);
        check_close(gpu[i].to(Device::cpu()), cpu[i], rtol, atol);
    }
}

// One update's tensors on both devices: params, grads, states, copies.
struct Problem {
    Pair p, g, s1, s2, s3, copy;
    UpdateTensors on(bool gpu, int states, bool copies, bool stochastic, uint64_t step) const {
        auto pick = [&](const Pair& x) { return gpu ? x.gpu : x.cpu; };
        return {pick(p),
                pick(g),
                states >= 1 ? pick(s1) : std::vector<Tensor>{},
                states >= 2 ? pick(s2) : std::vector<Tensor>{},
                states >= 3 ? pick(s3) : std::vector<Tensor>{},
                copies ? pick(copy) : std::vector<Tensor>{},
                stochastic,
                11,
                step};
    }
};

Problem make_problem(DType param, DType grad, DType copy, uint64_t seed) {
    const std::vector<Shape> shapes = many_shapes();
    const DType acc = param == DType::f64 ? DType::f64 : DType::f32;
    Problem pr{random_pair(shapes, param, seed), random_pair(shapes, grad, seed + 1000),
               random_pair(shapes, acc, seed + 2000, -0.5, 0.5),
               random_pair(shapes, acc, seed + 3000, 0, 0.5),
               random_pair(shapes, acc, seed + 4000, 0, 0.5), zeros_pair(shapes, copy)};
    return pr;
}

}  // namespace

TEST_CASE("cuda optim: adam_update equals the CPU's bits", "[cuda][optim]") {
    for (const DType dt : {DType::f32, DType::f64, DType::bf16, DType::f16})
        for (const kernels::AdamDecay decay :
             {kernels::AdamDecay::decoupled, kernels::AdamDecay::l2})
            for (const double wd : {0.0, 0.05}) {
                INFO(dtype_name(dt) << (decay == kernels::AdamDecay::decoupled ? " AdamW" : " Adam")
                                    << " weight decay " << wd);
                const Problem pr = make_problem(dt, dt, DType::bf16, 1);
                for (int64_t step = 1; step <= 2; ++step) {
                    const kernels::AdamArgs a{1e-2, 0.9, 0.999, 1e-8, wd};
                    kernels::adam_update(pr.on(false, 2, false, false, 0), a, decay, step);
                    kernels::adam_update(pr.on(true, 2, false, false, 0), a, decay, step);
                }
                check_bits(pr.p.gpu, pr.p.cpu, "param");
                check_bits(pr.s1.gpu, pr.s1.cpu, "exp_avg");
                check_bits(pr.s2.gpu, pr.s2.cpu, "exp_avg_sq");
            }
}

TEST_CASE("cuda optim: AMSGrad equals the CPU's bits", "[cuda][optim]") {
    // max_exp_avg_sq starts at random values in [0, 0.5): some elements take
    // the new v, some keep their maximum.
    for (const DType dt : {DType::f32, DType::f64, DType::bf16})
        for (const kernels::AdamDecay decay :
             {kernels::AdamDecay::decoupled, kernels::AdamDecay::l2}) {
            INFO(dtype_name(dt) << (decay == kernels::AdamDecay::decoupled ? " AdamW" : " Adam")
                                << " amsgrad");
            const Problem pr = make_problem(dt, dt, DType::bf16, 5);
            for (int64_t step = 1; step <= 3; ++step) {
                const kernels::AdamArgs a{1e-2, 0.9, 0.5, 1e-8, 0.01, /*amsgrad=*/true};
                kernels::adam_update(pr.on(false, 3, false, false, 0), a, decay, step);
                kernels::adam_update(pr.on(true, 3, false, false, 0), a, decay, step);
            }
            check_bits(pr.p.gpu, pr.p.cpu, "param");
            check_bits(pr.s2.gpu, pr.s2.cpu, "exp_avg_sq");
            check_bits(pr.s3.gpu, pr.s3.cpu, "max_exp_avg_sq");
        }
}

TEST_CASE("cuda optim: master weights with f16/bf16 gradients and copies, stochastic rounding",
          "[cuda][optim]") {
    struct Case {
        DType low;
        bool stochastic;
    };
    for (const Case c :
         {Case{DType::bf16, false}, Case{DType::bf16, true}, Case{DType::f16, false}}) {
        INFO(dtype_name(c.low) << (c.stochastic ? " stochastic" : " nearest"));
        const Problem pr = make_problem(DType::f32, c.low, c.low, 2);
        for (uint64_t step = 1; step <= 2; ++step) {
            const kernels::AdamArgs a{1e-3, 0.9, 0.999, 1e-8, 0.01};
            kernels::adam_update(pr.on(false, 2, true, c.stochastic, step), a, kernels::AdamDecay::decoupled, int64_t(step));
            kernels::adam_update(pr.on(true, 2, true, c.stochastic, step), a, kernels::AdamDecay::decoupled, int64_t(step));
        }
        check_bits(pr.p.gpu, pr.p.cpu, "master");
        check_bits(pr.copy.gpu, pr.copy.cpu, "copy");
        // SGD writes its copies the same way.
        const kernels::SgdArgs s{0.1, 0.9, 0, 0, false};
        kernels::sgd_update(pr.on(false, 1, true, c.stochastic, 3), s, /*first=*/false);
        kernels::sgd_update(pr.on(true, 1, true, c.stochastic, 3), s, /*first=*/false);
        check_bits(pr.copy.gpu, pr.copy.cpu, "sgd copy");
    }
}

TEST_CASE("cuda optim: sgd_update equals the CPU's bits", "[cuda][optim]") {
    for (const DType dt : {DType::f32, DType::f64, DType::bf16})
        for (const double momentum : {0.0, 0.9})
            for (const bool nesterov : {false, true}) {
                if (nesterov && momentum == 0) continue;
                INFO(dtype_name(dt) << " momentum " << momentum << " nesterov " << nesterov);
                const Problem pr = make_problem(dt, dt, DType::bf16, 3);
                const int states = momentum != 0 ? 1 : 0;
                for (int step = 0; step < 3; ++step) {
                    const kernels::SgdArgs a{0.05, momentum, step == 2 ? 0.1 : 0.0, 1e-3,
                                             nesterov};
                    kernels::sgd_update(pr.on(false, states, false, false, 0), a, step == 0);
                    kernels::sgd_update(pr.on(true, states, false, false, 0), a, step == 0);
                }
                check_bits(pr.p.gpu, pr.p.cpu, "param");
                if (states) check_bits(pr.s1.gpu, pr.s1.cpu, "momentum buffer");
            }
}

TEST_CASE("cuda optim: lamb_update and lars_update against the CPU, trust ratios per tensor",
          "[cuda][optim]") {
    for (const DType dt : {DType::f32, DType::f64}) {
        INFO(dtype_name(dt));
        Problem pr = make_problem(dt, dt, DType::bf16, 4);
        // A zero parameter: trust ratio 1 (both rules).
        kernels::fill(pr.p.cpu[3], 0.0);
        kernels::fill(pr.p.gpu[3], 0.0);
        for (int64_t step = 1; step <= 2; ++step) {
            const kernels::LambArgs a{1e-2, 0.9, 0.999, 1e-6, step == 1 ? 0.0 : 0.01};
            kernels::lamb_update(pr.on(false, 2, false, false, 0), a, step);
            kernels::lamb_update(pr.on(true, 2, false, false, 0), a, step);
        }
        // The moments involve no sum: exact. The parameters went through the
        // norms, whose f64 sums differ in order.
        check_bits(pr.s1.gpu, pr.s1.cpu, "exp_avg");
        check_bits(pr.s2.gpu, pr.s2.cpu, "exp_avg_sq");
        const double tol = dt == DType::f64 ? 1e-13 : 1e-6;
        check_close_all(pr.p.gpu, pr.p.cpu, tol, tol);
        for (const bool exclude : {false, true})
            for (const bool first : {true, false}) {
                INFO("lars exclude " << exclude << " first " << first);
                const kernels::LarsArgs l{0.1, 0.9, 1e-4, 1e-3, 1e-8, exclude};
                kernels::lars_update(pr.on(false, 1, false, false, 0), l, first);
                kernels::lars_update(pr.on(true, 1, false, false, 0), l, first);
                check_close_all(pr.p.gpu, pr.p.cpu, tol, tol);
                check_close_all(pr.s1.gpu, pr.s1.cpu, tol, tol);
            }
    }
}

TEST_CASE("cuda optim: lamb is deterministic", "[cuda][optim]") {
    const Problem a = make_problem(DType::f32, DType::f32, DType::bf16, 5),
                  b = make_problem(DType::f32, DType::f32, DType::bf16, 5);
    for (const Problem* pr : {&a, &b})
        kernels::lamb_update(pr->on(true, 2, false, false, 0),
                             kernels::LambArgs{.weight_decay = 0.01});
    check_bits(a.p.gpu, b.p.gpu, "lamb run 2 vs run 1: param");
}

TEST_CASE("cuda optim: global_norm and clip_by_norm_ on the device", "[cuda][optim]") {
    const std::vector<Shape> shapes = many_shapes();
    // f32 alone, f64 alone (an f64 result), and a mix of dtypes.
    Pair f32 = random_pair(shapes, DType::f32, 20), f64 = random_pair(shapes, DType::f64, 21),
         bf = random_pair(shapes, DType::bf16, 22);
    Pair mix;
    for (size_t i = 0; i < shapes.size(); ++i) {
        const Pair& from = i % 3 == 0 ? f32 : i % 3 == 1 ? f64 : bf;
        mix.cpu.push_back(from.cpu[i]);
        mix.gpu.push_back(from.gpu[i]);
    }
    for (Pair* set : {&f32, &f64, &mix}) {
        const Tensor nc = kernels::global_norm(set->cpu), ng = kernels::global_norm(set->gpu);
        REQUIRE(ng.device() == kGpu);
        REQUIRE(ng.dtype() == nc.dtype());
        check_close(ng.to(Device::cpu()), nc, nc.dtype() == DType::f64 ? 1e-14 : 1e-6, 0);
        // The factor from the same norm value: bit-identical clipping.
        const double max_norm = 0.25 * nc.item();
        kernels::clip_by_norm_(set->cpu, nc, max_norm);
        kernels::clip_by_norm_(set->gpu, nc.to(kGpu), max_norm);
        check_bits(set->gpu, set->cpu, "clipped");
        // A norm below max_norm: nothing changes.
        kernels::clip_by_norm_(set->cpu, nc, 1e9);
        kernels::clip_by_norm_(set->gpu, nc.to(kGpu), 1e9);
        check_bits(set->gpu, set->cpu, "not clipped");
    }
    // Only empty tensors: 0; through optim::clip_grads end to end.
    CHECK(kernels::global_norm({zeros({0}, {DType::f32, kGpu})}).item() == 0);
    host_syncs();
    const Tensor n = optim::clip_grads(f32.gpu, 1.0);
    CHECK(host_sync_total() == 0);
    check_close(n.to(Device::cpu()), optim::clip_grads(f32.cpu, 1.0), 1e-6, 0);
    check_close_all(f32.gpu, f32.cpu, 1e-6, 1e-7);
}

TEST_CASE("cuda optim: unscale_ sets found_inf on the device", "[cuda][optim]") {
    for (const DType dt : {DType::f32, DType::f16, DType::bf16, DType::f64})
        for (const bool plant : {false, true}) {
            INFO(dtype_name(dt) << (plant ? " with an inf" : " finite"));
            Pair g = random_pair(many_shapes(), dt, 30);
            if (plant) {  // one inf deep in a large tensor
                kernels::fill(g.cpu[1].narrow(0, 20000, 1), INFINITY);
                kernels::fill(g.gpu[1].narrow(0, 20000, 1), INFINITY);
            }
            const Tensor inv_c = full({1}, 1.0 / 1024, {DType::f32}), inv_g = inv_c.to(kGpu);
            const Tensor inf_c = zeros({1}, {DType::f32}), inf_g = zeros({1}, {DType::f32, kGpu});
            host_syncs();
            kernels::unscale_(g.gpu, inv_g, inf_g);
            CHECK(host_sync_total() == 0);
            kernels::unscale_(g.cpu, inv_c, inf_c);
            check_bits(g.gpu, g.cpu, "unscaled");
            CHECK(inf_g.item() == (plant ? 1.0 : 0.0));
            CHECK(inf_c.item() == inf_g.item());
            // A raised flag stays raised.
            kernels::fill(inf_g, 1.0);
            kernels::unscale_(g.gpu, inv_g, inf_g);
            CHECK(inf_g.item() == 1.0);
        }
}

TEST_CASE("cuda optim: AdamW and SGD steps over a module on the GPU equal the CPU's",
          "[cuda][optim]") {
    auto run = [](bool master) {
        std::shared_ptr<nn::Module> cpu = nn::mlp(20, 10), gpu = nn::mlp(20, 10);
        for (size_t i = 0; i < cpu->parameters().size(); ++i)
            kernels::copy(gpu->parameters()[i], cpu->parameters()[i]);
        gpu->to(kGpu);
        std::unique_ptr<optim::Optimizer> oc, og;
        if (master) {
            oc = std::make_unique<optim::SGD>(optim::master_weights(*cpu, DType::bf16),
                                              optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
            og = std::make_unique<optim::SGD>(optim::master_weights(*gpu, DType::bf16),
                                              optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
            oc->set_stochastic_rounding(true, 5);
            og->set_stochastic_rounding(true, 5);
        } else {
            oc = std::make_unique<optim::AdamW>(optim::decay_groups(*cpu, 0.05),
                                                optim::AdamWOptions{.lr = 1e-2});
            og = std::make_unique<optim::AdamW>(optim::decay_groups(*gpu, 0.05),
                                                optim::AdamWOptions{.lr = 1e-2});
        }
        const std::vector<Tensor> pc = cpu->parameters(), pg = gpu->parameters();
        for (uint64_t step = 0; step < 3; ++step) {
            INFO((master ? "bf16 master weights, step " : "AdamW, step ") << step);
            for (size_t i = 0; i < pc.size(); ++i) {
                const Tensor g = random_tensor(pc[i].shape(), pc[i].dtype(), 100 * step + i);
                pc[i].set_grad(g);
                pg[i].set_grad(g.to(kGpu));
            }
            oc->step();
            host_syncs();
            og->step();
            CHECK(host_sync_total() == 0);
            check_bits(pg, pc, "parameter");
        }
    };
    run(false);
    run(true);
}

// ---- The loss scaler on the GPU: skip and scale rule on the device ----

namespace {

// Parameters of three tensors (one spanning two CUDA chunks), on `d`.
std::vector<Tensor> scaler_params(Device d) {
    std::vector<Tensor> ps;
    uint64_t seed = 70;
    for (const Shape& s : {Shape{7}, Shape{5, 3}, Shape{20001}})
        ps.push_back(random_tensor(s, DType::f32, seed++, -1, 1).to(d).set_requires_grad(true));
    return ps;
}

std::unique_ptr<optim::Optimizer> scaler_optimizer(const std::string& kind,
                                                   const std::vector<Tensor>& ps) {
    if (kind == "SGD")
        return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    if (kind == "AdamW") return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01});
    if (kind == "LAMB")
        return std::make_unique<optim::LAMB>(ps, optim::LAMBOptions{.lr = 0.01, .weight_decay = 0.01});
    return std::make_unique<optim::LARS>(ps, optim::LARSOptions{.lr = 0.1, .weight_decay = 1e-4});
}

std::vector<Tensor> optimizer_state(const optim::Optimizer& opt) {
    std::vector<Tensor> out;
    for (const auto& [name, t] : opt.state_tensors()) out.push_back(kernels::clone(t));
    return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& ts) {
    std::vector<Tensor> out;
    for (const Tensor& t : ts) out.push_back(kernels::clone(t));
    return out;
}

}  // namespace

TEST_CASE("cuda optim: an overflow skips the step on the GPU with every bit kept, as on the CPU",
          "[cuda][optim]") {
    // The same sequence on both devices: an overflow first (no state yet),
    // clean, overflow (state kept), clean, clean. The GPU's skipped steps
    // change no bit; the scale and the counters equal the CPU's; the
    // parameters equal them bit for bit where no norm is involved (SGD,
    // AdamW: the bias corrections from the device's own step counts) and to
    // f64-order rounding for LAMB and LARS.
    const std::string pattern = "o.o..";
    for (const std::string kind : {"SGD", "AdamW", "LAMB", "LARS"}) {
        INFO(kind);
        const std::vector<Tensor> pc = scaler_params(Device::cpu()), pg = scaler_params(kGpu);
        auto oc = scaler_optimizer(kind, pc), og = scaler_optimizer(kind, pg);
        amp::GradScaler sc({.init_scale = 8.0, .growth_interval = 2}),
            sg({.init_scale = 8.0, .growth_interval = 2});
        for (size_t k = 0; k < pattern.size(); ++k) {
            INFO("step " << k);
            const double scale = sc.get_scale();
            REQUIRE(sg.get_scale() == scale);
            for (size_t i = 0; i < pc.size(); ++i) {
                const Tensor g = mul(random_tensor(pc[i].shape(), DType::f32, 80 + 10 * k + i), scale);
                pc[i].set_grad(g);
                pg[i].set_grad(g.to(kGpu));
            }
            if (pattern[k] == 'o') {  // deep in the tensor of two chunks
                pc[2].grad().set({18000}, INFINITY);
                kernels::fill(pg[2].grad().narrow(0, 18000, 1), INFINITY);
            }
            const std::vector<Tensor> p_before = clones(pg), s_before = optimizer_state(*og);
            const amp::StepResult rc = sc.step(*oc), rg = sg.step(*og);
            CHECK_FALSE(rg.known());
            sc.update();
            sg.update();
            CHECK(bool(rg) == (pattern[k] != 'o'));
            CHECK(bool(rc) == bool(rg));
            if (pattern[k] == 'o') {
                check_bits(pg, p_before, "skipped: parameter");
                check_bits(optimizer_state(*og), s_before, "skipped: state");
            }
            oc->zero_grad();
            og->zero_grad();
        }
        CHECK(sg.get_scale() == sc.get_scale());
        CHECK(sg.growth_tracker() == sc.growth_tracker());
        CHECK(sg.skipped() == 2);
        CHECK(og->steps() == 3);
        CHECK(og->state_json() == oc->state_json());  // the step counts read back
        if (kind == "SGD" || kind == "AdamW") {
            check_bits(pg, pc, "parameter");
            check_bits(optimizer_state(*og), optimizer_state(*oc), "state");
        } else {
            check_close_all(pg, pc, 1e-6, 1e-6);
        }
    }
}

TEST_CASE("cuda optim: scale, backward, step and update run without a host sync", "[cuda][optim]") {
    manual_seed(4);
    std::shared_ptr<nn::Module> model = nn::mlp(20, 5);
    model->to(kGpu);
    optim::AdamW opt(optim::decay_groups(*model, 0.01), {.lr = 1e-3});
    amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 2});
    const Tensor x = random_tensor({16, 20}, DType::f32, 90).to(kGpu);
    const Tensor y = randint(0, 5, {16}).to(kGpu);
    const Tensor bias = model->parameters()[1];
    REQUIRE(bias.dim() == 1);
    host_syncs();
    for (int s = 0; s < 6; ++s) {
        scaler.scale(cross_entropy((*model)(x), y)).backward();
        if (s == 3) kernels::fill(bias.grad().narrow(0, 2, 1), NAN);  // a planted overflow
        scaler.step(opt);  // the result is not read: no sync
        scaler.update();
        opt.zero_grad();
    }
    const std::map<std::string, int64_t> syncs = host_syncs();
    for (const auto& [op, n] : syncs) INFO(op << ": " << n);
    CHECK(syncs.empty());
    // Reading afterwards (syncs allowed): 1024 → 2048 (2 clean) → 1024 (the
    // overflow at step 3) → 2048 after steps 4, 5.
    CHECK(scaler.skipped() == 1);
    CHECK(scaler.get_scale() == 2048.0);
    CHECK(scaler.growth_tracker() == 0);
    CHECK(opt.steps() == 5);
    CHECK(opt.step_calls() == 6);
}

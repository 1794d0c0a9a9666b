// The CUDA updates' own step counts and schedule tables (Note [Device step
// counts], Note [Schedule tables] in kernels/optim.h) against the CPU's: the
// next counts written in the update's last pass, for empty tensors and
// tensors split across launches too, skipped or not; the launches a step
// makes, measured (core/launch_count.h): one per group for AdamW and SGD,
// one per pass for LAMB and LARS; a loss-scaled run whose schedule comes
// from device tables equals the CPU's and makes no host sync.
#include <cstring>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);

// 300 tensors (two launches of at most 256 per pass), empty ones, and
// three spanning 2-3 chunks of 16,384.
std::vector<Shape> count_shapes() {
    std::vector<Shape> s = {{0}, {40000}, {1}, {16385}, {3, 0}, {129, 257}};
    for (int i = 0; i < 294; ++i) s.push_back({int64_t(1 + (i * 41) % 67)});
    s.push_back({0});  // an empty tensor in the second launch
    return s;
}

bool same_bits(const Tensor& a, const Tensor& b) {
    const Tensor x = a.to(Device::cpu()).contiguous(), y = b.to(Device::cpu()).contiguous();
    return x.dtype() == y.dtype() && x.shape() == y.shape() &&
           std::memcmp(x.data_ptr(), y.data_ptr(), size_t(x.numel() * dtype_size(x.dtype()))) == 0;
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (!same_bits(a[i], b[i])) {
            UNSCOPED_INFO("tensor " << i << " differs");
            return false;
        }
    return true;
}

// One update problem on `d`, with two count slots per tensor: slot p of
// tensor i at 2i + p.
struct Counted {
    kernels::UpdateTensors t;
    Tensor slots;
    void point(int64_t phase) {
        t.steps.clear();
        t.next_steps.clear();
        for (int64_t i = 0; i < int64_t(t.params.size()); ++i) {
            t.steps.push_back(slots.narrow(0, 2 * i + phase, 1));
            t.next_steps.push_back(slots.narrow(0, 2 * i + 1 - phase, 1));
        }
    }
};

Counted counted(Device d, uint64_t seed) {
    Counted c;
    const std::vector<Shape> shapes = count_shapes();
    for (size_t i = 0; i < shapes.size(); ++i) {
        c.t.params.push_back(random_tensor(shapes[i], DType::f32, seed + i).to(d));
        c.t.grads.push_back(random_tensor(shapes[i], DType::f32, seed + 1000 + i).to(d));
        c.t.state1.push_back(zeros(shapes[i], {DType::f32, d}));
        c.t.state2.push_back(zeros(shapes[i], {DType::f32, d}));
    }
    // Slot 0: counts 0..4 by tensor; slot 1 poisoned.
    std::vector<int64_t> s;
    for (size_t i = 0; i < shapes.size(); ++i) s.insert(s.end(), {int64_t(i % 5), -7});
    c.slots = from_vector<int64_t>(s, {int64_t(s.size())}).to(d);
    c.t.found_inf = zeros({1}, {DType::f32, d});
    // A schedule's tables, shorter than the counts reach: the clamp is used.
    c.t.lr_table = from_vector<double>({1e-2, 8e-3, 6e-3, 5e-3}, {4}).to(d);
    c.t.momentum_table = from_vector<double>({0.9, 0.85, 0.8, 0.85}, {4}).to(d);
    return c;
}

}  // namespace

TEST_CASE("cuda optim: next step counts in the update's own launch, as on the CPU",
          "[cuda][optim]") {
    // adam, sgd, lamb and lars in turn, one call each, the flag set on some
    // calls; the counts, the parameters and the state equal the CPU's.
    Counted c = counted(Device::cpu(), 5), g = counted(kGpu, 5);
    const std::string pattern = ".o..o...";
    int64_t phase = 0;
    for (size_t k = 0; k < pattern.size(); ++k) {
        INFO("call " << k);
        const double flag = pattern[k] == 'o' ? 1.0 : 0.0;
        kernels::fill(c.t.found_inf, flag);
        kernels::fill(g.t.found_inf, flag);
        c.point(phase);
        g.point(phase);
        for (Counted* x : {&c, &g}) {
            kernels::UpdateTensors one = x->t;
            switch (k % 4) {
                case 0:
                    kernels::adam_update(x->t, {.lr = 99, .weight_decay = 0.01},
                                         kernels::AdamDecay::decoupled);
                    break;
                case 1:
                    one.state2.clear();
                    kernels::sgd_update(one, {.lr = 99, .momentum = 0.5});
                    break;
                case 2:
                    kernels::lamb_update(x->t, {.lr = 99, .weight_decay = 0.01});
                    break;
                default:
                    one.state2.clear();
                    kernels::lars_update(one, {.lr = 99, .momentum = 0.5, .weight_decay = 1e-4});
            }
        }
        phase = 1 - phase;
        CHECK(same_bits(g.slots, c.slots));
        if (k % 4 == 0 || k % 4 == 1) {  // no norms: the CPU's bits
            CHECK(same_bits(g.t.params, c.t.params));
            CHECK(same_bits(g.t.state1, c.t.state1));
        } else {
            for (size_t i = 0; i < c.t.params.size(); ++i) {
                INFO("tensor " << i);
                check_close(g.t.params[i].to(Device::cpu()), c.t.params[i], 1e-6, 1e-6);
            }
            // The norms' f64 sums differ in order: start the next call level.
            for (size_t i = 0; i < c.t.params.size(); ++i)
                for (auto list : {&kernels::UpdateTensors::params, &kernels::UpdateTensors::state1,
                                  &kernels::UpdateTensors::state2})
                    kernels::copy((g.t.*list)[i], (c.t.*list)[i].to(kGpu));
        }
    }
    // Each count advanced by the applied calls only: 6 of 8.
    const std::vector<int64_t> s = c.slots.to_vector<int64_t>();
    for (size_t i = 0; i < c.t.params.size(); ++i)
        CHECK(s[2 * i + size_t(phase)] == int64_t(i % 5) + 6);
}

TEST_CASE("cuda optim: a step launches once per group and pass, measured", "[cuda][optim]") {
    manual_seed(3);
    std::shared_ptr<nn::Module> model = nn::mlp(20, 5);
    model->to(kGpu);
    for (const Tensor& p : model->parameters())
        p.set_grad(random_tensor(p.shape(), DType::f32, 7).to(kGpu));
    struct Case {
        const char* kind;
        int64_t per_group;
    };
    for (const Case c : {Case{"AdamW", 1}, Case{"SGD", 1}, Case{"LAMB", 3}, Case{"LARS", 3}}) {
        INFO(c.kind);
        std::unique_ptr<optim::Optimizer> opt;
        const auto groups = optim::decay_groups(*model, 0.01);  // two groups
        if (std::string(c.kind) == "AdamW")
            opt = std::make_unique<optim::AdamW>(groups, optim::AdamWOptions{});
        else if (std::string(c.kind) == "SGD")
            opt = std::make_unique<optim::SGD>(groups, optim::SGDOptions{.momentum = 0.9});
        else if (std::string(c.kind) == "LAMB")
            opt = std::make_unique<optim::LAMB>(groups, optim::LAMBOptions{});
        else
            opt = std::make_unique<optim::LARS>(groups, optim::LARSOptions{});
        opt->step();  // state made outside the count
        kernel_launches();
        opt->step();
        CHECK(kernel_launch_total() == 2 * c.per_group);
        const Tensor flag = zeros({1}, {DType::f32, kGpu});
        kernel_launches();
        opt->step_unless(flag);
        CHECK(kernel_launch_total() == 2 * c.per_group);
        kernel_launches();
    }
}

TEST_CASE("cuda optim: a loss-scaled run on device schedule tables equals the CPU's, no host sync",
          "[cuda][optim]") {
    std::shared_ptr<nn::Module> cpu = nn::mlp(20, 5), gpu = nn::mlp(20, 5);
    for (size_t i = 0; i < cpu->parameters().size(); ++i)
        kernels::copy(gpu->parameters()[i], cpu->parameters()[i]);
    gpu->to(kGpu);
    optim::AdamW oc(optim::decay_groups(*cpu, 0.01)), og(optim::decay_groups(*gpu, 0.01));
    optim::OneCycle sc(oc, {.max_lr = 1e-2, .total_steps = 8}),
        sg(og, {.max_lr = 1e-2, .total_steps = 8});
    sc.use_device_tables(9);
    sg.use_device_tables(9);
    amp::GradScaler gc({.init_scale = 64.0, .growth_interval = 2}),
        gg({.init_scale = 64.0, .growth_interval = 2});
    const std::vector<Tensor> pc = cpu->parameters(), pg = gpu->parameters();
    const std::string pattern = "..o...o...";  // 8 applied
    for (size_t k = 0; k < pattern.size(); ++k) {
        const double scale = gc.get_scale();
        for (size_t i = 0; i < pc.size(); ++i) {
            const Tensor grad =
                mul(random_tensor(pc[i].shape(), DType::f32, 60 + 10 * k + i), scale);
            pc[i].set_grad(grad);
            pg[i].set_grad(grad.to(kGpu));
        }
        if (pattern[k] == 'o') {
            pc[1].grad().set({2}, INFINITY);
            kernels::fill(pg[1].grad().narrow(0, 2, 1), INFINITY);
        }
        gc.step(oc);
        gc.update();
        host_syncs();
        gg.step(og);
        gg.update();
        CHECK(host_sync_total() == 0);
        oc.zero_grad();
        og.zero_grad();
    }
    CHECK(same_bits(pg, pc));
    CHECK(sg.steps() == 8);
    CHECK(og.lr(0) == oc.lr(0));
    CHECK(og.momentum(1) == oc.momentum(1));
    CHECK(og.state_json() == oc.state_json());
}

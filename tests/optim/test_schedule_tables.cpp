// Schedules driven from device memory (Schedule::use_device_tables, Note
// [Schedule tables] in kernels/optim.h), on the CPU: under planted overflows
// the tables give every optimizer the LRs, momenta and parameters of the
// host-driven schedule that skips those steps, bit for bit, without reading
// whether a step was applied; past the tables the last values hold; a
// schedule attached after some steps starts at its step 0; the state round
// trip continues identically; the fronts and the optimizer check what they
// are given.
#include <cmath>

#include "kernels/optim.h"
#include "optim/optim.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// Two groups (other LRs) of three tensors each, one spanning two CPU chunks.
std::vector<optim::GroupSpec> two_groups(uint64_t seed) {
    std::vector<optim::GroupSpec> out;
    for (const double lr : {0.1, 0.03}) {
        optim::GroupSpec g;
        for (const Shape& s : {Shape{7}, Shape{70001}, Shape{5, 3}})
            g.params.push_back(random_tensor(s, DType::f32, seed++, -1, 1).set_requires_grad(true));
        g.lr = lr;
        out.push_back(std::move(g));
    }
    return out;
}

std::vector<Tensor> params_of(const optim::Optimizer& opt) {
    std::vector<Tensor> out;
    for (const optim::ParamGroup& g : opt.groups())
        for (const Tensor& p : g.params) out.push_back(p);
    return out;
}

std::unique_ptr<optim::Optimizer> make(const std::string& kind, std::vector<optim::GroupSpec> gs) {
    if (kind == "SGD")
        return std::make_unique<optim::SGD>(std::move(gs), optim::SGDOptions{.momentum = 0.9});
    if (kind == "AdamW")
        return std::make_unique<optim::AdamW>(std::move(gs), optim::AdamWOptions{});
    if (kind == "LAMB")
        return std::make_unique<optim::LAMB>(std::move(gs),
                                             optim::LAMBOptions{.weight_decay = 0.01});
    return std::make_unique<optim::LARS>(std::move(gs), optim::LARSOptions{.weight_decay = 1e-4});
}

// Warm-up, then a one-cycle that cycles the momentum (or β1) per group.
std::unique_ptr<optim::Schedule> schedule(optim::Optimizer& opt) {
    return std::make_unique<optim::Warmup>(
        std::make_unique<optim::OneCycle>(
            opt, optim::OneCycleOptions{.max_lr = {0.05, 0.02}, .total_steps = 8}),
        optim::WarmupOptions{.steps = 2});
}

// Gradient k of the sequence for every parameter, times `scale`; with
// `overflow`, an inf deep in the large tensor of group 1.
void set_grads(const std::vector<Tensor>& ps, uint64_t k, double scale, bool overflow) {
    for (size_t i = 0; i < ps.size(); ++i)
        ps[i].set_grad(mul(random_tensor(ps[i].shape(), DType::f32, 700 + 10 * k + i), scale));
    if (overflow) ps[4].grad().set({60000}, INFINITY);
}

// Whether two lists of tensors hold the same values (bit for bit up to NaN),
// naming the first tensor that differs (a bool: Catch would print the values).
bool same_values(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
        if (values(a[i]) != values(b[i])) {
            UNSCOPED_INFO("tensor " << i << " differs");
            return false;
        }
    return true;
}

}  // namespace

TEST_CASE("schedule tables: planted overflows give the host-driven schedule's LRs and parameters",
          "[optim][schedule]") {
    // Run A: the host-driven schedule, stepped with what GradScaler::step
    // returned (the flag read on the host). Run B: the schedule's tables,
    // the loop never reading the flag. 14 calls, 4 of them overflowing: 10
    // applied steps, 2 of warm-up and the one-cycle's 8 (t = 10 is its end).
    const std::string pattern = "..o.o...oo....";
    for (const std::string kind : {"SGD", "AdamW", "LAMB", "LARS"}) {
        INFO(kind);
        auto a = make(kind, two_groups(10)), b = make(kind, two_groups(10));
        auto sa = schedule(*a), sb = schedule(*b);
        sb->use_device_tables(11);
        CHECK(sb->on_device());
        CHECK(b->has_schedule_tables(0));
        amp::GradScaler ga({.init_scale = 8.0, .growth_interval = 3}),
            gb({.init_scale = 8.0, .growth_interval = 3});
        const std::vector<Tensor> pa = params_of(*a), pb = params_of(*b);
        for (size_t k = 0; k < pattern.size(); ++k) {
            INFO("call " << k);
            set_grads(pa, k, ga.get_scale(), pattern[k] == 'o');
            set_grads(pb, k, gb.get_scale(), pattern[k] == 'o');
            sa->step(ga.step(*a));  // reads the flag
            ga.update();
            const amp::StepResult rb = gb.step(*b);  // not read
            gb.update();
            sb->step(rb);  // does nothing on the device: only to show it is harmless
            CHECK(same_values(pb, pa));
            CHECK(sb->steps() == sa->steps());
            for (size_t g = 0; g < 2; ++g) {
                CHECK(b->lr(g) == a->lr(g));
                CHECK(b->momentum(g) == a->momentum(g));
                CHECK(sb->lr(g) == sa->lr(g));
            }
            a->zero_grad();
            b->zero_grad();
        }
        CHECK(sa->steps() == 10);
        CHECK(b->steps() == 10);
        // The LR the next step takes is the schedule's last: OneCycle's minimum.
        CHECK(b->lr(0) == sa->lr_at(10, 0));
        CHECK(sb->state_json() == sa->state_json());
        CHECK(b->state_json() == a->state_json());  // the hyper-parameters in effect
        std::vector<Tensor> state_a, state_b;
        for (const auto& [name, t] : a->state_tensors()) state_a.push_back(t);
        for (const auto& [name, t] : b->state_tensors()) state_b.push_back(t);
        CHECK(same_values(state_b, state_a));
    }
}

TEST_CASE("schedule tables: past the table the last values hold, by hand is refused",
          "[optim][schedule]") {
    // f64 SGD without momentum: p −= lr·g exactly as written here.
    Tensor w = random_tensor({5}, DType::f64, 31).set_requires_grad(true);
    optim::SGD opt({w}, {.lr = 0.4});
    optim::StepLR s(opt, {.step_size = 1, .gamma = 0.5});
    s.use_device_tables(3);  // steps 0, 1, 2: 0.4, 0.2, 0.1
    std::vector<double> p = values(w);
    for (int t = 0; t < 6; ++t) {
        CHECK(opt.lr(0) == 0.4 * std::pow(0.5, std::min(t, 2)));
        CHECK(s.lr(0) == opt.lr(0));
        const Tensor g = random_tensor({5}, DType::f64, uint64_t(32 + t));
        w.set_grad(g);
        const std::vector<double> gv = values(g);
        for (size_t i = 0; i < p.size(); ++i) p[i] = p[i] - opt.lr(0) * gv[i];
        opt.step();
        s.step();  // nothing: the tables follow the optimizer's counts
        check_close(w, p, 1e-15, 1e-16);
        CHECK(s.steps() == t + 1);
    }
    REQUIRE_THROWS_WITH_MSG(opt.set_lr(0, 0.3), "group 0 takes its LR from a schedule's table");
    REQUIRE_THROWS_WITH_MSG(opt.set_schedule_tables(0, {0.1, -1}, {}),
                            "LR table entry 1 must be finite and >= 0, got -1");
    REQUIRE_THROWS_WITH_MSG(opt.set_schedule_tables(0, {0.1, 0.2}, {0.9}),
                            "a momentum table of the same size or none");
    REQUIRE_THROWS_WITH_MSG(s.use_device_tables(0), "use_device_tables needs length >= 1");
    opt.clear_schedule_tables();
    CHECK(!opt.has_schedule_tables(0));
    // Tables past a schedule's end are refused (6 steps taken: origin 6).
    optim::OneCycle one(opt, {.max_lr = 0.1, .total_steps = 4});
    REQUIRE_THROWS_WITH_MSG(one.use_device_tables(12), "OneCycle: step 5 is past total_steps = 4");
    CHECK(!one.on_device());
    CHECK(!opt.has_schedule_tables(0));
    opt.set_lr(0, 0.3);
    CHECK(opt.lr(0) == 0.3);
    // The fronts: tables need step counts, and are f64 vectors on the device.
    const kernels::UpdateTensors plain{{w}, {w.grad()}};
    kernels::UpdateTensors t = plain;
    t.lr_table = from_vector<double>({0.1});
    REQUIRE_THROWS_WITH_MSG(kernels::sgd_update(t, {}),
                            "a schedule table needs the parameters' step counts");
    t = plain;
    t.steps = {zeros({1}, {DType::i64})};
    t.next_steps = {zeros({1}, {DType::i64})};
    t.lr_table = from_vector<float>({0.1f});
    REQUIRE_THROWS_WITH_MSG(kernels::sgd_update(t, {}),
                            "a schedule table must be a non-empty contiguous f64 vector");
    t.lr_table = from_vector<double>({0.1, 0.2});
    t.momentum_table = from_vector<double>({0.9}, {1});
    REQUIRE_THROWS_WITH_MSG(kernels::sgd_update(t, {}),
                            "the LR table has 2 entries, the momentum table 1");
}

TEST_CASE("schedule tables: a schedule attached after some steps starts at its step 0, and resumes",
          "[optim][schedule]") {
    // Three steps without a schedule, then StepLR over the tables (A) and on
    // the host (B): the same parameters. Then A's state, saved after more
    // steps, loaded into a fresh optimizer and schedule with tables (C)
    // continues as A does.
    auto grads = [](const std::vector<Tensor>& ps, uint64_t k) {
        for (size_t i = 0; i < ps.size(); ++i)
            ps[i].set_grad(random_tensor(ps[i].shape(), DType::f32, 900 + 10 * k + i));
    };
    auto params = [] {
        std::vector<Tensor> ps;
        for (uint64_t i = 0; i < 3; ++i)
            ps.push_back(
                random_tensor({int64_t(4 + 3 * i)}, DType::f32, 40 + i).set_requires_grad(true));
        return ps;
    };
    const std::vector<Tensor> pa = params(), pb = params(), pc = params();
    optim::AdamW a(pa, {.lr = 0.02}), b(pb, {.lr = 0.02});
    for (uint64_t k = 0; k < 3; ++k) {
        grads(pa, k);
        grads(pb, k);
        a.step();
        b.step();
    }
    optim::StepLR sa(a, {.step_size = 2, .gamma = 0.5}), sb(b, {.step_size = 2, .gamma = 0.5});
    sa.use_device_tables(20);
    for (uint64_t k = 3; k < 8; ++k) {
        grads(pa, k);
        grads(pb, k);
        a.step();
        b.step();
        sb.step();
        CHECK(sa.steps() == sb.steps());
        CHECK(a.lr(0) == b.lr(0));
        CHECK(same_values(pa, pb));
    }
    CHECK(sa.steps() == 5);
    CHECK(a.lr(0) == 0.02 * 0.25);
    // Resume into C: the optimizer's state first, then the schedule's.
    for (size_t i = 0; i < pa.size(); ++i) kernels::copy(pc[i], pa[i]);
    optim::AdamW c(pc, {.lr = 0.7});
    optim::StepLR sc(c, {.step_size = 2, .gamma = 0.5});
    sc.use_device_tables(20);
    c.load_state(a.state_tensors(), a.state_json());
    sc.load_state(sa.state_json());
    CHECK(sc.steps() == 5);
    CHECK(c.lr(0) == a.lr(0));
    for (uint64_t k = 8; k < 12; ++k) {
        grads(pa, k);
        grads(pc, k);
        a.step();
        c.step();
        CHECK(same_values(pc, pa));
        CHECK(c.lr(0) == a.lr(0));
    }
    CHECK(sc.state_json() == sa.state_json());
}

// Every optimizer against its update rule evaluated in f64 in the test, over
// several steps with fresh random gradients, in f32 and f64; groups with their
// own hyper-parameters; parameters without gradients; thread independence.
#include <omp.h>

#include "kernels/optim.h"
#include "optim/optim.h"
#include "support/optim_ref.h"

using namespace ember;
using namespace ember::test;
using namespace ember::test::optim_ref;

namespace {

double rtol(DType t) { return t == DType::f64 ? 1e-11 : 2e-5; }
double atol(DType t) { return t == DType::f64 ? 1e-12 : 2e-6; }

void check_params(const std::vector<Tensor>& params, const std::vector<Ref>& refs) {
    for (size_t i = 0; i < params.size(); ++i) {
        INFO("parameter " << i << " " << shape_str(params[i].shape()));
        check_close(params[i], refs[i].p, rtol(params[i].dtype()), atol(params[i].dtype()));
    }
}

}  // namespace

TEST_CASE("optim: SGD follows PyTorch's rule", "[optim]") {
    struct Case {
        optim::SGDOptions o;
    };
    const Case cases[] = {{{.lr = 0.1}},
                          {{.lr = 0.05, .momentum = 0.9}},
                          {{.lr = 0.05, .momentum = 0.9, .dampening = 0.3, .weight_decay = 0.01}},
                          {{.lr = 0.02, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true}}};
    for (DType t : {DType::f32, DType::f64})
        for (const Case& c : cases) {
            INFO(dtype_name(t) << " momentum " << c.o.momentum << " nesterov " << c.o.nesterov);
            const std::vector<Tensor> ps = make_params(t, 1);
            optim::SGD opt(ps, c.o);
            const auto refs = run(
                ps, 5, [&] { CHECK(opt.step()); },
                [&](Ref& r, const std::vector<double>& g) {
                    sgd(r, g, c.o.lr, c.o.momentum, c.o.dampening, c.o.weight_decay, c.o.nesterov);
                });
            check_params(ps, refs);
            CHECK(opt.steps() == 5);
        }
}

TEST_CASE("optim: Adam and AdamW follow PyTorch's rule", "[optim]") {
    for (DType t : {DType::f32, DType::f64})
        for (bool decoupled : {false, true}) {
            INFO(dtype_name(t) << (decoupled ? " AdamW" : " Adam"));
            const std::vector<Tensor> ps = make_params(t, 2);
            const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-6, wd = 0.05;
            std::unique_ptr<optim::Optimizer> opt;
            if (decoupled)
                opt = std::make_unique<optim::AdamW>(
                    ps, optim::AdamWOptions{lr, b1, b2, eps, wd});
            else
                opt = std::make_unique<optim::Adam>(ps, optim::AdamOptions{lr, b1, b2, eps, wd});
            const auto refs = run(
                ps, 6, [&] { opt->step(); },
                [&](Ref& r, const std::vector<double>& g) { adam(r, g, lr, b1, b2, eps, wd, decoupled); });
            check_params(ps, refs);
        }
}

TEST_CASE("optim: AMSGrad follows PyTorch's rule and keeps max_exp_avg_sq", "[optim]") {
    for (DType t : {DType::f32, DType::f64})
        for (bool decoupled : {false, true}) {
            INFO(dtype_name(t) << (decoupled ? " AdamW" : " Adam") << " amsgrad");
            const std::vector<Tensor> ps = make_params(t, 4);
            // β2 small enough that v falls below its running maximum between steps.
            const double lr = 0.01, b1 = 0.8, b2 = 0.5, eps = 1e-6, wd = 0.05;
            std::unique_ptr<optim::Optimizer> opt;
            if (decoupled)
                opt = std::make_unique<optim::AdamW>(
                    ps, optim::AdamWOptions{lr, b1, b2, eps, wd, /*amsgrad=*/true});
            else
                opt = std::make_unique<optim::Adam>(
                    ps, optim::AdamOptions{lr, b1, b2, eps, wd, /*amsgrad=*/true});
            const auto refs = run(
                ps, 6, [&] { opt->step(); },
                [&](Ref& r, const std::vector<double>& g) {
                    adam(r, g, lr, b1, b2, eps, wd, decoupled, true);
                });
            check_params(ps, refs);
            // The third buffer is the running maximum, and plain Adam differs.
            const auto state = opt->state_tensors();
            REQUIRE(state.size() == 3 * ps.size());
            for (size_t i = 0; i < ps.size(); ++i) {
                REQUIRE(state[3 * i + 2].first == str("g0.p", i, ".max_exp_avg_sq"));
                const std::vector<double> vmax = values(state[3 * i + 2].second);
                for (size_t k = 0; k < vmax.size(); ++k)
                    REQUIRE(vmax[k] == Approx(refs[i].vmax[k]).epsilon(rtol(t)).margin(1e-30));
            }
            bool below = false;  // some v under its maximum: the rule was exercised
            for (const Ref& r : refs)
                for (size_t k = 0; k < r.v.size(); ++k) below = below || r.v[k] < 0.9 * r.vmax[k];
            CHECK(below);
        }
}

TEST_CASE("optim: 1 - beta and the bias corrections are formed in f64", "[optim]") {
    // With beta2 near 1, 1 - beta2 taken from an already rounded f32 beta2 is
    // off by 1.3e-5 (0.999), 1.7e-4 (0.9999) and 1.4e-3 (0.99999) relative
    // (Note [Coefficients in f64]): exp_avg_sq after a few f32 steps must
    // match the f64 rule far closer than that, and so must the parameters.
    for (const double b2 : {0.999, 0.9999, 0.99999}) {
        INFO("beta2 " << b2);
        const std::vector<Tensor> ps = make_params(DType::f32, 6);
        const double lr = 1e-3, b1 = 0.9, eps = 1e-8;
        optim::AdamW opt(ps, optim::AdamWOptions{lr, b1, b2, eps, 0.0});
        const auto refs = run(
            ps, 8, [&] { opt.step(); },
            [&](Ref& r, const std::vector<double>& g) { adam(r, g, lr, b1, b2, eps, 0, true); });
        const auto state = opt.state_tensors();
        REQUIRE(state.size() == 2 * ps.size());
        for (size_t i = 0; i < ps.size(); ++i) {
            INFO("parameter " << i);
            check_close(state[2 * i + 1].second, refs[i].v, 3e-6, 1e-30);
            check_close(state[2 * i].second, refs[i].m, 3e-6, 1e-7);
            // The first steps move p by ~lr: their error shows relative to lr.
            check_close(ps[i], refs[i].p, 1e-6, lr * 1e-3);
        }
        // LAMB forms the same coefficients.
        const std::vector<Tensor> qs = make_params(DType::f32, 6);
        optim::LAMB lamb(qs, optim::LAMBOptions{.lr = lr, .beta1 = b1, .beta2 = b2});
        const auto lrefs = run(
            qs, 8, [&] { lamb.step(); },
            [&](Ref& r, const std::vector<double>& g) { optim_ref::lamb(r, g, lr, b1, b2, 1e-6, 0); });
        const auto lstate = lamb.state_tensors();
        for (size_t i = 0; i < qs.size(); ++i) check_close(lstate[2 * i + 1].second, lrefs[i].v, 3e-6, 1e-30);
    }
}

TEST_CASE("optim: LAMB and LARS follow You et al.", "[optim]") {
    for (DType t : {DType::f32, DType::f64}) {
        INFO(dtype_name(t));
        {
            const std::vector<Tensor> ps = make_params(t, 3);
            optim::LAMB opt(ps, {.lr = 0.01, .beta1 = 0.9, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1});
            const auto refs = run(ps, 4, [&] { opt.step(); }, [&](Ref& r, const std::vector<double>& g) {
                lamb(r, g, 0.01, 0.9, 0.99, 1e-6, 0.1);
            });
            check_params(ps, refs);
        }
        for (bool exclude : {false, true}) {
            const std::vector<Tensor> ps = make_params(t, 4);
            optim::LARS opt(ps, {.lr = 0.5, .momentum = 0.9, .weight_decay = 0.01,
                                 .trust_coefficient = 0.02});
            opt.exclude(0, exclude);
            const auto refs = run(ps, 4, [&] { opt.step(); }, [&](Ref& r, const std::vector<double>& g) {
                lars(r, g, 0.5, 0.9, 0.01, 0.02, 1e-8, exclude);
            });
            check_params(ps, refs);
        }
    }
}

TEST_CASE("optim: a LAMB trust ratio clamps at 10 and is 1 for a zero tensor", "[optim]") {
    // ‖p‖ = 30 (> 10): the ratio is 10 / ‖r‖, not 30 / ‖r‖.
    Tensor big = full({100}, 3.0).set_requires_grad(true);
    Tensor zero = zeros({4}).set_requires_grad(true);
    optim::LAMB opt({big, zero}, {.lr = 0.1});
    const auto refs = run({big, zero}, 2, [&] { opt.step(); },
                          [&](Ref& r, const std::vector<double>& g) { lamb(r, g, 0.1, 0.9, 0.999, 1e-6, 0); });
    check_params({big, zero}, refs);
}

TEST_CASE("optim: groups keep their own hyper-parameters", "[optim]") {
    const std::vector<Tensor> a = make_params(DType::f32, 5), b = make_params(DType::f32, 9);
    optim::AdamW opt({{a}, {b, 0.1, 0.0}}, {.lr = 0.01, .weight_decay = 0.2});
    REQUIRE(opt.groups().size() == 2);
    CHECK(opt.lr(0) == 0.01);
    CHECK(opt.lr(1) == 0.1);
    std::vector<Tensor> all = a;
    all.insert(all.end(), b.begin(), b.end());
    size_t k = 0;
    const auto refs = run(all, 3, [&] { opt.step(); }, [&](Ref& r, const std::vector<double>& g) {
        const bool first = (k++ % all.size()) < a.size();
        adam(r, g, first ? 0.01 : 0.1, 0.9, 0.999, 1e-8, first ? 0.2 : 0.0, true);
    });
    check_params(all, refs);
}

TEST_CASE("optim: parameters without a gradient are skipped and keep their state", "[optim]") {
    // Parameter 1 gets its first gradient at step 3, parameter 0 none at steps
    // 3 and 5: each keeps its own count (and the slot it is in, Note [Device
    // step counts]), so the bias corrections are those of its own steps.
    const std::vector<Tensor> ps = make_params(DType::f32, 6);
    optim::Adam opt(ps, {.lr = 0.05});
    const std::vector<double> before = values(ps[1]);
    std::vector<Ref> refs;
    for (const Tensor& p : ps) refs.push_back(ref_of(p));
    for (int s = 0; s < 6; ++s) {
        for (size_t i = 0; i < ps.size(); ++i) {
            if ((i == 1 && s < 2) || (i == 0 && (s == 3 || s == 5))) {
                ps[i].set_grad({});
                continue;
            }
            const Tensor g = random_tensor(ps[i].shape(), DType::f32, 500 + uint64_t(10 * s + i));
            ps[i].set_grad(g);
            adam(refs[i], values(g), 0.05, 0.9, 0.999, 1e-8, 0, false);
        }
        opt.step();
        if (s < 2) CHECK(values(ps[1]) == before);
    }
    check_params(ps, refs);
    CHECK(opt.state_json().find("\"param_steps\":[4,4,6]") != std::string::npos);
}

TEST_CASE("optim: results do not depend on the thread count", "[optim]") {
    auto run_with = [](int threads) {
        const int keep = omp_get_max_threads();
        omp_set_num_threads(threads);
        const std::vector<Tensor> ps = make_params(DType::f32, 7);
        optim::LAMB opt(ps, {.lr = 0.01, .weight_decay = 0.01});
        run(ps, 3, [&] { opt.step(); }, [](Ref&, const std::vector<double>&) {});
        omp_set_num_threads(keep);
        std::vector<std::vector<double>> out;
        for (const Tensor& p : ps) out.push_back(values(p));
        return out;
    };
    CHECK(run_with(1) == run_with(2));
    CHECK(run_with(1) == run_with(3));
}

TEST_CASE("optim: zero_grad clears to none or to zeros", "[optim]") {
    const std::vector<Tensor> ps = make_params(DType::f32, 8);
    optim::SGD opt(ps, {.lr = 0.1});
    for (const Tensor& p : ps) p.set_grad(ones_like(p));
    opt.zero_grad(false);
    for (const Tensor& p : ps) CHECK(values(p.grad()) == std::vector<double>(size_t(p.numel()), 0.0));
    opt.zero_grad();
    for (const Tensor& p : ps) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("optim: bad options and groups are errors", "[optim]") {
    const std::vector<Tensor> ps = make_params(DType::f32, 10);
    REQUIRE_THROWS_WITH_MSG(optim::SGD(ps, {.lr = -1}), "SGD: need lr >= 0");
    REQUIRE_THROWS_WITH_MSG(optim::SGD(ps, {.lr = 0.1, .nesterov = true}),
                            "Nesterov momentum needs momentum > 0");
    REQUIRE_THROWS_WITH_MSG(optim::AdamW(ps, {.beta1 = 1.0}), "0 <= beta1, beta2 < 1");
    REQUIRE_THROWS_WITH_MSG(optim::AdamW({{ps}, {{ps[0]}}}), "appears twice");
    REQUIRE_THROWS_WITH_MSG(optim::AdamW(std::vector<Tensor>{zeros({3}, {DType::i64})}),
                            "must be a floating tensor");
    optim::AdamW opt(ps);
    REQUIRE_THROWS_WITH_MSG(opt.set_lr(3, 0.1), "AdamW: no group 3");
    REQUIRE_THROWS_WITH_MSG(opt.set_momentum(0, 1.5), "beta1 must be in [0, 1)");
}

TEST_CASE("optim: the fused update fronts check what they are given", "[optim]") {
    const Tensor p = zeros({7}), g = zeros({7}), m = zeros({7}), v = zeros({7});
    using kernels::UpdateTensors;
    REQUIRE_THROWS_WITH_MSG(kernels::adam_update(UpdateTensors{{p}, {zeros({8})}, {m}, {v}}, {}, kernels::AdamDecay::decoupled),
                            "adam_update: gradient 0 must be a contiguous tensor of shape [7]");
    REQUIRE_THROWS_WITH_MSG(kernels::adam_update(UpdateTensors{{p}, {g}, {m}, {}}, {}, kernels::AdamDecay::decoupled),
                            "adam_update: expected 2 state buffer(s) per parameter");
    REQUIRE_THROWS_WITH_MSG(
        kernels::adam_update(UpdateTensors{{p}, {g}, {m}, {zeros({7}, {DType::f64})}}, {}, kernels::AdamDecay::decoupled),
        "state buffer 0 must be f32");
    REQUIRE_THROWS_WITH_MSG(
        kernels::sgd_update(UpdateTensors{{zeros({7}, {DType::f64})}, {zeros({7}, {DType::bf16})}}, {}),
        "cannot update parameter f64 [7] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::sgd_update(UpdateTensors{{p}, {g}, {}, {}, {}, {zeros({7}, {DType::f64})}}, {}),
        "copy 0 must be f16 or bf16");
    REQUIRE_THROWS_WITH_MSG(kernels::adam_update(UpdateTensors{{p}, {g}, {m}, {v}}, {.amsgrad = true}, kernels::AdamDecay::decoupled),
                            "adam_update: expected 3 state buffer(s) per parameter");
    REQUIRE_THROWS_WITH_MSG(kernels::adam_update(UpdateTensors{{p}, {g}, {m}, {v}}, {}, kernels::AdamDecay::decoupled, /*step=*/0),
                            "step must be >= 1");
}

TEST_CASE("optim: decay_groups puts matrices in the decay group", "[optim]") {
    auto model = nn::mlp(8, 3);
    const auto groups = optim::decay_groups(*model, 0.05);
    REQUIRE(groups.size() == 2);
    CHECK(groups[0].weight_decay == 0.05);
    CHECK(groups[1].weight_decay == 0.0);
    for (const Tensor& p : groups[0].params) CHECK(p.dim() == 2);
    for (const Tensor& p : groups[1].params) CHECK(p.dim() == 1);
    CHECK(groups[0].params.size() + groups[1].params.size() == model->parameters().size());
}

// The rest of the optimizer machinery: the chunk table, state saved and
// restored (resuming is bit-exact; a bad file changes nothing), master weights
// with low-precision copies written in the same pass (nearest and stochastic
// rounding), clipping by the global norm, the loss scaler, accumulation.
#include <cstdio>
#include <filesystem>

#include "kernels/optim.h"
#include "optim/optim.h"
#include "support/optim_ref.h"

using namespace ember;
using namespace ember::test;
using namespace ember::test::optim_ref;

namespace {
std::string temp_path(const std::string& name) {
    return (std::filesystem::temp_directory_path() / ("ember_optim_" + name)).string();
}
}  // namespace

TEST_CASE("optim: the chunk table covers every element once, in order", "[optim]") {
    const std::vector<int64_t> numels = {5, 0, 10, 3};
    const auto t = kernels::chunk_table(numels, 4);
    // 5 -> [0,4) [4,5); 0 -> none; 10 -> [0,4) [4,8) [8,10); 3 -> [0,3)
    REQUIRE(t.size() == 6);
    std::vector<int64_t> covered(numels.size(), 0);
    int64_t prev_tensor = -1, next = 0;
    for (const kernels::Chunk& c : t) {
        if (c.tensor != prev_tensor) next = 0;
        CHECK(c.begin == next);
        CHECK(c.count > 0);
        CHECK(c.count <= 4);
        next = c.begin + c.count;
        covered[size_t(c.tensor)] += c.count;
        prev_tensor = c.tensor;
    }
    CHECK(covered == numels);
    REQUIRE_THROWS_WITH_MSG(kernels::chunk_table(numels, 0), "chunk size must be positive");
}

TEST_CASE("optim: state saved after 3 steps resumes bit-exactly", "[optim]") {
    const std::string path = temp_path("state.safetensors");
    auto train = [](optim::Optimizer& opt, const std::vector<Tensor>& ps, int from, int to) {
        for (int s = from; s < to; ++s) {
            for (size_t i = 0; i < ps.size(); ++i)
                ps[i].set_grad(random_tensor(ps[i].shape(), ps[i].dtype(), uint64_t(1000 + 10 * s + i)));
            opt.step();
        }
    };
    for (const bool amsgrad : {false, true}) {
        INFO("amsgrad " << amsgrad);
        // β2 = 0.5 with AMSGrad: max_exp_avg_sq differs from exp_avg_sq, so
        // a resume that lost it would part ways.
        const optim::AdamWOptions o{.lr = 0.01, .beta2 = amsgrad ? 0.5 : 0.999, .amsgrad = amsgrad};
        const std::vector<Tensor> a = make_params(DType::f32, 20);
        optim::AdamW straight(a, o);
        train(straight, a, 0, 5);

        const std::vector<Tensor> b = make_params(DType::f32, 20);
        {
            optim::AdamW first(b, o);
            train(first, b, 0, 3);
            first.set_lr(0, 0.01);  // unchanged, but saved with the groups
            first.save(path);
            CHECK(first.state_tensors().size() == (amsgrad ? 3 : 2) * b.size());
        }
        optim::AdamWOptions other = o;
        other.lr = 0.5;  // the file's lr wins, and so does its amsgrad
        other.amsgrad = !amsgrad;
        optim::AdamW resumed(b, other);
        resumed.load(path);
        CHECK(resumed.steps() == 3);
        CHECK(resumed.lr(0) == 0.01);
        CHECK(resumed.options(0).amsgrad == amsgrad);
        train(resumed, b, 3, 5);
        for (size_t i = 0; i < a.size(); ++i) CHECK(values(a[i]) == values(b[i]));
        std::remove(path.c_str());
    }
}

TEST_CASE("optim: state saved after a skipped step resumes with the right counts", "[optim]") {
    // Steps with the found-inf flag set write each parameter's count into the
    // other slot unchanged; saving reads the slot now current. A run saved
    // right after a skipped step (and once more after a skipped step at
    // the very start, before any state exists), loaded into fresh
    // optimizers, continues bit for bit as the straight run: the bias
    // corrections (AdamW) and the first step (SGD) come from the right counts.
    const std::string path = temp_path("skipped.safetensors");
    const std::string pattern = "o.o..o.";  // o: the flag set
    for (const std::string kind : {"AdamW", "SGD"}) {
        auto make = [&](const std::vector<Tensor>& ps) -> std::unique_ptr<optim::Optimizer> {
            if (kind == "AdamW") return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01});
            return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.05, .momentum = 0.9});
        };
        auto train = [&](optim::Optimizer& opt, const std::vector<Tensor>& ps, size_t from, size_t to) {
            const Tensor flag = zeros({1});
            for (size_t s = from; s < to; ++s) {
                for (size_t i = 0; i < ps.size(); ++i)
                    ps[i].set_grad(random_tensor(ps[i].shape(), DType::f32, 3000 + 10 * s + i));
                kernels::fill(flag, pattern[s] == 'o' ? 1.0 : 0.0);
                opt.step_unless(flag);
            }
        };
        for (const size_t cut : {size_t(1), size_t(3), size_t(6)}) {  // each right after an 'o'
            INFO(kind << ", saved after step " << cut);
            const std::vector<Tensor> a = make_params(DType::f32, 30), b = make_params(DType::f32, 30);
            auto straight = make(a);
            train(*straight, a, 0, pattern.size());
            {
                auto first = make(b);
                train(*first, b, 0, cut);
                first->save(path);
            }
            auto resumed = make(b);
            resumed->load(path);
            CHECK(resumed->steps() == int64_t(cut) - (cut >= 6 ? 3 : cut >= 3 ? 2 : 1));
            train(*resumed, b, cut, pattern.size());
            for (size_t i = 0; i < a.size(); ++i) {
                const bool same = values(a[i]) == values(b[i]);
                CHECK(same);
            }
            CHECK(resumed->state_json() == straight->state_json());
            CHECK(resumed->steps() == 4);
        }
    }
    std::remove(path.c_str());
}

TEST_CASE("optim: a state that does not fit is an error and changes nothing", "[optim]") {
    const std::vector<Tensor> ps = make_params(DType::f32, 21);
    optim::AdamW opt(ps, {.lr = 0.01});
    for (const Tensor& p : ps) p.set_grad(ones_like(p));
    opt.step();
    const auto tensors = opt.state_tensors();
    const std::string json = opt.state_json();

    optim::SGD sgd(ps, {.lr = 0.1});
    REQUIRE_THROWS_WITH_MSG(sgd.load_state(tensors, json), "saved by AdamW, cannot be loaded into SGD");

    optim::AdamW other(make_params(DType::f32, 22), {.lr = 0.2});
    auto missing = tensors;
    missing.pop_back();
    REQUIRE_THROWS_WITH_MSG(other.load_state(missing, json), "is missing");
    auto extra = tensors;
    extra.emplace_back("g0.p9.exp_avg", zeros({1}));
    REQUIRE_THROWS_WITH_MSG(other.load_state(extra, json), "do not belong to any parameter");
    auto wrong = tensors;
    wrong[0].second = zeros({99});
    REQUIRE_THROWS_WITH_MSG(other.load_state(wrong, json), "expected the shape of parameter");
    REQUIRE_THROWS_WITH_MSG(other.load_state(tensors, "{not json"), "does not parse");
    std::string bad_lr = json;
    bad_lr.replace(bad_lr.find("\"lr\":"), 5, "\"lr\":-");
    REQUIRE_THROWS_WITH_MSG(other.load_state(tensors, bad_lr), "'lr' = -");
    optim::AdamW fewer(std::vector<Tensor>{ps[0]});
    REQUIRE_THROWS_WITH_MSG(fewer.load_state(tensors, json), "parameters saved but 1 here");
    // None of that changed `other`.
    CHECK(other.steps() == 0);
    CHECK(other.lr(0) == 0.2);
    CHECK(other.state_tensors().empty());
}

TEST_CASE("optim: a group's saved hyper-parameters are its optimizer's own", "[optim]") {
    const std::vector<Tensor> ps = make_params(DType::f32, 23);
    for (const Tensor& p : ps) p.set_grad(ones_like(p));
    optim::LARS lars(ps, {.lr = 0.3, .trust_coefficient = 0.02});
    lars.exclude(0);
    lars.step();
    const std::string json = lars.state_json();
    CHECK(json.find("\"trust_coefficient\":0.02") != std::string::npos);
    CHECK(json.find("\"exclude_from_lars\":true") != std::string::npos);
    CHECK(json.find("beta1") == std::string::npos);  // no other optimizer's fields
    optim::LARS back(ps, {.lr = 0.1});
    back.load_state(lars.state_tensors(), json);
    CHECK(back.options(0).lr == 0.3);
    CHECK(back.options(0).trust_coefficient == 0.02);
    CHECK(back.options(0).exclude);

    // A file from before the structs were per optimizer held every field of
    // every optimizer, and no amsgrad: the fields of this one are read, the
    // rest ignored, amsgrad off.
    optim::AdamW adamw(ps, {.lr = 0.01, .beta2 = 0.99});
    adamw.step();
    std::string old = adamw.state_json();
    const std::string amsgrad = "\"amsgrad\":false,";
    REQUIRE(old.find(amsgrad) != std::string::npos);
    old.replace(old.find(amsgrad), amsgrad.size(),
                "\"dampening\":0.0,\"exclude_from_lars\":false,\"momentum\":0.0,"
                "\"nesterov\":false,\"trust_coefficient\":0.001,");
    optim::AdamW resumed(ps, {.lr = 0.5, .amsgrad = true});
    resumed.load_state(adamw.state_tensors(), old);
    CHECK(resumed.options(0).lr == 0.01);
    CHECK(resumed.options(0).beta2 == 0.99);
    CHECK_FALSE(resumed.options(0).amsgrad);
}

TEST_CASE("optim: master weights update f32 copies and write the bf16 model in one pass", "[optim]") {
    auto model = nn::mlp(16, 4);
    const std::vector<Tensor> params = model->parameters();
    std::vector<std::vector<double>> start;
    for (const Tensor& p : params) start.push_back(values(p));
    optim::AdamW opt(optim::master_weights(*model, DType::bf16), {.lr = 0.01, .weight_decay = 0.0});
    for (const Tensor& p : params) REQUIRE(p.dtype() == DType::bf16);
    const auto& g = opt.groups()[0];
    REQUIRE(g.params.size() == params.size());
    for (size_t i = 0; i < params.size(); ++i) {
        CHECK(g.params[i].dtype() == DType::f32);
        CHECK(values(g.params[i]) == start[i]);  // exact copies of the f32 weights
    }
    std::vector<Ref> refs;
    for (size_t i = 0; i < params.size(); ++i) refs.push_back(ref_of(g.params[i]));
    for (int s = 0; s < 3; ++s) {
        for (size_t i = 0; i < params.size(); ++i) {
            const Tensor grad = random_tensor(params[i].shape(), DType::bf16, uint64_t(300 + 7 * s + i));
            params[i].set_grad(grad);
            adam(refs[i], values(grad), 0.01, 0.9, 0.999, 1e-8, 0, true);
        }
        opt.step();
    }
    for (size_t i = 0; i < params.size(); ++i) {
        check_close(g.params[i], refs[i].p, 2e-5, 2e-6);
        // The model holds exactly the masters rounded to bf16 (nearest even).
        CHECK(values(params[i]) == values(g.params[i].to(DType::bf16)));
    }
    REQUIRE_THROWS_WITH_MSG(optim::master_weights(*model, DType::bf16), "must be f32");
    REQUIRE_THROWS_WITH_MSG(optim::master_weights(*nn::mlp(4, 2), DType::f32), "f16 or bf16");
}

TEST_CASE("optim: stochastic rounding of bf16 copies is unbiased and seeded", "[optim]") {
    // Masters all equal to x, between two bf16 neighbours lo < x < hi: with a
    // zero update the copy of each element is lo or hi, hi with probability
    // (x - lo) / (hi - lo), so the mean over many elements is close to x.
    const double x = 1.0 + 3.0 / 1024;  // bf16 spacing at 1 is 1/128: 0.375 of the way up
    auto run_once = [&](uint64_t seed) {
        Tensor model = zeros({200000}, {DType::bf16}).set_requires_grad(true);
        Tensor master = full({200000}, x);
        optim::SGD opt({{{master}, std::nullopt, std::nullopt, {model}}}, {.lr = 0.0});
        opt.set_stochastic_rounding(true, seed);
        model.set_grad(zeros({200000}, {DType::bf16}));
        opt.step();
        return values(model);
    };
    const std::vector<double> a = run_once(1), b = run_once(1), c = run_once(2);
    CHECK(a == b);  // seeded
    CHECK(a != c);
    double mean = 0;
    int up = 0;
    for (double v : a) {
        REQUIRE((v == 1.0 || v == 1.0 + 1.0 / 128));
        mean += v;
        up += v > 1.0;
    }
    mean /= double(a.size());
    CHECK(std::abs(mean - x) < 2e-5);  // nearest rounding would give exactly 1.0
    CHECK(up > 70000);
    CHECK(up < 80000);  // 0.375 · 200000 = 75000
}

TEST_CASE("optim: clip_grad_norm scales to max_norm and returns the norm before", "[optim]") {
    const std::vector<Tensor> ps = make_params(DType::f32, 30);
    std::vector<std::vector<double>> gs;
    double sq = 0;
    for (size_t i = 0; i < ps.size(); ++i) {
        const Tensor g = random_tensor(ps[i].shape(), DType::f32, 40 + i);
        ps[i].set_grad(g);
        gs.push_back(values(g));
        for (double v : gs.back()) sq += v * v;
    }
    const double total = std::sqrt(sq);
    const Tensor n = optim::clip_grad_norm(ps, 1.0);
    CHECK(n.item() == Approx(total).epsilon(1e-6));
    const double factor = 1.0 / (total + 1e-6);
    for (size_t i = 0; i < ps.size(); ++i) {
        std::vector<double> want = gs[i];
        for (double& v : want) v *= factor;
        check_close(ps[i].grad(), want, 1e-6, 1e-9);
    }
    // Below the threshold nothing changes.
    const std::vector<double> before = values(ps[0].grad());
    optim::clip_grad_norm(ps, 10.0);
    CHECK(values(ps[0].grad()) == before);
    REQUIRE_THROWS_WITH_MSG(optim::clip_grad_norm(ps, 0.0), "max_norm must be positive");
}

TEST_CASE("amp: an overflow skips the step with everything bit-unchanged", "[amp]") {
    const std::vector<Tensor> ps = make_params(DType::f32, 50);
    optim::AdamW opt(ps, {.lr = 0.01});
    amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 3});
    // One clean step first, so that the optimizer has state to keep.
    for (const Tensor& p : ps) p.set_grad(mul(random_tensor(p.shape(), DType::f32, 7), 1024.0));
    CHECK(scaler.step(opt));
    scaler.update();
    const auto state_before = opt.state_tensors();
    std::vector<std::vector<double>> p_before, s_before;
    for (const Tensor& p : ps) p_before.push_back(values(p));
    for (const auto& [name, t] : state_before) s_before.push_back(values(t));

    for (const Tensor& p : ps) p.set_grad(random_tensor(p.shape(), DType::f32, 8));
    ps[2].grad().set({123}, INFINITY);  // a planted overflow
    CHECK_FALSE(scaler.step(opt));
    scaler.update();
    for (size_t i = 0; i < ps.size(); ++i) CHECK(values(ps[i]) == p_before[i]);
    const auto state_after = opt.state_tensors();
    for (size_t i = 0; i < state_after.size(); ++i) CHECK(values(state_after[i].second) == s_before[i]);
    CHECK(opt.steps() == 1);
    CHECK(scaler.get_scale() == 512.0);  // backed off
    CHECK(scaler.skipped() == 1);
}

TEST_CASE("amp: the scale grows after growth_interval clean steps and unscales exactly", "[amp]") {
    Tensor w = random_tensor({10}, DType::f32, 60).set_requires_grad(true);
    optim::SGD opt({w}, {.lr = 0.1});
    amp::GradScaler scaler({.init_scale = 8.0, .growth_interval = 3});
    for (int s = 0; s < 3; ++s) {
        const Tensor x = random_tensor({10}, DType::f32, 70 + s);
        const std::vector<double> w0 = values(w);
        Tensor loss = sum(mul(w, x));
        scaler.scale(loss).backward();
        scaler.unscale_(opt);
        check_close(w.grad(), values(x), 0, 0);  // scale 8 is a power of two: exact
        CHECK(scaler.step(opt));
        scaler.update();
        opt.zero_grad();
        std::vector<double> want = w0;
        for (size_t i = 0; i < want.size(); ++i) want[i] -= 0.1 * values(x)[i];
        check_close(w, want, 1e-6, 1e-7);
    }
    CHECK(scaler.get_scale() == 16.0);
    CHECK(scaler.growth_tracker() == 0);
    REQUIRE_THROWS_WITH_MSG(amp::GradScaler({.backoff_factor = 1.5}), "0 < backoff_factor < 1");
}

TEST_CASE("optim: k micro-batches accumulate the gradients of one batch", "[optim]") {
    manual_seed(3);
    auto model = nn::mlp(12, 5);
    const Tensor x = random_tensor({32, 12}, DType::f32, 80);
    const Tensor y = randint(0, 5, {32});
    cross_entropy((*model)(x), y).backward();
    std::vector<std::vector<double>> whole;
    for (const Tensor& p : model->parameters()) whole.push_back(values(p.grad()));
    model->zero_grad();
    const optim::Accumulation acc{4};
    for (int64_t m = 0; m < 4; ++m) {
        const Tensor xb = x.slice(0, 8 * m, 8 * (m + 1)), yb = y.slice(0, 8 * m, 8 * (m + 1));
        acc.scale(cross_entropy((*model)(xb), yb)).backward();
        CHECK(acc.is_last(m) == (m == 3));
    }
    const auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) check_close(params[i].grad(), whole[i], 1e-4, 1e-6);
}

TEST_CASE("amp: the scaler's state round-trips and is checked", "[amp]") {
    amp::GradScaler a({.init_scale = 256.0, .growth_interval = 5});
    Tensor w = ones({3}).set_requires_grad(true);
    optim::SGD opt({w}, {.lr = 0.1});
    for (int s = 0; s < 3; ++s) {
        a.scale(sum(w)).backward();
        a.step(opt);
        a.update();
        opt.zero_grad();
    }
    amp::GradScaler b({.init_scale = 1.0, .growth_interval = 5});
    b.load_state(a.state_json());
    CHECK(b.get_scale() == 256.0);
    CHECK(b.growth_tracker() == 3);
    REQUIRE_THROWS_WITH_MSG(b.load_state("{\"scale\": -1, \"growth_tracker\": 0, \"skipped\": 0}"),
                            "out of range");
    REQUIRE_THROWS_WITH_MSG(b.load_state("[1]"), "expected scale");
    CHECK(b.get_scale() == 256.0);  // unchanged
}

// Autocast: the per-op policy (products in the low precision, softmax, layer
// norm, reductions and losses in f32, batch norm as given, f64 untouched),
// channels-last kept through the casts and their gradients, gradients reaching f32
// weights in f32, thread-local scopes, a weight cast once per scope while
// unchanged; bf16 autocast training of the mlp
// within a point of f32 training; an f16 model whose gradients overflow under
// a large loss scale skips its step and backs the scale off; a skipped step
// leaves no trace (the next step is the one it would have been, for every
// optimizer), the scale follows the rule step by step, and the kernels skip
// on the flag and advance their own step counts (no host read).
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include <thread>

#include "kernels/matmul.h"
#include "kernels/optim.h"
#include "optim/optim.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("amp: autocast casts by the op's policy", "[amp]") {
    const Tensor x = random_tensor({4, 8}, DType::f32, 1);
    const Tensor w = random_tensor({3, 8}, DType::f32, 2), b = random_tensor({3}, DType::f32, 3);
    CHECK(linear(x, w, b).dtype() == DType::f32);  // off by default
    {
        amp::autocast ac(DType::bf16);
        CHECK(amp::is_autocast_enabled());
        const Tensor y = linear(x, w, b);
        CHECK(y.dtype() == DType::bf16);
        CHECK(matmul(x, w.t()).dtype() == DType::bf16);
        CHECK(linear_relu(x, w, b).dtype() == DType::bf16);
        CHECK(softmax(y, 1).dtype() == DType::f32);
        CHECK(log_softmax(y, 1).dtype() == DType::f32);
        CHECK(sum(y).dtype() == DType::f32);
        CHECK(mean(y).dtype() == DType::f32);
        CHECK(layer_norm(y, {3}, Tensor(), Tensor(), 1e-5).dtype() == DType::f32);
        CHECK(cross_entropy(y, from_vector<int64_t>({0, 1, 2, 0})).dtype() == DType::f32);
        CHECK(relu(y).dtype() == DType::bf16);  // not in the table: as given
        CHECK(matmul(x.to(DType::f64), w.t().to(DType::f64)).dtype() == DType::f64);
        {
            amp::autocast off(DType::bf16, false);
            CHECK(linear(x, w, b).dtype() == DType::f32);
        }
        bool other_thread_on = true;
        std::thread([&] { other_thread_on = amp::is_autocast_enabled(); }).join();
        CHECK_FALSE(other_thread_on);
        // The bf16 result is the f32 one rounded, up to the rounding of the inputs.
        check_close(y.to(DType::f32), linear(x, w, b).to(DType::f32), 3e-2, 3e-2);
    }
    CHECK_FALSE(amp::is_autocast_enabled());
    REQUIRE_THROWS_WITH_MSG(amp::autocast(DType::f32), "dtype must be f16 or bf16");
}

TEST_CASE("amp: a channels-last model stays channels-last under autocast", "[amp]") {
    const Tensor x = random_tensor({2, 16, 6, 6}, DType::f32, 11)
                         .contiguous(MemoryFormat::channels_last)
                         .set_requires_grad(true);
    const Tensor w = random_tensor({16, 16, 3, 3}, DType::f32, 12).set_requires_grad(true);
    const Tensor gamma = random_tensor({16}, DType::f32, 13), beta = random_tensor({16}, DType::f32, 14);
    const Tensor mean = zeros({16}), var = ones({16});
    CHECK(x.to(DType::bf16).is_contiguous(MemoryFormat::channels_last));  // preserve_format
    Tensor z;
    {
        amp::autocast ac(DType::bf16);
        const Tensor y = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
        CHECK(y.dtype() == DType::bf16);
        CHECK(y.is_contiguous(MemoryFormat::channels_last));
        // Batch norm runs on its input as given (its statistics are f64 sums).
        z = batch_norm_relu(y, mean, var, gamma, beta, true, 0.1, 1e-5);
        CHECK(z.dtype() == DType::bf16);
        CHECK(z.is_contiguous(MemoryFormat::channels_last));
    }
    sum(mul(z.to(DType::f32), random_tensor(z.shape(), DType::f32, 15))).backward();
    // x's gradient came back through the recorded cast: f32, and still channels-last.
    CHECK(x.grad().dtype() == DType::f32);
    CHECK(x.grad().is_contiguous(MemoryFormat::channels_last));
    CHECK(w.grad().dtype() == DType::f32);
    CHECK(w.grad().is_contiguous());
}

TEST_CASE("amp: gradients reach f32 weights in f32 through the recorded casts", "[amp]") {
    Tensor w = random_tensor({5, 6}, DType::f32, 4).set_requires_grad(true);
    const Tensor x = random_tensor({7, 6}, DType::f32, 5);
    {
        amp::autocast ac(DType::bf16);
        sum(linear(x, w, Tensor())).backward();
    }
    REQUIRE(w.grad().defined());
    CHECK(w.grad().dtype() == DType::f32);
    // d Σ(x wᵀ) / dw = column sums of x for every row of w; bf16-rounded x.
    const Tensor want = sum(x.to(DType::bf16).to(DType::f32), {0}, true).expand({5, 6});
    check_close(w.grad(), want, 1e-2, 1e-2);
}

TEST_CASE("amp: a lowered linear weight's gradient comes from the GEMM in f32, not through its cast",
          "[amp]") {
    Tensor w = random_tensor({40, 90}, DType::f32, 31).set_requires_grad(true);
    Tensor b = random_tensor({40}, DType::f32, 32).set_requires_grad(true);
    const Tensor x = random_tensor({300, 90}, DType::f32, 33), dy = random_tensor({300, 40}, DType::f32, 34);
    Tensor y;
    {
        amp::autocast ac(DType::bf16);
        y = linear_relu(x, w, b);
    }
    sum(mul(y.to(DType::f32), dy)).backward();
    REQUIRE(w.grad().dtype() == DType::f32);
    REQUIRE(b.grad().dtype() == DType::f32);
    // The kernel's f32 gradients of the same bf16 values, bit for bit: the
    // bf16 dy (y's gradient), masked where y = 0, against the bf16 x.
    const Tensor g = where(gt(y, 0.0), dy.to(DType::bf16), zeros(y.shape(), {DType::bf16}));
    const kernels::LinearWeightGrads want =
        kernels::linear_weight_grad(g, x.to(DType::bf16), true, DType::f32);
    check_close(w.grad(), want.weight, 0, 0);
    check_close(b.grad(), want.bias, 0, 0);
    // Not rounded to bf16 on the way.
    CHECK(sum(abs(sub(w.grad(), w.grad().to(DType::bf16).to(DType::f32)))).item() > 0);
}

TEST_CASE("amp: a weight is cast once per autocast scope while it is unchanged", "[amp]") {
    Tensor w = random_tensor({5, 6}, DType::f32, 21).set_requires_grad(true);
    const Tensor x1 = random_tensor({7, 6}, DType::f32, 22), x2 = random_tensor({3, 6}, DType::f32, 23);
    const Tensor activation = random_tensor({7, 6}, DType::f32, 24);  // not a weight
    const auto cast = [](const Tensor& t) { return amp::cast_input("linear", t); };
    {
        amp::autocast ac(DType::bf16);
        const Tensor first = cast(w);
        CHECK(first.dtype() == DType::bf16);
        CHECK(cast(w).unsafe_impl() == first.unsafe_impl());  // the same recorded cast
        CHECK(cast(activation).unsafe_impl() != cast(activation).unsafe_impl());
        {
            amp::autocast inner(DType::bf16);  // a nested scope shares the outer one's casts
            CHECK(cast(w).unsafe_impl() == first.unsafe_impl());
        }
        {
            NoGradGuard no_grad;  // no graph to share: cast apart, and not kept
            CHECK(cast(w).unsafe_impl() != first.unsafe_impl());
        }
        CHECK(cast(w).unsafe_impl() == first.unsafe_impl());
        // Both uses' gradients meet at the one cast: column sums of each x.
        add(sum(linear(x1, w, Tensor())), sum(linear(x2, w, Tensor()))).backward();
        const auto column_sums = [](const Tensor& x) {
            return sum(x.to(DType::bf16).to(DType::f32), {0}, true).expand({5, 6});
        };
        check_close(w.grad(), add(column_sums(x1), column_sums(x2)), 1e-2, 1e-2);
        // A cast saves nothing: a backward leaves it walkable, so a scope
        // around several forwards and backwards keeps it and accumulates.
        CHECK(cast(w).unsafe_impl() == first.unsafe_impl());
        sum(linear(x1, w, Tensor())).backward();
        check_close(w.grad(), add(mul(column_sums(x1), 2.0), column_sums(x2)), 1e-2, 1e-2);
        // Changed in place: cast again, from the new values.
        const Tensor before_update = cast(w);
        {
            NoGradGuard no_grad;
            sub_(w, 1.0);
        }
        const Tensor updated = cast(w);
        CHECK(updated.unsafe_impl() != before_update.unsafe_impl());
        check_close(updated.to(DType::f32), w.to(DType::bf16).to(DType::f32), 0, 0);
    }
    amp::autocast again(DType::bf16);  // a new scope: a new cast
    const Tensor fresh = cast(w);
    CHECK(fresh.dtype() == DType::bf16);
    check_close(fresh.to(DType::f32), w.to(DType::bf16).to(DType::f32), 0, 0);
}

namespace {

// Trains the mlp on Fashion-MNIST for `steps` steps (-1: `epochs` whole
// epochs) with AdamW and returns the test accuracy, under autocast when
// `low` is bf16.
double fashion_accuracy(int steps, std::optional<DType> low, int epochs = 1) {
    manual_seed(0);
    auto train = std::make_shared<data::FashionMNIST>(data::Split::train);
    auto test = std::make_shared<data::FashionMNIST>(data::Split::test);
    const data::Normalize normalize({0.2860}, {0.3530});
    data::Loader loader(train, {.batch_size = 128, .seed = 1, .workers = 1}, data::Compose{normalize});
    auto model = nn::mlp();
    optim::AdamW opt(model->parameters(), {.lr = 1e-3});
    int step = 0;
    for (int epoch = 0; epoch < epochs && step != steps; ++epoch)
        for (data::Batch& batch : loader.epoch(epoch)) {
            Tensor loss;
            {
                amp::autocast ac(low.value_or(DType::bf16), low.has_value());
                loss = cross_entropy((*model)(batch.input), batch.target);
            }
            opt.zero_grad();
            loss.backward();
            opt.step();
            if (++step == steps) break;
        }
    NoGradGuard no_grad;
    model->eval();
    data::Loader test_loader(test, {.batch_size = 1000, .shuffle = false, .workers = 1},
                             data::Compose{normalize});
    double correct = 0;
    for (data::Batch& batch : test_loader.epoch(0)) {
        amp::autocast ac(low.value_or(DType::bf16), low.has_value());
        correct += sum(eq(argmax((*model)(batch.input), 1), batch.target).to(DType::f64)).item();
    }
    return correct / double(test->size());
}

}  // namespace

TEST_CASE("amp: bf16 autocast training reaches the f32 accuracy band", "[amp][fashion]") {
    const double f32 = fashion_accuracy(200, std::nullopt);
    const double bf16 = fashion_accuracy(200, DType::bf16);
    INFO("f32 " << f32 << ", bf16 autocast " << bf16);
    CHECK(f32 > 0.78);
    CHECK(std::abs(bf16 - f32) <= 0.01);
}

TEST_CASE("amp: five epochs under bf16 autocast land within 0.3 points of f32", "[amp][fashion]") {
    // The CPU's bf16 products (kernels/cpu/gemm_bf16.cpp) in every linear
    // layer's forward and backward: the whole run, not a few steps.
    const double f32 = fashion_accuracy(-1, std::nullopt, 5);
    const double bf16 = fashion_accuracy(-1, DType::bf16, 5);
    INFO("f32 " << f32 << ", bf16 autocast " << bf16);
    CHECK(f32 > 0.86);
    CHECK(std::abs(bf16 - f32) <= 0.003);
}

TEST_CASE("amp: f16 gradients that overflow skip the step and back the scale off", "[amp]") {
    manual_seed(1);
    auto model = nn::mlp(16, 4);
    optim::AdamW opt(optim::master_weights(*model, DType::f16), {.lr = 1e-3});
    amp::GradScaler scaler({.init_scale = 1e30});  // scaled gradients past f16's 65504
    const Tensor x = random_tensor({8, 16}, DType::f16, 9);
    const Tensor y = randint(0, 4, {8});
    std::vector<std::vector<double>> before;
    for (const Tensor& p : opt.groups()[0].params) before.push_back(values(p));
    const std::vector<double> model_before = values(model->parameters()[0]);
    scaler.scale(cross_entropy((*model)(x), y)).backward();
    CHECK_FALSE(scaler.step(opt));
    scaler.update();
    for (size_t i = 0; i < before.size(); ++i) CHECK(values(opt.groups()[0].params[i]) == before[i]);
    CHECK(values(model->parameters()[0]) == model_before);
    CHECK(scaler.get_scale() == Approx(5e29).epsilon(1e-6));
    CHECK(opt.steps() == 0);
}

// ---- The device-side skip and scale rule (no host read per step) ----

namespace {

// Bit patterns of every tensor, for exact comparisons (NaN-safe).
std::vector<std::vector<double>> all_values(const std::vector<Tensor>& ts) {
    std::vector<std::vector<double>> out;
    for (const Tensor& t : ts) out.push_back(values(t));
    return out;
}

std::vector<Tensor> state_of(const optim::Optimizer& opt) {
    std::vector<Tensor> out;
    for (const auto& [name, t] : opt.state_tensors()) out.push_back(t);
    return out;
}

// Parameters of three tensors (one spanning two CPU chunks), fresh each call.
std::vector<Tensor> fresh_params(uint64_t seed) {
    std::vector<Tensor> ps;
    for (const Shape& s : {Shape{7}, Shape{5, 3}, Shape{70001}})
        ps.push_back(random_tensor(s, DType::f32, seed++, -1, 1).set_requires_grad(true));
    return ps;
}

std::unique_ptr<optim::Optimizer> make_optimizer(const std::string& kind,
                                                 const std::vector<Tensor>& ps) {
    if (kind == "SGD") return std::make_unique<optim::SGD>(ps, optim::SGDOptions{.lr = 0.1, .momentum = 0.9});
    if (kind == "AdamW") return std::make_unique<optim::AdamW>(ps, optim::AdamWOptions{.lr = 0.01});
    if (kind == "LAMB")
        return std::make_unique<optim::LAMB>(ps, optim::LAMBOptions{.lr = 0.01, .weight_decay = 0.01});
    return std::make_unique<optim::LARS>(ps, optim::LARSOptions{.lr = 0.1, .weight_decay = 1e-4});
}

// Gradient k of the sequence, scaled by `scale` (what backward would give).
void set_grads(const std::vector<Tensor>& ps, uint64_t k, double scale) {
    for (size_t i = 0; i < ps.size(); ++i)
        ps[i].set_grad(mul(random_tensor(ps[i].shape(), DType::f32, 900 + 10 * k + i), scale));
}

}  // namespace

TEST_CASE("amp: a skipped step changes no bit and the next step is the one it would have been",
          "[amp]") {
    // Run A: clean steps 0 and 1 with an overflow before each (skipped);
    // run B: the same clean steps alone. Skipped steps must leave no trace:
    // parameters, state, the per-parameter step counts (bias corrections,
    // SGD's first step) and steps() agree bit for bit.
    for (const std::string kind : {"SGD", "AdamW", "LAMB", "LARS"}) {
        INFO(kind);
        const std::vector<Tensor> pa = fresh_params(40), pb = fresh_params(40);
        auto a = make_optimizer(kind, pa), b = make_optimizer(kind, pb);
        amp::GradScaler sa({.init_scale = 4.0, .growth_interval = 100}),
            sb({.init_scale = 4.0, .growth_interval = 100});
        for (uint64_t k = 0; k < 2; ++k) {
            // The overflow, first (k = 0: before any state exists).
            set_grads(pa, 50 + k, sa.get_scale());
            pa[2].grad().set({int64_t(66000 + k)}, k == 0 ? INFINITY : NAN);
            const auto p_before = all_values(pa);
            const auto s_before = all_values(state_of(*a));
            const std::string json_before = a->state_json();
            const amp::StepResult r = sa.step(*a);
            CHECK(r.known());
            CHECK_FALSE(r);
            sa.update();
            CHECK(all_values(pa) == p_before);
            CHECK(all_values(state_of(*a)) == s_before);
            CHECK(a->steps() == int64_t(k));
            // The saved state differs only by the count of step calls.
            nlohmann::json ja = nlohmann::json::parse(a->state_json()),
                           jb = nlohmann::json::parse(json_before);
            CHECK(ja["step_calls"].get<int64_t>() == jb["step_calls"].get<int64_t>() + 1);
            ja.erase("step_calls");
            jb.erase("step_calls");
            CHECK(ja == jb);
            a->zero_grad();
            // The clean step, on both.
            set_grads(pa, k, sa.get_scale());
            set_grads(pb, k, sb.get_scale());
            CHECK(sa.step(*a));
            CHECK(sb.step(*b));
            sa.update();
            sb.update();
            a->zero_grad();
            b->zero_grad();
        }
        CHECK(all_values(pa) == all_values(pb));
        CHECK(all_values(state_of(*a)) == all_values(state_of(*b)));
        CHECK(a->steps() == 2);
        CHECK(b->steps() == 2);
        CHECK(a->step_calls() == 4);
        CHECK(sa.skipped() == 2);
        CHECK(sa.get_scale() == 1.0);  // 4 · ½ · ½
    }
}

TEST_CASE("amp: the scale follows the growth and backoff rule step by step", "[amp]") {
    // A planted pattern of overflows against the rule evaluated here.
    Tensor w = random_tensor({10}, DType::f32, 61).set_requires_grad(true);
    optim::SGD opt({w}, {.lr = 0.01});
    amp::GradScaler scaler({.init_scale = 1024.0, .growth_factor = 2.0, .backoff_factor = 0.25,
                            .growth_interval = 3});
    const std::string pattern = "..o...o.....oo..";  // o: an overflow
    double scale = 1024;
    int64_t tracker = 0, skipped = 0;
    for (const char c : pattern) {
        w.set_grad(random_tensor({10}, DType::f32, 62));
        if (c == 'o') w.grad().set({3}, INFINITY);
        CHECK(bool(scaler.step(opt)) == (c != 'o'));
        scaler.update();
        opt.zero_grad();
        if (c == 'o') {
            scale *= 0.25;
            tracker = 0;
            ++skipped;
        } else if (++tracker == 3) {
            scale *= 2;
            tracker = 0;
        }
        CHECK(scaler.get_scale() == scale);
        CHECK(scaler.growth_tracker() == tracker);
        CHECK(scaler.skipped() == skipped);
    }
    CHECK(opt.steps() == int64_t(pattern.size()) - skipped);
    // The optimizer's state (one parameter: its step counts a tensor of one
    // element) resumes: the same next step from a fresh optimizer.
    Tensor w2 = kernels::clone(w).set_requires_grad(true);
    optim::SGD resumed({w2}, {.lr = 0.01});
    resumed.load_state({}, opt.state_json());  // no momentum: no buffers
    CHECK(resumed.steps() == opt.steps());
    CHECK(resumed.step_calls() == opt.step_calls());
    w.set_grad(random_tensor({10}, DType::f32, 63));
    w2.set_grad(random_tensor({10}, DType::f32, 63));
    opt.step();
    resumed.step();
    CHECK(values(w2) == values(w));
    CHECK(resumed.state_json() == opt.state_json());
    // The state round-trips with the counters.
    amp::GradScaler other({.init_scale = 1.0, .growth_factor = 2.0, .backoff_factor = 0.25,
                           .growth_interval = 3});
    other.load_state(scaler.state_json());
    CHECK(other.get_scale() == scale);
    CHECK(other.growth_tracker() == tracker);
    CHECK(other.skipped() == skipped);
}

TEST_CASE("amp: update_scale_ rounds the f64 product to f32 once and clears the flag", "[amp]") {
    const Tensor scale = full({1}, 3.0), flag = full({1}, 1.0);
    const Tensor counters = from_vector<int64_t>({2, 5});
    kernels::update_scale_(scale, flag, counters, 2.0, 0.1, 3);
    CHECK(scale.item() == double(float(double(3.0f) * 0.1)));
    CHECK(flag.item() == 0);
    CHECK(counters.to_vector<int64_t>() == std::vector<int64_t>{0, 6});
    kernels::update_scale_(scale, flag, counters, 2.0, 0.1, 3);  // clean: tracker 1
    kernels::update_scale_(scale, flag, counters, 2.0, 0.1, 3);
    CHECK(counters.to_vector<int64_t>() == std::vector<int64_t>{2, 6});
    kernels::update_scale_(scale, flag, counters, 2.0, 0.1, 3);  // the third: grows
    CHECK(scale.item() == double(float(double(float(3.0 * 0.1)) * 2.0)));
    CHECK(counters.to_vector<int64_t>() == std::vector<int64_t>{0, 6});
    REQUIRE_THROWS_WITH_MSG(kernels::update_scale_(scale, flag, from_vector<int64_t>({0}), 2, 0.5, 3),
                            "counters must be a two-element i64 tensor");
}

TEST_CASE("amp: the loss scale never grows to infinity", "[amp]") {
    // From 2^127, growth 2 every step would reach +inf (then every later step
    // would overflow and be skipped): the scale stays at 2^127, growth
    // attempts keep resetting the tracker, and a backoff still works.
    const float top = std::ldexp(1.0f, 127);
    const Tensor scale = full({1}, double(top)), flag = full({1}, 0.0);
    const Tensor counters = from_vector<int64_t>({0, 0});
    for (int i = 0; i < 5; ++i) {
        kernels::update_scale_(scale, flag, counters, 2.0, 0.5, 1);
        REQUIRE(std::isfinite(scale.item()));
        CHECK(scale.item() == double(top));
        CHECK(counters.to_vector<int64_t>() == std::vector<int64_t>{0, 0});
    }
    // A growth that lands exactly at the largest finite f32 is taken.
    const float below = std::nextafter(std::numeric_limits<float>::max(), 0.0f);
    kernels::fill(scale, double(below));
    const double factor = double(std::numeric_limits<float>::max()) / double(below);
    kernels::update_scale_(scale, flag, counters, factor, 0.5, 1);
    CHECK(scale.item() == double(std::numeric_limits<float>::max()));
    kernels::update_scale_(scale, flag, counters, 2.0, 0.5, 1);
    CHECK(scale.item() == double(std::numeric_limits<float>::max()));
    kernels::fill(flag, 1.0);
    kernels::update_scale_(scale, flag, counters, 2.0, 0.5, 1);
    CHECK(scale.item() == double(std::numeric_limits<float>::max() * 0.5f));
    // Through the scaler, with growth every step from 2^127.
    Tensor w = random_tensor({10}, DType::f32, 64).set_requires_grad(true);
    optim::SGD opt({w}, {.lr = 0.01});
    amp::GradScaler scaler({.init_scale = double(top), .growth_interval = 1});
    for (int i = 0; i < 3; ++i) {
        w.set_grad(random_tensor({10}, DType::f32, 65 + i));
        CHECK(bool(scaler.step(opt)));
        scaler.update();
        CHECK(scaler.get_scale() == double(top));
    }
    CHECK(scaler.skipped() == 0);
}

TEST_CASE("amp: the update kernels skip on the flag and write their next step counts", "[amp]") {
    // Through the fronts: a step count per tensor replaces the call's step;
    // each update reads one slot of a pair and writes count + 1 (+ 0 when
    // skipped) into the other, which the caller then reads.
    const std::vector<Shape> shapes = {{0}, {9}, {70001}};
    auto make = [&](uint64_t seed) {
        kernels::UpdateTensors t;
        for (size_t i = 0; i < shapes.size(); ++i) {
            t.params.push_back(random_tensor(shapes[i], DType::f32, seed + i));
            t.grads.push_back(random_tensor(shapes[i], DType::f32, seed + 10 + i));
            t.state1.push_back(zeros(shapes[i]));
            t.state2.push_back(zeros(shapes[i]));
        }
        return t;
    };
    kernels::UpdateTensors host = make(7), own = make(7);
    // Slot p of tensor i's count at 3p + i; slot 1 poisoned.
    const Tensor slots = from_vector<int64_t>({0, 0, 0, -5, -5, -5});
    own.found_inf = zeros({1});
    int64_t phase = 0;  // the slot holding the counts
    auto point = [&] {  // own reads slot `phase`, writes the other
        own.steps.clear();
        own.next_steps.clear();
        for (int64_t i = 0; i < 3; ++i) {
            own.steps.push_back(slots.narrow(0, 3 * phase + i, 1));
            own.next_steps.push_back(slots.narrow(0, 3 * (1 - phase) + i, 1));
        }
    };
    auto counts = [&] { return slots.narrow(0, 3 * phase, 3).contiguous().to_vector<int64_t>(); };
    for (int64_t step = 1; step <= 3; ++step) {
        point();
        kernels::adam_update(host, {.lr = 0.01}, kernels::AdamDecay::decoupled, step);
        kernels::adam_update(own, {.lr = 0.01}, kernels::AdamDecay::decoupled, 99);  // step ignored: own counts
        CHECK(counts() == std::vector<int64_t>(3, step - 1));  // the counts read stay as they were
        phase = 1 - phase;
        CHECK(counts() == std::vector<int64_t>(3, step));
        // A raised flag: nothing moves, and the next counts equal the counts.
        kernels::fill(own.found_inf, 1.0);
        const auto before = all_values(own.params);
        for (int k = 0; k < 2; ++k) {
            point();
            if (k == 0)
                kernels::adam_update(own, {.lr = 0.01}, kernels::AdamDecay::decoupled);
            else
                kernels::sgd_update({own.params, own.grads, own.state1, {}, {}, {}, false, 0, 0,
                                     own.steps, own.next_steps, own.found_inf},
                                    {.lr = 0.1, .momentum = 0.9});
            phase = 1 - phase;
            CHECK(all_values(own.params) == before);
            CHECK(counts() == std::vector<int64_t>(3, step));
        }
        kernels::fill(own.found_inf, 0.0);
    }
    CHECK(all_values(own.params) == all_values(host.params));
    CHECK(all_values(own.state2) == all_values(host.state2));
    point();
    REQUIRE_THROWS_WITH_MSG(kernels::adam_update({own.params, own.grads, own.state1, own.state2, {}, {},
                                                  false, 0, 0, {zeros({1}), zeros({1}), zeros({1})},
                                                  own.next_steps},
                                                 {}, kernels::AdamDecay::decoupled),
                            "step count 0 must be a one-element i64 tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::adam_update({own.params, own.grads, own.state1, own.state2, {}, {},
                                                  false, 0, 0, own.steps, {}},
                                                 {}, kernels::AdamDecay::decoupled),
                            "3 step counts but 0 next step counts");
    REQUIRE_THROWS_WITH_MSG(kernels::adam_update({own.params, own.grads, own.state1, own.state2, {}, {},
                                                  false, 0, 0, own.steps,
                                                  {own.next_steps[0], own.steps[0], own.next_steps[2]}},
                                                 {}, kernels::AdamDecay::decoupled),
                            "next step count 1 is the memory of a step count the update reads");
}

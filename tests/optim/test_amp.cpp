// Autocast: the per-op policy (products in the low precision, softmax, norms,
// reductions and losses in f32, f64 untouched), gradients reaching f32
// weights in f32, thread-local scopes; bf16 autocast training of the mlp
// within a point of f32 training; an f16 model whose gradients overflow under
// a large loss scale skips its step and backs the scale off.
#include <thread>

#include "optim/optim.h"
#include "support.h"

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

namespace {

// Trains the mlp on Fashion-MNIST for `steps` steps with AdamW and returns
// the test accuracy, under autocast when `low` is bf16.
double fashion_accuracy(int steps, std::optional<DType> low) {
    manual_seed(0);
    auto train = std::make_shared<data::FashionMNIST>(data::Split::train);
    auto test = std::make_shared<data::FashionMNIST>(data::Split::test);
    const data::Normalize normalize({0.2860}, {0.3530});
    data::Loader loader(train, {.batch_size = 128, .seed = 1, .workers = 1}, data::Compose{normalize});
    auto model = nn::mlp();
    optim::AdamW opt(model->parameters(), {.lr = 1e-3});
    int step = 0;
    for (data::Batch& batch : loader.epoch(0)) {
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

// Convolution + batch norm: ConvBN / ConvBNReLU build their conv without a
// bias, the conv-bias-before-BN check names both modules (and Sequential
// warns on std::cerr), and fold_batchnorm leaves eval outputs unchanged.
#include <cmath>
#include <iostream>
#include <sstream>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// Captures what is written to std::cerr while it lives.
class CerrCapture {
  public:
    CerrCapture() : old_(std::cerr.rdbuf(buf_.rdbuf())) {}
    ~CerrCapture() { std::cerr.rdbuf(old_); }
    std::string text() const { return buf_.str(); }

  private:
    std::ostringstream buf_;
    std::streambuf* old_;
};

int count_batchnorms(nn::Module& m) {
    int n = 0;
    for (auto& [_, sub] : m.named_modules()) n += dynamic_cast<nn::BatchNorm2d*>(sub) ? 1 : 0;
    return n;
}

// Largest |a − b| / max(|b|, floor) over all elements; infinite if any
// element of either is not finite (a NaN must not compare as "close").
double max_rel_diff(const Tensor& a, const Tensor& b, double floor) {
    REQUIRE(a.shape() == b.shape());
    const std::vector<double> va = values(a), vb = values(b);
    double worst = 0;
    for (size_t i = 0; i < va.size(); ++i) {
        if (!std::isfinite(va[i]) || !std::isfinite(vb[i])) return INFINITY;
        worst = std::max(worst, std::abs(va[i] - vb[i]) / std::max(std::abs(vb[i]), floor));
    }
    return worst;
}

// resnet8 after a few SGD steps on random images: weights, BN affine
// parameters and running statistics all differ from their initial values.
std::shared_ptr<nn::Module> trained_resnet8(DType dtype, uint64_t seed) {
    manual_seed(seed);
    auto model = nn::make_model("resnet8");
    model->to(dtype);
    for (int s = 0; s < 3; ++s) {
        const Tensor x = random_tensor({8, 1, 28, 28}, dtype, seed + uint64_t(s), -1.0, 3.0);
        const Tensor y = random_tensor({8}, DType::i64, seed + 10 + uint64_t(s), 0, 10);
        const Tensor loss = cross_entropy((*model)(x), y);
        REQUIRE(std::isfinite(loss.item()));
        loss.backward();
        {
            NoGradGuard no_grad;
            for (const Tensor& p : model->parameters()) sub_(p, mul(p.grad(), 0.1));
        }
        model->zero_grad();
    }
    return model;
}

void check_resnet8_fold(DType dtype, double tolerance) {
    auto model = trained_resnet8(dtype, 300);
    auto* bn = dynamic_cast<nn::ResNet8*>(model.get())->layer2->conv1->bn.get();
    REQUIRE(bn->num_batches_tracked.item() == 3);
    CHECK(std::abs(bn->running_mean.at({0})) > 1e-4);  // the statistics have moved
    CHECK(std::abs(bn->running_var.at({0}) - 1) > 1e-4);

    model->eval();
    const Tensor x = random_tensor({4, 1, 28, 28}, dtype, 310, -1.0, 3.0);
    const Tensor before = (*model)(x);
    const int bns = count_batchnorms(*model);
    CHECK(bns == 9);  // stem, two per block, and the two shortcuts
    CHECK(nn::fold_batchnorm(*model) == bns);
    CHECK(count_batchnorms(*model) == 0);
    for (auto& [name, m] : model->named_modules())
        if (auto* conv = dynamic_cast<nn::Conv2d*>(m)) {
            INFO(name);
            CHECK(conv->bias.defined());
            CHECK(conv->bias.dtype() == dtype);
        }
    for (const auto& [n, _] : model->state_dict()) CHECK(n.find(".bn.") == std::string::npos);
    const Tensor after = (*model)(x);
    const double diff = max_rel_diff(after, before, 1e-3);
    INFO(dtype_name(dtype) << ": worst relative difference " << diff);
    CHECK(diff < tolerance);
    CHECK(nn::fold_batchnorm(*model) == 0);  // nothing left to fold
    CHECK(values((*model)(x)) == values(after));
}

}  // namespace

TEST_CASE("ConvBN: the conv never has a bias", "[nn][convbn]") {
    nn::ConvBN block(3, 8, 3, {.padding = 1, .bias = true});
    CHECK_FALSE(block.conv->bias.defined());
    CHECK_FALSE(block.conv->options().bias);
    CHECK(block.conv->options().padding.h == 1);
    CHECK(block.type_name() == "ConvBN");
    std::vector<std::string> names;
    for (const auto& [n, _] : block.state_dict()) names.push_back(n);
    CHECK(names == std::vector<std::string>{"conv.weight", "bn.weight", "bn.bias",
                                            "bn.running_mean", "bn.running_var",
                                            "bn.num_batches_tracked"});

    // ConvBNReLU in eval with fresh statistics (mean 0, var 1): relu(conv(x)/√(1 + eps)).
    nn::ConvBNReLU relu_block(2, 4, 3, {.stride = 2, .bias = true});
    CHECK(relu_block.type_name() == "ConvBNReLU");
    CHECK_FALSE(relu_block.conv->bias.defined());
    relu_block.eval();
    const Tensor x = random_tensor({2, 2, 7, 7}, DType::f32, 320);
    const std::vector<double> c = values(relu_block.conv->forward(x));
    std::vector<double> want;
    for (double v : c) want.push_back(std::max(v / std::sqrt(1 + 1e-5), 0.0));
    const Tensor y = relu_block(x);
    CHECK(y.shape() == Shape{2, 4, 3, 3});
    check_close(y, want, 1e-5, 1e-6);
}

TEST_CASE("ConvBN: a conv with bias feeding a BatchNorm2d is named", "[nn][convbn]") {
    std::string warned;
    std::shared_ptr<nn::Sequential> bad;
    {
        CerrCapture capture;
        bad = std::make_shared<nn::Sequential>(nn::Conv2d(3, 4, 3), nn::BatchNorm2d(4));
        warned = capture.text();
    }
    CHECK(warned.find("ember: warning: Conv2d '0' has a bias but feeds BatchNorm2d '1'") !=
          std::string::npos);
    const std::vector<std::string> found = nn::find_conv_bias_before_batchnorm(*bad);
    REQUIRE(found.size() == 1);
    CHECK(found[0].find("Conv2d '0' has a bias but feeds BatchNorm2d '1'") != std::string::npos);

    {
        CerrCapture capture;
        nn::Sequential good(nn::Conv2d(3, 4, 3, {.bias = false}), nn::BatchNorm2d(4), nn::ReLU(),
                            nn::Conv2d(4, 4, 1), nn::ReLU(), nn::BatchNorm2d(4));
        CHECK(capture.text().empty());
        CHECK(nn::find_conv_bias_before_batchnorm(good).empty());
    }

    // Nested: names are dotted from the model's root.
    nn::Sequential outer;
    {
        CerrCapture capture;
        outer.push_back(nn::ReLU());
        outer.push_back(bad);
        CHECK(capture.text().empty());
    }
    const auto nested = nn::find_conv_bias_before_batchnorm(outer);
    REQUIRE(nested.size() == 1);
    CHECK(nested[0].find("Conv2d '1.0' has a bias but feeds BatchNorm2d '1.1'") !=
          std::string::npos);

    const auto resnet = nn::make_model("resnet8");
    CHECK(nn::find_conv_bias_before_batchnorm(*resnet).empty());
}

TEST_CASE("fold_batchnorm: resnet8 outputs unchanged (f64)", "[nn][convbn]") {
    check_resnet8_fold(DType::f64, 1e-10);
}

TEST_CASE("fold_batchnorm: resnet8 outputs unchanged (f32)", "[nn][convbn]") {
    check_resnet8_fold(DType::f32, 1e-4);
}

TEST_CASE("fold_batchnorm: Sequential(Conv2d with bias, BatchNorm2d)", "[nn][convbn]") {
    for (bool bias : {true, false}) {
        INFO("conv bias " << bias);
        CerrCapture quiet;  // the warning is expected here
        nn::Sequential seq(nn::Conv2d(3, 5, 3, {.padding = 1, .bias = bias, .dtype = DType::f64}),
                           nn::BatchNorm2d(5, {.dtype = DType::f64}), nn::ReLU());
        auto bn = std::dynamic_pointer_cast<nn::BatchNorm2d>(seq[1]);
        auto conv = std::dynamic_pointer_cast<nn::Conv2d>(seq[0]);
        // Non-trivial statistics and affine parameters.
        seq(random_tensor({4, 3, 6, 6}, DType::f64, 330, -2.0, 5.0));
        bn->weight.detach().copy_(random_tensor({5}, DType::f64, 331, 0.5, 2.0));
        bn->bias.detach().copy_(random_tensor({5}, DType::f64, 332));
        seq.eval();
        const Tensor x = random_tensor({2, 3, 6, 6}, DType::f64, 333, -2.0, 5.0);
        const Tensor before = seq(x);
        const Tensor conv_weight = conv->weight;
        CHECK(nn::fold_batchnorm(seq) == 1);
        CHECK(dynamic_cast<nn::Identity*>(seq[1].get()));
        CHECK(conv->weight.is_same(conv_weight));  // folded in place
        REQUIRE(conv->bias.defined());
        std::vector<std::string> names;
        for (const auto& [n, _] : seq.state_dict()) names.push_back(n);
        CHECK(names == std::vector<std::string>{"0.weight", "0.bias"});
        CHECK(max_rel_diff(seq(x), before, 1e-3) < 1e-12);
    }
}

TEST_CASE("fold_batchnorm: what is not folded", "[nn][convbn]") {
    nn::Sequential no_conv(nn::ReLU(), nn::BatchNorm2d(3));
    CHECK(nn::fold_batchnorm(no_conv) == 0);
    CHECK(dynamic_cast<nn::BatchNorm2d*>(no_conv[1].get()));

    nn::Sequential no_stats(nn::Conv2d(3, 3, 1, {.bias = false}),
                            nn::BatchNorm2d(3, {.track_running_stats = false}));
    REQUIRE_THROWS_WITH_MSG(nn::fold_batchnorm(no_stats),
                            "fold_batchnorm: the BatchNorm2d in a Sequential at position 1 has "
                            "no running statistics");

    // All or nothing: a foldable ConvBN before an unfoldable pair stays unfolded.
    nn::Sequential mixed(nn::ConvBN(3, 3, 1), nn::Conv2d(3, 3, 1, {.bias = false}),
                         nn::BatchNorm2d(3, {.track_running_stats = false}));
    REQUIRE_THROWS_WITH_MSG(nn::fold_batchnorm(mixed), "nothing was folded");
    auto* block = dynamic_cast<nn::ConvBN*>(mixed[0].get());
    REQUIRE(block != nullptr);
    CHECK(block->bn != nullptr);
}

// ConvBN::forward_add_relu (a residual block's end) trains through one fused
// op; it must give relu(forward(x) + residual) and the same gradients bit for
// bit, and in eval mode the three ops.
TEST_CASE("ConvBN::forward_add_relu equals relu(forward + residual)", "[nn][convbn]") {
    for (bool training : {true, false}) {
        INFO((training ? "training" : "eval"));
        manual_seed(40);
        nn::ConvBN fused(4, 6, 3, {.padding = 1});
        manual_seed(40);
        nn::ConvBN plain(4, 6, 3, {.padding = 1});
        fused.train(training);
        plain.train(training);
        Tensor x = random_tensor({3, 4, 9, 7}, DType::f32, 41, -2, 2);
        Tensor r = random_tensor({3, 6, 9, 7}, DType::f32, 42, -2, 2);
        Tensor x2 = x.clone(), r2 = r.clone();
        for (Tensor* t : {&x, &r, &x2, &r2}) t->set_requires_grad(true);
        const Tensor g = random_tensor({3, 6, 9, 7}, DType::f32, 43, -1, 1);
        const Tensor y = fused.forward_add_relu(x, r);
        const Tensor want = relu(add(plain.forward(x2), r2));
        CHECK(values(y) == values(want));
        sum(mul(y, g)).backward();
        sum(mul(want, g)).backward();
        CHECK(values(x.grad()) == values(x2.grad()));
        CHECK(values(r.grad()) == values(r2.grad()));
        CHECK(values(fused.conv->weight.grad()) == values(plain.conv->weight.grad()));
        CHECK(values(fused.bn->weight.grad()) == values(plain.bn->weight.grad()));
        CHECK(values(fused.bn->bias.grad()) == values(plain.bn->bias.grad()));
        CHECK(values(fused.bn->running_mean) == values(plain.bn->running_mean));
        CHECK(values(fused.bn->running_var) == values(plain.bn->running_var));
        CHECK(fused.bn->num_batches_tracked.item() == plain.bn->num_batches_tracked.item());
    }
    nn::ConvBNReLU with_relu(2, 2, 1);
    REQUIRE_THROWS_WITH_MSG(with_relu.forward_add_relu(ones({1, 2, 3, 3}), ones({1, 2, 3, 3})),
                            "ConvBNReLU::forward_add_relu: the block already ends in a ReLU");
}

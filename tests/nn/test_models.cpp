// The reference models and weight files: construction by name, parameter
// counts worked out by formula, resnet8's forward and backward, the MLP
// fitting a small batch with hand-written SGD, and nn::save / nn::load
// (bit-exact round trip, wrong architecture, truncated file).
#include <filesystem>

#include "support/safetensors_files.h"

using namespace ember;
using namespace ember::test;

namespace {

int64_t conv_params(int64_t in, int64_t out, int64_t k) { return in * out * k * k; }  // no bias
int64_t bn_params(int64_t c) { return 2 * c; }                                        // γ and β
int64_t linear_params(int64_t in, int64_t out) { return in * out + out; }

// Two 3×3 conv+BN layers, and a 1×1 conv+BN shortcut when the shape changes.
int64_t basic_block_params(int64_t in, int64_t out, bool shortcut) {
    int64_t n =
        conv_params(in, out, 3) + bn_params(out) + conv_params(out, out, 3) + bn_params(out);
    if (shortcut) n += conv_params(in, out, 1) + bn_params(out);
    return n;
}

// One plain SGD step: p −= lr·grad for every parameter, then zero_grad.
void sgd_step(nn::Module& model, double lr) {
    {
        NoGradGuard no_grad;
        for (const Tensor& p : model.parameters()) sub_(p, mul(p.grad(), lr));
    }
    model.zero_grad();
}

// A few SGD steps of resnet8 on random images, so that weights and BN running
// statistics move away from their initial values.
void train_a_little(nn::Module& model, int steps, DType dtype, uint64_t seed) {
    model.train();
    for (int s = 0; s < steps; ++s) {
        const Tensor x = random_tensor({8, 1, 28, 28}, dtype, seed + uint64_t(s));
        const Tensor y = random_tensor({8}, DType::i64, seed + 100 + uint64_t(s), 0, 10);
        const Tensor loss = cross_entropy(model(x), y);
        REQUIRE(std::isfinite(loss.item()));
        loss.backward();
        sgd_step(model, 0.05);
    }
}

}  // namespace

TEST_CASE("models: built by name, parameter counts by formula", "[nn][models]") {
    const auto mlp = nn::make_model("mlp");
    const int64_t mlp_want =
        linear_params(784, 512) + linear_params(512, 256) + linear_params(256, 10);
    CHECK(mlp_want == 535818);  // as documented
    CHECK(nn::parameter_count(*mlp) == mlp_want);
    CHECK(mlp->type_name() == "Sequential");

    const auto resnet = nn::make_model("resnet8");
    const int64_t resnet_want = conv_params(1, 16, 3) + bn_params(16)  // stem
                                + basic_block_params(16, 16, false)    // layer1, stride 1
                                + basic_block_params(16, 32, true)     // layer2, stride 2
                                + basic_block_params(32, 64, true)     // layer3, stride 2
                                + linear_params(64, 10);               // fc
    CHECK(resnet_want == 77754);                                       // as documented
    CHECK(nn::parameter_count(*resnet) == resnet_want);
    CHECK(resnet->type_name() == "ResNet8");

    // Every conv is bias-free; BNs carry running statistics.
    int convs = 0, bns = 0;
    for (auto& [name, m] : resnet->named_modules()) {
        if (auto* conv = dynamic_cast<nn::Conv2d*>(m)) {
            INFO(name);
            CHECK_FALSE(conv->bias.defined());
            ++convs;
        }
        if (dynamic_cast<nn::BatchNorm2d*>(m)) ++bns;
    }
    CHECK(convs == 9);  // stem, 2 + 2 + 2 in the blocks, 2 shortcuts
    CHECK(bns == 9);
    CHECK(resnet->named_buffers().size() == size_t(3 * bns));
    const auto names = resnet->state_dict();
    CHECK(names.front().first == "stem.conv.weight");
    bool has_shortcut = false, has_layer1_shortcut = false;
    for (const auto& [n, _] : names) {
        has_shortcut |= n == "layer3.shortcut.conv.weight";
        has_layer1_shortcut |= n.rfind("layer1.shortcut", 0) == 0;
    }
    CHECK(has_shortcut);
    CHECK_FALSE(has_layer1_shortcut);

    CHECK(nn::model_names() == std::vector<std::string>{"mlp", "resnet8"});
    REQUIRE_THROWS_WITH_MSG(nn::make_model("vgg16"), "unknown model 'vgg16' (known: mlp, resnet8)");
}

TEST_CASE("models: resnet8 forward shape and a backward that reaches every parameter",
          "[nn][models]") {
    manual_seed(80);
    const auto model = nn::make_model("resnet8");
    const Tensor x = random_tensor({2, 1, 28, 28}, DType::f32, 81);
    const Tensor out = (*model)(x);
    REQUIRE(out.shape() == Shape{2, 10});
    cross_entropy(out, from_vector<int64_t>({3, 7})).backward();
    for (const auto& [n, p] : model->named_parameters()) {
        INFO(n);
        const Tensor g = p.grad();
        REQUIRE(g.defined());
        CHECK(g.shape() == p.shape());
        bool finite = true, nonzero = false;
        for (double v : values(g)) finite &= std::isfinite(v), nonzero |= v != 0;
        CHECK(finite);
        CHECK(nonzero);
    }
    REQUIRE_THROWS_WITH_MSG((*model)(zeros({2, 784})),
                            "ResNet8: expected images [N, C, H, W], got [2, 784]");

    // The MLP takes flat vectors or 1×28×28 images.
    const auto mlp = nn::make_model("mlp");
    CHECK((*mlp)(zeros({3, 784})).shape() == Shape{3, 10});
    CHECK((*mlp)(zeros({3, 1, 28, 28})).shape() == Shape{3, 10});
}

TEST_CASE("models: resnet8 on a channels-last batch computes the NCHW step", "[nn][models]") {
    // Every activation and activation gradient stays channels-last (convs,
    // batch norms, ReLUs, adds, pooling); the loss and every gradient match
    // the NCHW step up to the order of the kernels' sums.
    manual_seed(82);
    const auto nchw = nn::make_model("resnet8");
    manual_seed(82);
    const auto last = nn::make_model("resnet8");
    const Tensor x = random_tensor({16, 1, 28, 28}, DType::f32, 83);
    const Tensor y = random_tensor({16}, DType::i64, 84, 0, 10);
    const Tensor xl = x.contiguous(MemoryFormat::channels_last);
    REQUIRE(xl.suggest_memory_format() == MemoryFormat::channels_last);
    const Tensor loss = cross_entropy((*nchw)(x), y), loss_l = cross_entropy((*last)(xl), y);
    check_close(loss_l, loss, 1e-5, 1e-6);
    loss.backward();
    loss_l.backward();
    const auto want = nchw->named_parameters(), got = last->named_parameters();
    REQUIRE(want.size() == got.size());
    for (size_t i = 0; i < want.size(); ++i) {
        INFO(want[i].first);
        check_close(got[i].second.grad(), want[i].second.grad(), 1e-3, 1e-5);
    }
    // The activations are channels-last: the format flows from the batch.
    nn::ResNet8 model;
    const Tensor stem = (*model.stem)(xl);
    CHECK(stem.suggest_memory_format() == MemoryFormat::channels_last);
    CHECK((*model.layer2)((*model.layer1)(stem)).suggest_memory_format() ==
          MemoryFormat::channels_last);
}

TEST_CASE("models: the MLP fits a small batch with plain SGD", "[nn][models]") {
    manual_seed(90);
    const auto model = nn::make_model("mlp");
    const Tensor x = random_tensor({64, 784}, DType::f32, 91, -1.0, 1.0);
    const Tensor y = random_tensor({64}, DType::i64, 92, 0, 10);
    double first = 0, loss = 0;
    int steps = 0;
    for (; steps < 300; ++steps) {
        const Tensor l = cross_entropy((*model)(x), y);
        loss = l.item();
        if (steps == 0) first = loss;
        if (loss < 0.05) break;
        l.backward();
        sgd_step(*model, 0.1);
    }
    INFO("loss " << first << " -> " << loss << " after " << steps << " steps");
    CHECK(first > 2.0);  // about ln 10 at the start
    CHECK(loss < 0.05);
    // The labels are memorized.
    CHECK(values(argmax((*model)(x), 1)) == values(y));
}

TEST_CASE("weights: save then load into a fresh model is bit-exact", "[nn][weights]") {
    ScratchDir dir("nn-weights");
    const std::string path = dir.file("resnet8.safetensors");
    manual_seed(100);
    const auto a = nn::make_model("resnet8");
    train_a_little(*a, 2, DType::f32, 101);
    nn::save(*a, path, {{"model", "resnet8"}});
    CHECK(nn::load_safetensors(path).metadata.at("model") == "resnet8");

    manual_seed(200);  // different initial weights
    const auto b = nn::make_model("resnet8");
    REQUIRE(raw_bytes(b->parameters()[0]) != raw_bytes(a->parameters()[0]));
    nn::load(*b, path);
    const auto sa = a->state_dict(), sb = b->state_dict();
    REQUIRE(sa.size() == sb.size());
    for (size_t i = 0; i < sa.size(); ++i) {
        INFO(sa[i].first);
        CHECK(sb[i].first == sa[i].first);
        CHECK(sb[i].second.dtype() == sa[i].second.dtype());
        CHECK(raw_bytes(sb[i].second) == raw_bytes(sa[i].second));
    }
    CHECK(b->state_dict().back().first == "layer3.shortcut.bn.num_batches_tracked");
    CHECK(b->state_dict().back().second.item() == 2);
    a->eval();
    b->eval();
    const Tensor x = random_tensor({3, 1, 28, 28}, DType::f32, 102);
    CHECK(raw_bytes((*a)(x)) == raw_bytes((*b)(x)));

    // f64 weights keep every bit too.
    const std::string path64 = dir.file("mlp64.safetensors");
    const auto m1 = nn::make_model("mlp");
    m1->to(DType::f64);
    nn::save(*m1, path64);
    const auto m2 = nn::make_model("mlp");
    m2->to(DType::f64);
    nn::load(*m2, path64);
    for (size_t i = 0; i < m1->parameters().size(); ++i)
        CHECK(raw_bytes(m2->parameters()[i]) == raw_bytes(m1->parameters()[i]));
}

TEST_CASE("weights: a different architecture or a damaged file is an error", "[nn][weights]") {
    ScratchDir dir("nn-weights-bad");
    const std::string path = dir.file("resnet8.safetensors");
    const auto resnet = nn::make_model("resnet8");
    nn::save(*resnet, path);

    const auto mlp = nn::make_model("mlp");
    const auto before = raw_bytes(mlp->parameters()[0]);
    REQUIRE_THROWS_WITH_MSG(nn::load(*mlp, path), "loading '" + path + "': ");
    REQUIRE_THROWS_WITH_MSG(nn::load(*mlp, path), "missing keys: 1.weight, 1.bias, 3.weight");
    REQUIRE_THROWS_WITH_MSG(nn::load(*mlp, path), "unexpected keys: fc.bias, fc.weight, layer1.");
    CHECK(raw_bytes(mlp->parameters()[0]) == before);
    // Not strict: no key in common is loaded, and nothing fails.
    nn::load(*mlp, path, false);
    CHECK(raw_bytes(mlp->parameters()[0]) == before);

    // A truncated file: an ember::Error naming the path, no crash.
    const Bytes bytes = read_bytes(path);
    const std::string cut = dir.file("cut.safetensors");
    for (size_t keep : {size_t(0), size_t(5), size_t(100), bytes.size() / 2, bytes.size() - 1}) {
        INFO("kept " << keep << " of " << bytes.size() << " bytes");
        write_bytes(cut, Bytes(bytes.begin(), bytes.begin() + std::ptrdiff_t(keep)));
        const auto fresh = nn::make_model("resnet8");
        REQUIRE_THROWS_AS(nn::load(*fresh, cut), Error);
        REQUIRE_THROWS_WITH_MSG(nn::load(*fresh, cut), cut);
    }
    REQUIRE_THROWS_WITH_MSG(nn::load(*mlp, dir.file("absent.safetensors")), "absent.safetensors");
}

// nn::Module: registration (dotted names, order, rejected names), train/eval
// propagation, to(dtype) keeping tensor identity, zero_grad both ways,
// state_dict / load_state_dict with every error path, and the printed tree.
#include <sstream>

#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// A nested custom module: an own parameter, a Linear, a Sequential and a buffer.
struct Net : nn::Module {
    Net() {
        alpha = register_parameter("alpha", ones({2}));
        fc = register_module("fc", nn::Linear(3, 4));
        body = register_module("body", nn::Sequential(nn::Linear(4, 5), nn::ReLU(),
                                                      nn::Linear(5, 2, {.bias = false})));
        scale = register_buffer("scale", full({2}, 3.0));
    }
    Tensor forward(const Tensor& x) override {
        return body->forward(fc->forward(x)) * alpha * scale;
    }
    std::string type_name() const override { return "Net"; }

    Tensor alpha, scale;
    std::shared_ptr<nn::Linear> fc;
    std::shared_ptr<nn::Sequential> body;
};

std::vector<std::string> names_of(const nn::NamedTensors& list) {
    std::vector<std::string> out;
    for (const auto& [n, _] : list) out.push_back(n);
    return out;
}

// Raw element values of every entry, for "nothing changed" checks.
std::vector<std::vector<double>> snapshot(const nn::Module& m) {
    std::vector<std::vector<double>> out;
    for (const auto& [_, t] : m.state_dict()) out.push_back(values(t));
    return out;
}

// A state_dict of `m`'s keys, each a fresh copy of `m`'s tensor with values shifted by `delta`.
nn::NamedTensors shifted_copy(const nn::Module& m, double delta) {
    nn::NamedTensors out;
    for (const auto& [n, t] : m.state_dict()) {
        Tensor c = t.detach().clone();
        if (is_floating(c.dtype())) c = kernels::add(c, delta);
        out.emplace_back(n, c);
    }
    return out;
}

}  // namespace

TEST_CASE("module: dotted names in registration order", "[nn][module]") {
    Net net;
    const std::vector<std::string> params = {"alpha",         "fc.weight",   "fc.bias",
                                             "body.0.weight", "body.0.bias", "body.2.weight"};
    CHECK(names_of(net.named_parameters()) == params);
    CHECK(names_of(net.named_parameters(false)) == std::vector<std::string>{"alpha"});
    CHECK(names_of(net.named_buffers()) == std::vector<std::string>{"scale"});
    std::vector<std::string> state = params;
    state.push_back("scale");  // parameters first, then buffers
    CHECK(names_of(net.state_dict()) == state);

    std::vector<std::string> modules;
    for (auto& [n, _] : net.named_modules()) modules.push_back(n);
    CHECK(modules == std::vector<std::string>{"", "fc", "body", "body.0", "body.1", "body.2"});
    REQUIRE(net.named_children().size() == 2);
    CHECK(net.named_children()[1].first == "body");

    // The handles the module returns are the tensors the layers hold.
    const std::vector<Tensor> ps = net.parameters();
    REQUIRE(ps.size() == params.size());
    CHECK(ps[1].is_same(net.fc->weight));
    CHECK(ps[5].is_same(std::dynamic_pointer_cast<nn::Linear>((*net.body)[2])->weight));
    CHECK(nn::parameter_count(net) == 2 + 3 * 4 + 4 + 4 * 5 + 5 + 5 * 2);
}

TEST_CASE("module: parameters require grad, buffers do not", "[nn][module]") {
    Net net;
    for (const auto& [n, t] : net.named_parameters()) {
        INFO(n);
        CHECK(t.requires_grad());
        CHECK(t.is_leaf());
    }
    for (const auto& [n, t] : net.named_buffers()) CHECK_FALSE(t.requires_grad());
    const Tensor frozen = net.register_parameter("frozen", zeros({3}), false);
    CHECK_FALSE(frozen.requires_grad());
    CHECK(net.named_parameters(false).back().first == "frozen");
}

TEST_CASE("module: duplicate, invalid and undefined registrations are rejected", "[nn][module]") {
    Net net;
    REQUIRE_THROWS_WITH_MSG(net.register_parameter("alpha", zeros({1})),
                            "Net: the name 'alpha' is already registered");
    REQUIRE_THROWS_WITH_MSG(net.register_buffer("fc", zeros({1})),
                            "Net: the name 'fc' is already registered");
    REQUIRE_THROWS_WITH_MSG(net.register_module("scale", nn::ReLU()),
                            "Net: the name 'scale' is already registered");
    REQUIRE_THROWS_WITH_MSG(net.register_parameter("", zeros({1})), "Net: invalid name ''");
    REQUIRE_THROWS_WITH_MSG(net.register_buffer("a.b", zeros({1})), "Net: invalid name 'a.b'");
    REQUIRE_THROWS_WITH_MSG(net.register_parameter("w", Tensor()),
                            "Net: parameter 'w' is undefined");
    REQUIRE_THROWS_WITH_MSG(net.register_buffer("b", Tensor()), "Net: buffer 'b' is undefined");
    REQUIRE_THROWS_WITH_MSG(net.register_module("m", std::shared_ptr<nn::ReLU>()),
                            "Net: submodule 'm' is null");
    // The failed attempts registered nothing.
    CHECK(net.state_dict().size() == 7);
    CHECK(net.named_children().size() == 2);

    nn::Module bare;
    REQUIRE_THROWS_WITH_MSG(bare.forward(zeros({1})), "Module: forward is not implemented");
}

TEST_CASE("module: train/eval reach every child, including ones registered later", "[nn][module]") {
    Net net;
    auto all_training = [&](bool want) {
        for (auto& [n, m] : net.named_modules()) {
            INFO("module '" << n << "'");
            CHECK(m->is_training() == want);
        }
    };
    all_training(true);
    net.eval();
    all_training(false);
    auto late = net.register_module("late", nn::Dropout(0.5));
    CHECK_FALSE(late->is_training());
    net.body->push_back(nn::Dropout(0.1));
    all_training(false);
    net.train();
    all_training(true);
    net.train(false);
    all_training(false);
}

TEST_CASE("module: to(f64) converts floating tensors in place, keeping identity", "[nn][module]") {
    Net net;
    net.register_module("bn", nn::BatchNorm2d(2));
    const Tensor w_before = net.fc->weight;
    const std::vector<Tensor> ps_before = net.parameters();
    const std::vector<double> w_values = values(w_before);
    net.fc->weight.set_grad(full({4, 3}, 0.5));

    net.to(DType::f64);
    for (const auto& [n, t] : net.state_dict()) {
        INFO(n);
        CHECK(t.dtype() == (n == "bn.num_batches_tracked" ? DType::i64 : DType::f64));
    }
    CHECK(w_before.dtype() == DType::f64);  // a handle taken before sees the change
    CHECK(values(w_before) == w_values);    // f32 -> f64 is exact
    const std::vector<Tensor> ps_after = net.parameters();
    REQUIRE(ps_after.size() == ps_before.size());
    for (size_t i = 0; i < ps_after.size(); ++i) CHECK(ps_after[i].is_same(ps_before[i]));
    CHECK(net.fc->weight.requires_grad());
    REQUIRE(net.fc->weight.grad().defined());
    CHECK(net.fc->weight.grad().dtype() == DType::f64);
    CHECK(values(net.fc->weight.grad()) == std::vector<double>(12, 0.5));

    // It still computes and back-propagates, now in f64.
    net.zero_grad();
    const Tensor y = net(random_tensor({2, 3}, DType::f64, 1));
    CHECK(y.dtype() == DType::f64);
    y.backward(ones({2, 2}, {.dtype = DType::f64}));
    for (const auto& [n, t] : net.named_parameters()) {
        if (n.rfind("bn.", 0) == 0) continue;  // registered, but not used by forward
        INFO(n);
        REQUIRE(t.grad().defined());
        CHECK(t.grad().dtype() == DType::f64);
    }
    net.to(Device::cpu());  // already there: nothing changes
    CHECK(net.fc->weight.dtype() == DType::f64);
    CHECK(net.parameters()[1].is_same(ps_before[1]));
    REQUIRE_THROWS_WITH_MSG(net.to(DType::i64), "Net.to: expected a floating dtype, got i64");
}

TEST_CASE("module: zero_grad clears to none, or to zeros", "[nn][module]") {
    Net net;
    net(random_tensor({4, 3}, DType::f32, 2)).backward(ones({4, 2}));
    for (const auto& [n, t] : net.named_parameters()) {
        INFO(n);
        CHECK(t.grad().defined());
    }
    net.zero_grad(false);
    for (const auto& [n, t] : net.named_parameters()) {
        INFO(n);
        REQUIRE(t.grad().defined());
        CHECK(values(t.grad()) == std::vector<double>(size_t(t.numel()), 0.0));
    }
    net.zero_grad();
    for (const auto& [n, t] : net.named_parameters()) CHECK_FALSE(t.grad().defined());
    net.zero_grad(false);  // nothing to zero: stays none
    for (const auto& [n, t] : net.named_parameters()) CHECK_FALSE(t.grad().defined());
}

TEST_CASE("module: load_state_dict round trip is bit-exact", "[nn][module]") {
    manual_seed(11);
    Net a;
    manual_seed(12);
    Net b;
    REQUIRE(values(a.fc->weight) != values(b.fc->weight));
    a.scale.fill_(7.25);
    const Tensor b_weight = b.fc->weight;
    b.load_state_dict(a.state_dict());
    CHECK(snapshot(b) == snapshot(a));
    CHECK(b.fc->weight.is_same(b_weight));  // copied into, not replaced
    CHECK_FALSE(b.fc->weight.storage().get() == a.fc->weight.storage().get());
    const Tensor x = random_tensor({3, 3}, DType::f32, 3);
    CHECK(values(b(x)) == values(a(x)));
}

TEST_CASE("module: load_state_dict lists every missing, unexpected and mis-shaped key",
          "[nn][module]") {
    Net net;
    const auto before = snapshot(net);
    nn::NamedTensors good = shifted_copy(net, 1.0);

    nn::NamedTensors bad;  // drops fc.bias and scale, adds two keys, mis-shapes two
    for (const auto& [n, t] : good) {
        if (n == "fc.bias" || n == "scale") continue;
        if (n == "body.0.weight")
            bad.emplace_back(n, zeros({5, 3}));
        else if (n == "alpha")
            bad.emplace_back(n, zeros({3}));
        else
            bad.emplace_back(n, t);
    }
    bad.emplace_back("extra", zeros({1}));
    bad.emplace_back("body.9.weight", zeros({1}));
    REQUIRE_THROWS_WITH_MSG(
        net.load_state_dict(bad),
        "load_state_dict into Net: missing keys: fc.bias, scale; "
        "unexpected keys: body.9.weight, extra; wrong shapes: alpha "
        "(expected [2], got [3]), body.0.weight (expected [5, 4], got [5, 3]);");
    CHECK(snapshot(net) == before);

    SECTION("non-strict ignores missing and unexpected keys but not shapes") {
        REQUIRE_THROWS_WITH_MSG(net.load_state_dict(bad, false),
                                "load_state_dict into Net: wrong shapes: alpha (expected [2], "
                                "got [3]), body.0.weight (expected [5, 4], got [5, 3]);");
        CHECK(snapshot(net) == before);
        try {
            net.load_state_dict(bad, false);
        } catch (const Error& e) {
            CHECK(std::string(e.what()).find("missing") == std::string::npos);
            CHECK(std::string(e.what()).find("unexpected") == std::string::npos);
        }

        nn::NamedTensors partial;  // fc.weight only, plus one unknown key
        partial.emplace_back("fc.weight", good[1].second);
        partial.emplace_back("nope", zeros({2}));
        net.load_state_dict(partial, false);
        const auto after = snapshot(net);
        for (size_t i = 0; i < after.size(); ++i) {
            INFO("entry " << i);
            if (i == 1)
                CHECK(after[i] == values(good[1].second));
            else
                CHECK(after[i] == before[i]);
        }
    }
    SECTION("strict mode: only missing keys") {
        nn::NamedTensors missing(good.begin() + 1, good.end());
        REQUIRE_THROWS_WITH_MSG(net.load_state_dict(missing),
                                "load_state_dict into Net: missing keys: alpha;");
        CHECK(snapshot(net) == before);
    }
    SECTION("strict mode: only an unexpected key") {
        nn::NamedTensors more = good;
        more.emplace_back("fc.gamma", zeros({4}));
        REQUIRE_THROWS_WITH_MSG(net.load_state_dict(more),
                                "load_state_dict into Net: unexpected keys: fc.gamma;");
        CHECK(snapshot(net) == before);
    }
    SECTION("a key given twice") {
        nn::NamedTensors twice = good;
        twice.push_back(good[0]);
        REQUIRE_THROWS_WITH_MSG(net.load_state_dict(twice),
                                "load_state_dict: key 'alpha' given twice");
        CHECK(snapshot(net) == before);
    }
}

TEST_CASE("module: printing shows the tree", "[nn][module]") {
    Net net;
    std::ostringstream os;
    os << net;
    CHECK(os.str() ==
          "Net\n"
          "  fc: Linear(in=3, out=4, bias=true)\n"
          "  body: Sequential\n"
          "    body.0: Linear(in=4, out=5, bias=true)\n"
          "    body.1: ReLU\n"
          "    body.2: Linear(in=5, out=2, bias=false)\n");
}


TEST_CASE("Module: a parameter registered twice is listed once", "[nn][module]") {
    nn::Sequential s;
    nn::Linear lin(2, 2, {.bias = false});
    const Tensor w = lin.weight;
    s.push_back(std::move(lin));
    struct Holder : nn::Module {
        explicit Holder(const Tensor& w) { register_parameter("w", w); }
    };
    s.push_back(Holder(w));
    REQUIRE(s.parameters().size() == 1);
    REQUIRE(nn::parameter_count(s) == 4);
    REQUIRE(s.state_dict().size() == 2);  // every name is saved, as PyTorch
}

TEST_CASE("Module: a parameter must be a leaf", "[nn][module]") {
    struct Bad : nn::Module {
        explicit Bad(const Tensor& t) { register_parameter("p", t); }
    };
    Tensor base = randn({2}).set_requires_grad(true);
    REQUIRE_THROWS_WITH_MSG(Bad(mul(base, 2.0)), "parameter 'p' was computed by 'mul' (not a leaf)");
}

TEST_CASE("Module: to() between forward and backward is caught", "[nn][module]") {
    nn::Linear lin(3, 2);
    Tensor x = randn({4, 3}).set_requires_grad(true);  // so the weight is saved
    Tensor loss = sum(lin(x));
    lin.to(DType::f64);
    REQUIRE_THROWS_WITH_MSG(loss.backward(), "modified in place");
    // A graph that saved no weight still delivers a gradient in the weight's new dtype.
    Tensor loss2 = sum(lin(randn({4, 3}, {DType::f64})));
    lin.to(DType::f32);
    loss2.backward();
    REQUIRE(lin.weight.grad().dtype() == DType::f32);
    lin.zero_grad();
    lin.to(DType::f64);
    lin.to(DType::f64);  // already there: not a change
    Tensor again = sum(lin(randn({4, 3}, {DType::f64})));
    lin.to(DType::f64);
    again.backward();
    REQUIRE(lin.weight.grad().dtype() == DType::f64);
}

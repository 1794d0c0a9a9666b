// Gradients of Tensor's recorded view and copy methods by gradcheck: view,
// reshape (a view and a copy), flatten, squeeze, unsqueeze, permute,
// transpose, t, slice with steps, narrow, select, expand, contiguous, clone
// and to(dtype), alone and chained, on contiguous and transposed inputs.
#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

using ViewFn = std::function<Tensor(const Tensor&)>;

void check_views(const std::vector<std::pair<const char*, ViewFn>>& cases, const Tensor& x) {
    for (const auto& [name, f] : cases) {
        INFO(name << " of " << shape_str(x.shape()));
        check_grad([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x});
    }
}

void check_view(const Tensor& x, const char* name, const ViewFn& f) { check_views({{name, f}}, x); }

}  // namespace

TEST_CASE("grad: view, reshape and flatten", "[grad]") {
    const Tensor x = leaf({2, 3, 4}, 1);
    check_view(x, "view", [](const Tensor& t) { return t.view({4, 6}); });
    check_view(x, "view -1", [](const Tensor& t) { return t.view({-1}); });
    check_view(x, "reshape", [](const Tensor& t) { return t.reshape({3, -1}); });
    check_view(x, "reshape of a transpose (copies)", [](const Tensor& t) {
        return t.transpose(0, 2).reshape({4, 6});
    });
    check_view(x, "flatten", [](const Tensor& t) { return t.flatten(); });
    check_view(x, "flatten(1)", [](const Tensor& t) { return t.flatten(1); });
    check_view(x, "flatten(0, 1)", [](const Tensor& t) { return t.flatten(0, 1); });
    check_view(x, "flatten(-2, -1) of a permute", [](const Tensor& t) {
        return t.permute({2, 0, 1}).flatten(-2, -1);
    });
}

TEST_CASE("grad: squeeze and unsqueeze", "[grad]") {
    check_views(
        {
            {"squeeze()", [](const Tensor& t) { return t.squeeze(); }},
            {"squeeze(1)", [](const Tensor& t) { return t.squeeze(1); }},
            {"squeeze(-1)", [](const Tensor& t) { return t.squeeze(-1); }},
            {"squeeze(0) of a non-1 dim", [](const Tensor& t) { return t.squeeze(0); }},
            {"unsqueeze(0)", [](const Tensor& t) { return t.unsqueeze(0); }},
            {"unsqueeze(-1)", [](const Tensor& t) { return t.unsqueeze(-1); }},
            {"unsqueeze(2) after squeeze",
             [](const Tensor& t) { return t.squeeze().unsqueeze(2); }},
        },
        leaf({2, 1, 3, 1}, 2));
    check_views({{"unsqueeze of 0-d", [](const Tensor& t) { return t.unsqueeze(0); }},
                 {"squeeze of 0-d", [](const Tensor& t) { return t.squeeze(); }}},
                leaf({}, 3));
}

TEST_CASE("grad: permute, transpose and t", "[grad]") {
    const Tensor x = leaf({2, 3, 4}, 4);
    check_view(x, "permute", [](const Tensor& t) { return t.permute({2, 0, 1}); });
    check_view(x, "permute negative", [](const Tensor& t) { return t.permute({-1, 0, -2}); });
    check_view(x, "permute twice", [](const Tensor& t) {
        return t.permute({1, 2, 0}).permute({2, 0, 1});
    });
    check_view(x, "transpose(0, 2)", [](const Tensor& t) { return t.transpose(0, 2); });
    check_view(x, "transpose(-1, 0)", [](const Tensor& t) { return t.transpose(-1, 0); });
    check_view(x, "select then t", [](const Tensor& t) { return t.select(0, 1).t(); });
    check_view(leaf({5}, 5), "t of 1-d", [](const Tensor& t) { return t.t(); });
}

TEST_CASE("grad: slice with steps, narrow and select", "[grad]") {
    check_views(
        {
            {"slice step 2", [](const Tensor& t) { return t.slice(1, 0, 5, 2); }},
            {"slice step 3 from 1", [](const Tensor& t) { return t.slice(-1, 1, 5, 3); }},
            {"slice clamped end", [](const Tensor& t) { return t.slice(0, 1, 100); }},
            {"slice empty", [](const Tensor& t) { return t.slice(0, 2, 2); }},
            {"slice of a slice",
             [](const Tensor& t) { return t.slice(1, 1, 5, 2).slice(0, 0, 3, 2); }},
            {"narrow", [](const Tensor& t) { return t.narrow(1, 1, 3); }},
            {"narrow negative dim", [](const Tensor& t) { return t.narrow(-2, 2, 1); }},
            {"select", [](const Tensor& t) { return t.select(0, 1); }},
            {"select negative", [](const Tensor& t) { return t.select(-1, 4); }},
            {"select of t", [](const Tensor& t) { return t.t().select(0, 3); }},
            {"overlapping uses",
             [](const Tensor& t) { return add(t.narrow(1, 0, 3), t.slice(1, 2, 5)); }},
        },
        leaf({3, 5}, 6));
}

TEST_CASE("grad: expand sums the gradient over the broadcast dims", "[grad]") {
    const Tensor x = leaf({3, 1}, 7);
    check_view(x, "expand", [](const Tensor& t) { return t.expand({2, 3, 4}); });
    check_view(x, "expand -1", [](const Tensor& t) { return t.expand({-1, 4}); });
    check_view(x, "expand of t", [](const Tensor& t) { return t.t().expand({2, 4, 3}); });
    check_view(leaf({}, 8), "expand 0-d", [](const Tensor& t) { return t.expand({2, 2}); });
}

TEST_CASE("grad: contiguous, clone and to(dtype)", "[grad]") {
    const Tensor x = leaf({4, 3}, 9);
    check_views(
        {
            {"contiguous of t", [](const Tensor& t) { return t.t().contiguous(); }},
            {"contiguous of a slice",
             [](const Tensor& t) { return t.slice(0, 0, 4, 2).contiguous(); }},
            {"clone", [](const Tensor& t) { return t.clone(); }},
            {"clone of t", [](const Tensor& t) { return t.t().clone(); }},
            {"to(f64) is a no-op", [](const Tensor& t) { return t.to(DType::f64); }},
        },
        x);
    Tensor y = x.t().contiguous();
    REQUIRE(y.is_contiguous());
    REQUIRE(y.grad_fn() != nullptr);
    REQUIRE(x.contiguous().is_same(x));  // already contiguous: the same tensor

    // f64 -> f32 -> f64: f32 rounding ruins FD at eps 1e-6, so a wide step.
    autograd::GradcheckOptions wide;
    wide.eps = 1e-2;
    wide.atol = 1e-4;
    check_grad([](const std::vector<Tensor>& in) { return in[0].to(DType::f32).to(DType::f64); },
               {x}, wide);
    const Tensor w = random_tensor({4, 3}, DType::f64, 10);
    grads_of(
        [&](const std::vector<Tensor>& in) { return mul(in[0].to(DType::f32).to(DType::f64), w); },
        {x});
    REQUIRE(x.grad().dtype() == DType::f64);
    REQUIRE(x.grad().shape() == Shape{4, 3});
    check_close(x.grad(), w, 1e-6, 1e-7);

    // A f32 leaf through to(f64): its gradient comes back as f32.
    Tensor x32 = random_tensor({2, 2}, DType::f32, 11).set_requires_grad(true);
    Tensor z = x32.to(DType::f64);
    REQUIRE(z.grad_fn()->name == "to");
    z.backward(full({2, 2}, 0.25, {DType::f64}));
    REQUIRE(x32.grad().dtype() == DType::f32);
    REQUIRE(values(x32.grad()) == std::vector<double>{0.25, 0.25, 0.25, 0.25});
}

TEST_CASE("grad: as_strided refuses a tensor that requires grad", "[grad]") {
    Tensor x = leaf({2, 3}, 12);
    REQUIRE_THROWS_WITH_MSG(x.as_strided({3}, {2}, 0), "as_strided: not differentiable");
    NoGradGuard no_grad;  // nothing would be recorded: allowed
    REQUIRE(x.as_strided({3}, {2}, 0).shape() == Shape{3});
}

// Differentiable elementwise ops. Each calls its kernel front, then — only
// when an input requires grad — records the backward a few lines below.
// Broadcast inputs get their gradient summed back to their shape (sum_to);
// the engine converts a gradient to its input's dtype where ops promoted.
#include "autograd/ops/elementwise.h"

#include "autograd/graph.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"

namespace ember {
using autograd::sum_to;
using autograd::TensorList;

namespace {

// cond as 0/1 in the dtype of `like` (a gradient mask).
Tensor mask(const Tensor& cond, const Tensor& like) { return cond.to(like.dtype()); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
    Tensor out = kernels::add(a, b);
    if (auto node = autograd::make_node("add", {a, b})) {
        node->backward = [sa = a.shape(), sb = b.shape()](const TensorList& g) {
            return TensorList{sum_to(g[0], sa), sum_to(g[0], sb)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor add(const Tensor& a, double s) {
    Tensor out = kernels::add(a, s);
    if (auto node = autograd::make_node("add", {a})) {
        node->backward = [](const TensorList& g) { return TensorList{g[0]}; };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
    Tensor out = kernels::sub(a, b);
    if (auto node = autograd::make_node("sub", {a, b})) {
        node->backward = [sa = a.shape(), sb = b.shape(),
                          need_b = node->needs_input_grad(1)](const TensorList& g) {
            return TensorList{sum_to(g[0], sa), need_b ? sum_to(kernels::neg(g[0]), sb) : Tensor()};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor sub(const Tensor& a, double s) { return add(a, -s); }

Tensor mul(const Tensor& a, const Tensor& b) {
    Tensor out = kernels::mul(a, b);
    if (auto node = autograd::make_node("mul", {a, b})) {
        const bool ga = node->needs_input_grad(0), gb = node->needs_input_grad(1);
        node->backward = [a = gb ? node->save(a) : Tensor(), b = ga ? node->save(b) : Tensor(),
                          sa = a.shape(), sb = b.shape(), ga, gb](const TensorList& g) {
            return TensorList{ga ? sum_to(kernels::mul(g[0], b), sa) : Tensor(),
                              gb ? sum_to(kernels::mul(g[0], a), sb) : Tensor()};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor mul(const Tensor& a, double s) {
    Tensor out = kernels::mul(a, s);
    if (auto node = autograd::make_node("mul", {a})) {
        node->backward = [s](const TensorList& g) { return TensorList{kernels::mul(g[0], s)}; };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
    Tensor out = kernels::div(a, b);
    if (auto node = autograd::make_node("div", {a, b})) {
        const bool ga = node->needs_input_grad(0), gb = node->needs_input_grad(1);
        // d/da = 1/b, d/db = -a/b² = -out/b.
        node->backward = [b = node->save(b), out = gb ? node->save(out) : Tensor(), sa = a.shape(),
                          sb = b.shape(), ga, gb](const TensorList& g) {
            const Tensor gb_full =
                gb ? kernels::neg(kernels::div(kernels::mul(g[0], out), b)) : Tensor();
            return TensorList{ga ? sum_to(kernels::div(g[0], b), sa) : Tensor(),
                              gb ? sum_to(gb_full, sb) : Tensor()};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor div(const Tensor& a, double s) { return mul(a, 1.0 / s); }

Tensor pow(const Tensor& a, const Tensor& b) {
    Tensor out = kernels::pow(a, b);
    if (auto node = autograd::make_node("pow", {a, b})) {
        const bool ga = node->needs_input_grad(0), gb = node->needs_input_grad(1);
        node->backward = [a = node->save(a), b = node->save(b),
                          out = gb ? node->save(out) : Tensor(), ga, gb](const TensorList& g) {
            Tensor da, db;
            if (ga)  // b·a^(b−1)
                da = sum_to(
                    kernels::mul(g[0], kernels::mul(b, kernels::pow(a, kernels::sub(b, 1.0)))),
                    a.shape());
            if (gb) {  // a^b·log(a), taken as 0 where a == 0
                Tensor lg = kernels::where(kernels::eq(a, 0.0), zeros_like(a), kernels::log(a));
                db = sum_to(kernels::mul(g[0], kernels::mul(out, lg)), b.shape());
            }
            return TensorList{da, db};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor pow(const Tensor& a, double s) {
    Tensor out = kernels::pow(a, s);
    if (auto node = autograd::make_node("pow", {a})) {
        node->backward = [a = node->save(a), s](const TensorList& g) {
            if (s == 0.0) return TensorList{zeros_like(g[0])};
            return TensorList{kernels::mul(g[0], kernels::mul(kernels::pow(a, s - 1.0), s))};
        };
        autograd::set_history(node, out);
    }
    return out;
}

namespace {

// maximum/minimum: the chosen side gets the gradient, ties split it evenly.
Tensor extremum(const char* name, bool is_max, const Tensor& a, const Tensor& b) {
    Tensor out = is_max ? kernels::maximum(a, b) : kernels::minimum(a, b);
    if (auto node = autograd::make_node(name, {a, b})) {
        node->backward = [a = node->save(a), b = node->save(b), is_max](const TensorList& g) {
            const Tensor wins = mask(is_max ? kernels::gt(a, b) : kernels::lt(a, b), g[0]);
            const Tensor ties = kernels::mul(mask(kernels::eq(a, b), g[0]), 0.5);
            const Tensor wa = kernels::add(wins, ties);
            const Tensor wb = kernels::sub(kernels::sub(ones_like(wa), wins), ties);
            return TensorList{sum_to(kernels::mul(g[0], wa), a.shape()),
                              sum_to(kernels::mul(g[0], wb), b.shape())};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor extremum(const char* name, bool is_max, const Tensor& a, double s) {
    Tensor out = is_max ? kernels::maximum(a, s) : kernels::minimum(a, s);
    if (auto node = autograd::make_node(name, {a})) {
        node->backward = [a = node->save(a), s, is_max](const TensorList& g) {
            const Tensor wins = mask(is_max ? kernels::gt(a, s) : kernels::lt(a, s), g[0]);
            const Tensor ties = kernels::mul(mask(kernels::eq(a, s), g[0]), 0.5);
            return TensorList{kernels::mul(g[0], kernels::add(wins, ties))};
        };
        autograd::set_history(node, out);
    }
    return out;
}

// A unary op whose backward is one fused kernel of (g, saved).
template <class Back>
Tensor unary(const char* name, const Tensor& x, Tensor out, bool save_output, Back back) {
    if (auto node = autograd::make_node(name, {x})) {
        node->backward = [s = node->save(save_output ? out : x), back](const TensorList& g) {
            return TensorList{back(g[0], s)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum("maximum", true, a, b); }
Tensor maximum(const Tensor& a, double s) { return extremum("maximum", true, a, s); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum("minimum", false, a, b); }
Tensor minimum(const Tensor& a, double s) { return extremum("minimum", false, a, s); }

Tensor neg(const Tensor& x) {
    Tensor out = kernels::neg(x);
    if (auto node = autograd::make_node("neg", {x})) {
        node->backward = [](const TensorList& g) { return TensorList{kernels::neg(g[0])}; };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor abs(const Tensor& x) {
    return unary("abs", x, kernels::abs(x), false, [](const Tensor& g, const Tensor& x) {
        const Tensor sign =
            kernels::sub(mask(kernels::gt(x, 0.0), g), mask(kernels::lt(x, 0.0), g));
        return kernels::mul(g, sign);
    });
}

Tensor exp(const Tensor& x) {
    return unary("exp", x, kernels::exp(x), true,
                 [](const Tensor& g, const Tensor& y) { return kernels::mul(g, y); });
}

Tensor log(const Tensor& x) {
    return unary("log", x, kernels::log(x), false,
                 [](const Tensor& g, const Tensor& x) { return kernels::div(g, x); });
}

Tensor sqrt(const Tensor& x) {  // d√x = 1 / (2√x)
    return unary("sqrt", x, kernels::sqrt(x), true, [](const Tensor& g, const Tensor& y) {
        return kernels::div(kernels::mul(g, 0.5), y);
    });
}

Tensor rsqrt(const Tensor& x) {  // d x^(-1/2) = -½ x^(-3/2) = -½ y³
    return unary("rsqrt", x, kernels::rsqrt(x), true, [](const Tensor& g, const Tensor& y) {
        return kernels::mul(g, kernels::mul(kernels::mul(kernels::mul(y, y), y), -0.5));
    });
}

Tensor relu(const Tensor& x) {
    return unary("relu", x, kernels::relu(x), true,
                 [](const Tensor& g, const Tensor& y) { return kernels::relu_backward(g, y); });
}

Tensor sigmoid(const Tensor& x) {
    return unary("sigmoid", x, kernels::sigmoid(x), true,
                 [](const Tensor& g, const Tensor& y) { return kernels::sigmoid_backward(g, y); });
}

Tensor tanh(const Tensor& x) {
    return unary("tanh", x, kernels::tanh(x), true,
                 [](const Tensor& g, const Tensor& y) { return kernels::tanh_backward(g, y); });
}

Tensor silu(const Tensor& x) {
    return unary("silu", x, kernels::silu(x), false,
                 [](const Tensor& g, const Tensor& x) { return kernels::silu_backward(g, x); });
}

Tensor gelu(const Tensor& x, GeluApprox approximate) {
    return unary("gelu", x, kernels::gelu(x, approximate), false,
                 [approximate](const Tensor& g, const Tensor& x) {
                     return kernels::gelu_backward(g, x, approximate);
                 });
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
    return unary("clamp", x, kernels::clamp(x, lo, hi), false,
                 [lo, hi](const Tensor& g, const Tensor& x) {
                     Tensor inside = ones_like(g);
                     if (lo) inside = kernels::mul(inside, mask(kernels::ge(x, *lo), g));
                     if (hi) inside = kernels::mul(inside, mask(kernels::le(x, *hi), g));
                     return kernels::mul(g, inside);
                 });
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
    Tensor out = kernels::where(cond, a, b);
    if (auto node = autograd::make_node("where", {Tensor(), a, b})) {
        node->backward = [c = node->save(cond), sa = a.shape(), sb = b.shape()](const TensorList& g) {
            const Tensor z = zeros_like(g[0]);
            return TensorList{Tensor(), sum_to(kernels::where(c, g[0], z), sa),
                              sum_to(kernels::where(c, z, g[0]), sb)};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor eq(const Tensor& a, const Tensor& b) { return kernels::eq(a, b); }
Tensor eq(const Tensor& a, double s) { return kernels::eq(a, s); }
Tensor ne(const Tensor& a, const Tensor& b) { return kernels::ne(a, b); }
Tensor ne(const Tensor& a, double s) { return kernels::ne(a, s); }
Tensor lt(const Tensor& a, const Tensor& b) { return kernels::lt(a, b); }
Tensor lt(const Tensor& a, double s) { return kernels::lt(a, s); }
Tensor le(const Tensor& a, const Tensor& b) { return kernels::le(a, b); }
Tensor le(const Tensor& a, double s) { return kernels::le(a, s); }
Tensor gt(const Tensor& a, const Tensor& b) { return kernels::gt(a, b); }
Tensor gt(const Tensor& a, double s) { return kernels::gt(a, s); }
Tensor ge(const Tensor& a, const Tensor& b) { return kernels::ge(a, b); }
Tensor ge(const Tensor& a, double s) { return kernels::ge(a, s); }

namespace {

// In-place ops run unrecorded, after the checks that keep them from breaking a graph.
template <class Other>
Tensor inplace(const char* name, Tensor (*kernel)(const Tensor&, Other), const Tensor& a,
               Other other) {
    if constexpr (std::is_same_v<Other, const Tensor&>)
        autograd::check_inplace(a, name, {other});
    else
        autograd::check_inplace(a, name);
    return kernel(a, other);
}

}  // namespace

Tensor add_(const Tensor& a, const Tensor& b) {
    return inplace<const Tensor&>("add_", kernels::add_, a, b);
}
Tensor add_(const Tensor& a, double s) { return inplace<double>("add_", kernels::add_, a, s); }
Tensor sub_(const Tensor& a, const Tensor& b) {
    return inplace<const Tensor&>("sub_", kernels::sub_, a, b);
}
Tensor sub_(const Tensor& a, double s) { return inplace<double>("sub_", kernels::sub_, a, s); }
Tensor mul_(const Tensor& a, const Tensor& b) {
    return inplace<const Tensor&>("mul_", kernels::mul_, a, b);
}
Tensor mul_(const Tensor& a, double s) { return inplace<double>("mul_", kernels::mul_, a, s); }
Tensor div_(const Tensor& a, const Tensor& b) {
    return inplace<const Tensor&>("div_", kernels::div_, a, b);
}
Tensor div_(const Tensor& a, double s) { return inplace<double>("div_", kernels::div_, a, s); }

}  // namespace ember

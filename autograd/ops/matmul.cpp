// Differentiable matrix products. For C = A·B: dA = dC·Bᵀ and dB = Aᵀ·dC,
// with transposes read in place by the GEMM (no copies) and broadcast batch
// dims summed back.
#include "autograd/ops/matmul.h"

#include "autograd/autocast.h"
#include "autograd/graph.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"

namespace ember {
using autograd::sum_to;
using autograd::TensorList;

namespace {

Tensor mT(const Tensor& t) { return views::transpose(t, -1, -2); }

}  // namespace

Tensor matmul(const Tensor& a0, const Tensor& b0) {
    const Tensor a = amp::cast_input("matmul", a0), b = amp::cast_input("matmul", b0);
    Tensor out = kernels::matmul(a, b);
    if (auto node = autograd::make_node("matmul", {a, b})) {
        const bool ga = node->needs_input_grad(0), gb = node->needs_input_grad(1);
        node->backward = [a = node->save(a), b = node->save(b), ga, gb](const TensorList& g) {
            // Treat 1-d operands as a row (a) / column (b) matrix, as the forward does.
            const Tensor a2 = a.dim() == 1 ? views::unsqueeze(a, 0) : a;
            const Tensor b2 = b.dim() == 1 ? views::unsqueeze(b, 1) : b;
            // ... and put the removed dims back into the gradient of the result.
            Tensor g2 = g[0];
            if (a.dim() == 1 && b.dim() == 1)
                g2 = kernels::reshape(g2, {1, 1});
            else if (a.dim() == 1)
                g2 = views::unsqueeze(g2, g2.dim() - 1);
            else if (b.dim() == 1)
                g2 = views::unsqueeze(g2, g2.dim());
            Tensor da, db;
            if (ga)
                da = kernels::reshape(sum_to(kernels::matmul(g2, mT(b2)), a2.shape()), a.shape());
            if (gb)
                db = kernels::reshape(sum_to(kernels::matmul(mT(a2), g2), b2.shape()), b.shape());
            return TensorList{da, db};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor bmm(const Tensor& a0, const Tensor& b0) {
    const Tensor a = amp::cast_input("bmm", a0), b = amp::cast_input("bmm", b0);
    Tensor out = kernels::bmm(a, b);
    if (auto node = autograd::make_node("bmm", {a, b})) {
        const bool ga = node->needs_input_grad(0), gb = node->needs_input_grad(1);
        node->backward = [a = gb ? node->save(a) : Tensor(), b = ga ? node->save(b) : Tensor(), ga,
                          gb](const TensorList& g) {
            return TensorList{ga ? kernels::bmm(g[0], mT(b)) : Tensor(),
                              gb ? kernels::bmm(mT(a), g[0]) : Tensor()};
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor addmm(const Tensor& c0, const Tensor& a0, const Tensor& b0) {
    const Tensor c = amp::cast_input("addmm", c0), a = amp::cast_input("addmm", a0),
                 b = amp::cast_input("addmm", b0);
    Tensor out = kernels::addmm(c, a, b);
    if (auto node = autograd::make_node("addmm", {c, a, b})) {
        const bool ga = node->needs_input_grad(1), gb = node->needs_input_grad(2);
        node->backward = [a = gb ? node->save(a) : Tensor(), b = ga ? node->save(b) : Tensor(),
                          sc = c.shape(), ga, gb](const TensorList& g) {
            return TensorList{sum_to(g[0], sc), ga ? kernels::matmul(g[0], mT(b)) : Tensor(),
                              gb ? kernels::matmul(mT(a), g[0]) : Tensor()};
        };
        autograd::set_history(node, out);
    }
    return out;
}

namespace {

// linear's gradients from dy [.., out]: with y = x [.., in] · wᵀ + b over all
// rows, dx = dy · w, dw = dyᵀ · x and db = Σ dy (dw and db from one GEMM
// where the backend fuses them: kernels::linear_weight_grad), dw and db in
// the dtypes of the weight and bias the node recorded (Note [Lowered
// weights' gradients]).
TensorList linear_grads(const Tensor& dy, const Tensor& x, const Tensor& w, const Shape& sx,
                        bool gx, bool gw, bool gbias, DType w_dtype, DType b_dtype) {
    const Tensor g2 = kernels::reshape(dy, {-1, dy.size(-1)});
    Tensor dx, dw, db;
    if (gx) dx = kernels::reshape(kernels::matmul(g2, w), sx);
    if (gw) {
        kernels::LinearWeightGrads d = kernels::linear_weight_grad(
            g2, kernels::reshape(x, {-1, sx.back()}), gbias, w_dtype);
        dw = d.weight;
        db = d.bias;
    } else if (gbias) {
        db = kernels::sum(g2, {0});
    }
    if (db.defined() && db.dtype() != b_dtype) db = db.to(b_dtype);
    return TensorList{dx, dw, db};
}

// Note [Lowered weights' gradients]
// Under autocast a linear layer's f32 weight and bias are cast to the low
// precision for the product, but the node records the f32 tensors
// themselves as its inputs: their gradients come straight from the weight
// gradient's GEMM in f32 (on the CPU, bf16's f32 sums as they are: no
// rounding to bf16 and no cast back), not through the casts' nodes. The
// same values as the casts' path, one rounding fewer.
Tensor recorded(const Tensor& given, const Tensor& lowered) {
    return given.defined() && given.dtype() != lowered.dtype() ? given : lowered;
}

DType dtype_of(const Tensor& t) { return t.defined() ? t.dtype() : DType::f32; }

}  // namespace

Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& bias0) {
    const Tensor x = amp::cast_input("linear", x0), w = amp::cast_input("linear", w0),
                 bias = amp::cast_input("linear", bias0);
    Tensor out = kernels::linear(x, w, bias);
    const Tensor rw = recorded(w0, w), rb = recorded(bias0, bias);
    if (auto node = autograd::make_node("linear", {x, rw, rb})) {
        const bool gx = node->needs_input_grad(0), gw = node->needs_input_grad(1),
                   gbias = node->needs_input_grad(2);
        node->backward = [x = gw ? node->save(x) : Tensor(), w = gx ? node->save(w) : Tensor(),
                          sx = x.shape(), gx, gw, gbias, dw = rw.dtype(),
                          db = dtype_of(rb)](const TensorList& g) {
            return linear_grads(g[0], x, w, sx, gx, gw, gbias, dw, db);
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor linear_relu(const Tensor& x0, const Tensor& w0, const Tensor& bias0) {
    const Tensor x = amp::cast_input("linear_relu", x0), w = amp::cast_input("linear_relu", w0),
                 bias = amp::cast_input("linear_relu", bias0);
    Tensor out = kernels::linear_relu(x, w, bias);
    const Tensor rw = recorded(w0, w), rb = recorded(bias0, bias);
    if (auto node = autograd::make_node("linear_relu", {x, rw, rb})) {
        const bool gx = node->needs_input_grad(0), gw = node->needs_input_grad(1),
                   gbias = node->needs_input_grad(2);
        // y > 0 exactly where the pre-ReLU value is > 0: the output is the mask.
        node->backward = [x = gw ? node->save(x) : Tensor(), w = gx ? node->save(w) : Tensor(),
                          y = node->save(out), sx = x.shape(), gx, gw, gbias, dw = rw.dtype(),
                          db = dtype_of(rb)](const TensorList& g) {
            return linear_grads(kernels::relu_backward(g[0], y), x, w, sx, gx, gw, gbias, dw, db);
        };
        autograd::set_history(node, out);
    }
    return out;
}

Tensor linear_gelu(const Tensor& x0, const Tensor& w0, const Tensor& bias0) {
    const Tensor x = amp::cast_input("linear_gelu", x0), w = amp::cast_input("linear_gelu", w0),
                 bias = amp::cast_input("linear_gelu", bias0);
    // The pre-activation only where a backward will read it.
    kernels::LinearGelu r = kernels::linear_gelu(x, w, bias, autograd::needs_grad({x, w, bias}));
    const Tensor rw = recorded(w0, w), rb = recorded(bias0, bias);
    if (auto node = autograd::make_node("linear_gelu", {x, rw, rb})) {
        const bool gx = node->needs_input_grad(0), gw = node->needs_input_grad(1),
                   gbias = node->needs_input_grad(2);
        // Saves the pre-activation (gelu's backward input) instead of the output.
        node->backward = [x = gw ? node->save(x) : Tensor(), w = gx ? node->save(w) : Tensor(),
                          pre = node->save(r.pre), sx = x.shape(), gx, gw, gbias, dw = rw.dtype(),
                          db = dtype_of(rb)](const TensorList& g) {
            return linear_grads(kernels::gelu_backward(g[0], pre, GeluApprox::tanh), x, w, sx, gx,
                                gw, gbias, dw, db);
        };
        autograd::set_history(node, r.out);
    }
    return r.out;
}

}  // namespace ember

// Front functions for the elementwise family: argument checks, result dtype,
// casts of the inputs to the compute dtype, broadcasting, output allocation
// and one call through the dispatch. The math is in kernels/math.h; the CPU
// kernels in kernels/cpu/elementwise.cpp. Rules: docs/elementwise.md.
#include "kernels/elementwise.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/copy.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/front.h"

namespace ember::kernels {

const char* op_name(UnaryOp op) {
    switch (op) {
        case UnaryOp::neg:
            return "neg";
        case UnaryOp::abs:
            return "abs";
        case UnaryOp::exp:
            return "exp";
        case UnaryOp::log:
            return "log";
        case UnaryOp::sqrt:
            return "sqrt";
        case UnaryOp::rsqrt:
            return "rsqrt";
        case UnaryOp::relu:
            return "relu";
        case UnaryOp::gelu:
            return "gelu";
        case UnaryOp::gelu_tanh:
            return "gelu(tanh)";
        case UnaryOp::sigmoid:
            return "sigmoid";
        case UnaryOp::tanh:
            return "tanh";
        case UnaryOp::silu:
            return "silu";
    }
    return "unary";
}

const char* op_name(BinaryOp op) {
    switch (op) {
        case BinaryOp::add:
            return "add";
        case BinaryOp::sub:
            return "sub";
        case BinaryOp::mul:
            return "mul";
        case BinaryOp::div:
            return "div";
        case BinaryOp::pow:
            return "pow";
        case BinaryOp::maximum:
            return "maximum";
        case BinaryOp::minimum:
            return "minimum";
        case BinaryOp::relu_backward:
            return "relu_backward";
        case BinaryOp::gelu_backward:
            return "gelu_backward";
        case BinaryOp::gelu_tanh_backward:
            return "gelu_tanh_backward";
        case BinaryOp::sigmoid_backward:
            return "sigmoid_backward";
        case BinaryOp::tanh_backward:
            return "tanh_backward";
        case BinaryOp::silu_backward:
            return "silu_backward";
    }
    return "binary";
}

const char* op_name(CompareOp op) {
    switch (op) {
        case CompareOp::eq:
            return "eq";
        case CompareOp::ne:
            return "ne";
        case CompareOp::lt:
            return "lt";
        case CompareOp::le:
            return "le";
        case CompareOp::gt:
            return "gt";
        case CompareOp::ge:
            return "ge";
    }
    return "compare";
}

namespace {

// Kernels take one dtype for all operands; cast only what differs.
Tensor as_dtype(const Tensor& t, DType d) { return t.dtype() == d ? t : cast(t, d); }

bool floating_only(UnaryOp op) {
    return op != UnaryOp::neg && op != UnaryOp::abs && op != UnaryOp::relu;
}

// Result dtype of op(a, b); div is true division, so integers give f32.
DType binary_dtype(BinaryOp op, const Tensor& a, const Tensor& b) {
    const DType t = promote_types(a.dtype(), b.dtype());
    if (op == BinaryOp::div) return is_floating(t) ? t : DType::f32;
    if (op >= BinaryOp::relu_backward)
        EMBER_CHECK(is_floating(t), op_name(op), ": expected floating tensors, got ", describe(a),
                    " and ", describe(b));
    EMBER_CHECK(t != DType::boolean || (op != BinaryOp::sub && op != BinaryOp::pow), op_name(op),
                ": not supported for bool tensors, got ", describe(a), " and ", describe(b));
    return t;
}

// The checks of an in-place op writing a result of dtype `t` and shape
// broadcast(a, other) into `a`, as PyTorch: no float into integers, nothing
// but bool into bool, no growing `a`, no writing through stride-0 dims.
void check_inplace(const std::string& name, const Tensor& a, DType t, const Shape& other) {
    EMBER_CHECK(!(is_floating(t) && !is_floating(a.dtype())) &&
                    !(t != DType::boolean && a.dtype() == DType::boolean),
                name, ": result dtype ", dtype_name(t), " cannot be written into ", describe(a));
    EMBER_CHECK(broadcastable(a.shape(), other) &&
                    broadcast_shapes(a.shape(), other, name.c_str()) == a.shape(),
                name, ": operand of shape ", shape_str(other),
                " does not broadcast to the shape of the destination ", describe(a));
    for (int64_t d = 0; d < a.dim(); ++d)
        EMBER_CHECK(a.stride(d) != 0 || a.size(d) <= 1, name,
                    ": the destination has broadcast (stride 0) dims: ", describe(a));
}

// ---- One call each through the dispatch ----
// Inputs already have the output's dtype (or bool for where's condition) and
// broadcast to its shape.

void run_unary(UnaryOp op, const Tensor& out, const Tensor& in) {
    if (out.numel() == 0) return;
    const char* name = op_name(op);
    const View o = view_of(out, name), i = view_of(in, name);
    dispatch(
        {name, out.device(), {&out, &in}}, [&] { cpu::unary(op, o, i); },
        [&](auto stream) { cuda::unary(op, o, i, stream); });
}

void run_binary(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    if (out.numel() == 0) return;
    const char* name = op_name(op);
    const View o = view_of(out, name);
    const View va = broadcast_view(a, out.shape(), name), vb = broadcast_view(b, out.shape(), name);
    dispatch(
        {name, out.device(), {&out, &a, &b}}, [&] { cpu::binary(op, o, va, vb); },
        [&](auto stream) { cuda::binary(op, o, va, vb, stream); });
}

void run_binary_scalar(BinaryOp op, const Tensor& out, const Tensor& a, double s) {
    if (out.numel() == 0) return;
    const char* name = op_name(op);
    const View o = view_of(out, name), va = view_of(a, name);
    dispatch(
        {name, out.device(), {&out, &a}}, [&] { cpu::binary_scalar(op, o, va, s); },
        [&](auto stream) { cuda::binary_scalar(op, o, va, s, stream); });
}

void run_compare(CompareOp op, const Tensor& out, const Tensor& a, const Tensor& b) {
    if (out.numel() == 0) return;
    const char* name = op_name(op);
    const View o = view_of(out, name);
    const View va = broadcast_view(a, out.shape(), name), vb = broadcast_view(b, out.shape(), name);
    dispatch(
        {name, out.device(), {&out, &a, &b}}, [&] { cpu::compare(op, o, va, vb); },
        [&](auto stream) { cuda::compare(op, o, va, vb, stream); });
}

void run_compare_scalar(CompareOp op, const Tensor& out, const Tensor& a, double s) {
    if (out.numel() == 0) return;
    const char* name = op_name(op);
    const View o = view_of(out, name), va = view_of(a, name);
    dispatch(
        {name, out.device(), {&out, &a}}, [&] { cpu::compare_scalar(op, o, va, s); },
        [&](auto stream) { cuda::compare_scalar(op, o, va, s, stream); });
}

// The memory format of an elementwise result of `shape`: channels-last when
// an operand of that very shape (not broadcast) is, else contiguous — so a
// channels-last activation stays so through ReLU, adds and their backwards.
MemoryFormat result_format(const Shape& shape, std::initializer_list<const Tensor*> operands) {
    for (const Tensor* t : operands)
        if (t->shape() == shape && t->suggest_memory_format() == MemoryFormat::channels_last)
            return MemoryFormat::channels_last;
    return MemoryFormat::contiguous;
}

}  // namespace

// ---- Generic entry points ----

Tensor unary(UnaryOp op, const Tensor& x) {
    const char* name = op_name(op);
    EMBER_CHECK(x.defined(), name, ": undefined tensor");
    DType t = x.dtype();
    if (floating_only(op) && !is_floating(t)) t = DType::f32;  // as torch.exp(int tensor)
    EMBER_CHECK(t != DType::boolean, name, ": not supported for bool tensors, got ", describe(x));
    Tensor out = empty(x.shape(), like(x, t), result_format(x.shape(), {&x}));
    run_unary(op, out, as_dtype(x, t));
    return out;
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b) {
    const char* name = op_name(op);
    check_same_device({&a, &b}, name);
    const DType t = binary_dtype(op, a, b);
    const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
    Tensor out = empty(shape, like(a, t), result_format(shape, {&a, &b}));
    run_binary(op, out, as_dtype(a, t), as_dtype(b, t));
    return out;
}

Tensor binary(BinaryOp op, const Tensor& a, double s) {
    EMBER_CHECK(a.defined(), op_name(op), ": undefined tensor");
    const DType t = promote_with_scalar(a.dtype(), true);
    Tensor out = empty(a.shape(), like(a, t), result_format(a.shape(), {&a}));
    run_binary_scalar(op, out, as_dtype(a, t), s);
    return out;
}

Tensor binary_(BinaryOp op, const Tensor& a, const Tensor& b) {
    const std::string name = std::string(op_name(op)) + "_";
    check_same_device({&a, &b}, name.c_str());
    const DType t = binary_dtype(op, a, b);
    check_inplace(name, a, t, b.shape());
    if (a.numel() == 0) return a;
    const Tensor bt = as_dtype(b, t);
    if (t == a.dtype() && !overlaps_differently(a, bt)) {
        run_binary(op, a, a, bt);  // element i is read before it is written
    } else {
        Tensor tmp = empty(a.shape(), like(a, t));
        run_binary(op, tmp, as_dtype(a, t), bt);
        copy(a, tmp);
    }
    a.storage()->bump_version();
    return a;
}

Tensor binary_(BinaryOp op, const Tensor& a, double s) {
    const std::string name = std::string(op_name(op)) + "_";
    EMBER_CHECK(a.defined(), name, ": undefined tensor");
    const DType t = promote_with_scalar(a.dtype(), true);
    check_inplace(name, a, t, {});
    EMBER_INTERNAL_ASSERT(t ==
                          a.dtype());  // t is floating, so a is, and a scalar does not widen it
    if (a.numel() == 0) return a;
    run_binary_scalar(op, a, a, s);
    a.storage()->bump_version();
    return a;
}

Tensor compare(CompareOp op, const Tensor& a, const Tensor& b) {
    const char* name = op_name(op);
    check_same_device({&a, &b}, name);
    const DType t = promote_types(a.dtype(), b.dtype());
    Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), like(a, DType::boolean));
    run_compare(op, out, as_dtype(a, t), as_dtype(b, t));
    return out;
}

Tensor compare(CompareOp op, const Tensor& a, double s) {
    EMBER_CHECK(a.defined(), op_name(op), ": undefined tensor");
    const DType t = promote_with_scalar(a.dtype(), true);
    Tensor out = empty(a.shape(), like(a, DType::boolean));
    run_compare_scalar(op, out, as_dtype(a, t), s);
    return out;
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
    EMBER_CHECK(x.defined(), "clamp: undefined tensor");
    EMBER_CHECK(lo || hi, "clamp: at least one of min and max must be given, for ", describe(x));
    EMBER_CHECK(!(lo && std::isnan(*lo)) && !(hi && std::isnan(*hi)), "clamp: a bound is NaN (min ",
                lo.value_or(-INFINITY), ", max ", hi.value_or(INFINITY), ") for ", describe(x));
    EMBER_CHECK(x.dtype() != DType::boolean, "clamp: not supported for bool tensors, got ",
                describe(x));
    Tensor out = empty(x.shape(), like(x));
    if (out.numel() == 0) return out;
    const View o = view_of(out, "clamp"), i = view_of(x, "clamp");
    const double l = lo.value_or(-INFINITY), h = hi.value_or(INFINITY);
    dispatch(
        {"clamp", out.device(), {&out, &x}}, [&] { cpu::clamp(o, i, l, h); },
        [&](auto stream) { cuda::clamp(o, i, l, h, stream); });
    return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
    check_same_device({&cond, &a, &b}, "where");
    EMBER_CHECK(cond.dtype() == DType::boolean, "where: the condition must be a bool tensor, got ",
                describe(cond));
    EMBER_CHECK(broadcastable(cond.shape(), a.shape()) && broadcastable(cond.shape(), b.shape()) &&
                    broadcastable(a.shape(), b.shape()),
                "where: condition ", describe(cond), ", a ", describe(a), " and b ", describe(b),
                " cannot be broadcast together");
    const Shape shape =
        broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
    const DType t = promote_types(a.dtype(), b.dtype());
    Tensor out = empty(shape, like(a, t));
    if (out.numel() == 0) return out;
    const Tensor at = as_dtype(a, t), bt = as_dtype(b, t);  // alive while the views are used
    const View o = view_of(out, "where"), c = broadcast_view(cond, shape, "where");
    const View va = broadcast_view(at, shape, "where"), vb = broadcast_view(bt, shape, "where");
    dispatch(
        {"where", out.device(), {&out, &cond, &at, &bt}}, [&] { cpu::where(o, c, va, vb); },
        [&](auto stream) { cuda::where(o, c, va, vb, stream); });
    return out;
}

// ---- Named ops ----

Tensor add(const Tensor& a, const Tensor& b) { return binary(BinaryOp::add, a, b); }
Tensor add(const Tensor& a, double s) { return binary(BinaryOp::add, a, s); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(BinaryOp::sub, a, b); }
Tensor sub(const Tensor& a, double s) { return binary(BinaryOp::sub, a, s); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(BinaryOp::mul, a, b); }
Tensor mul(const Tensor& a, double s) { return binary(BinaryOp::mul, a, s); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(BinaryOp::div, a, b); }
Tensor div(const Tensor& a, double s) { return binary(BinaryOp::div, a, s); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(BinaryOp::pow, a, b); }
Tensor pow(const Tensor& a, double s) { return binary(BinaryOp::pow, a, s); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::maximum, a, b); }
Tensor maximum(const Tensor& a, double s) { return binary(BinaryOp::maximum, a, s); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(BinaryOp::minimum, a, b); }
Tensor minimum(const Tensor& a, double s) { return binary(BinaryOp::minimum, a, s); }

Tensor relu_backward(const Tensor& g, const Tensor& y) {
    return binary(BinaryOp::relu_backward, g, y);
}
Tensor gelu_backward(const Tensor& g, const Tensor& x, GeluApprox approximate) {
    return binary(
        approximate == GeluApprox::tanh ? BinaryOp::gelu_tanh_backward : BinaryOp::gelu_backward, g,
        x);
}
Tensor sigmoid_backward(const Tensor& g, const Tensor& y) {
    return binary(BinaryOp::sigmoid_backward, g, y);
}
Tensor tanh_backward(const Tensor& g, const Tensor& y) {
    return binary(BinaryOp::tanh_backward, g, y);
}
Tensor silu_backward(const Tensor& g, const Tensor& x) {
    return binary(BinaryOp::silu_backward, g, x);
}

Tensor add_(const Tensor& a, const Tensor& b) { return binary_(BinaryOp::add, a, b); }
Tensor add_(const Tensor& a, double s) { return binary_(BinaryOp::add, a, s); }
Tensor sub_(const Tensor& a, const Tensor& b) { return binary_(BinaryOp::sub, a, b); }
Tensor sub_(const Tensor& a, double s) { return binary_(BinaryOp::sub, a, s); }
Tensor mul_(const Tensor& a, const Tensor& b) { return binary_(BinaryOp::mul, a, b); }
Tensor mul_(const Tensor& a, double s) { return binary_(BinaryOp::mul, a, s); }
Tensor div_(const Tensor& a, const Tensor& b) { return binary_(BinaryOp::div, a, b); }
Tensor div_(const Tensor& a, double s) { return binary_(BinaryOp::div, a, s); }

Tensor neg(const Tensor& x) { return unary(UnaryOp::neg, x); }
Tensor abs(const Tensor& x) { return unary(UnaryOp::abs, x); }
Tensor exp(const Tensor& x) { return unary(UnaryOp::exp, x); }
Tensor log(const Tensor& x) { return unary(UnaryOp::log, x); }
Tensor sqrt(const Tensor& x) { return unary(UnaryOp::sqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(UnaryOp::rsqrt, x); }
Tensor relu(const Tensor& x) { return unary(UnaryOp::relu, x); }
Tensor sigmoid(const Tensor& x) { return unary(UnaryOp::sigmoid, x); }
Tensor tanh(const Tensor& x) { return unary(UnaryOp::tanh, x); }
Tensor silu(const Tensor& x) { return unary(UnaryOp::silu, x); }
Tensor gelu(const Tensor& x, GeluApprox approximate) {
    return unary(approximate == GeluApprox::tanh ? UnaryOp::gelu_tanh : UnaryOp::gelu, x);
}

Tensor eq(const Tensor& a, const Tensor& b) { return compare(CompareOp::eq, a, b); }
Tensor eq(const Tensor& a, double s) { return compare(CompareOp::eq, a, s); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(CompareOp::ne, a, b); }
Tensor ne(const Tensor& a, double s) { return compare(CompareOp::ne, a, s); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(CompareOp::lt, a, b); }
Tensor lt(const Tensor& a, double s) { return compare(CompareOp::lt, a, s); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(CompareOp::le, a, b); }
Tensor le(const Tensor& a, double s) { return compare(CompareOp::le, a, s); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(CompareOp::gt, a, b); }
Tensor gt(const Tensor& a, double s) { return compare(CompareOp::gt, a, s); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(CompareOp::ge, a, b); }
Tensor ge(const Tensor& a, double s) { return compare(CompareOp::ge, a, s); }

}  // namespace ember::kernels

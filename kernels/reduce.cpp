// Front for the reductions: argument checks, output allocation, bringing the
// input into the [outer, size, inner] layout the kernels take, and one call
// through the dispatch.
#include "kernels/reduce.h"
#include "kernels/copy.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce.h"
#include "kernels/front.h"

namespace ember::kernels {

namespace {

// The dims being reduced, as a mask over x's dims, and the result's shape.
struct Reduction {
    std::vector<bool> reduced;
    Shape out_shape;
    int64_t size = 1;  // product of the reduced sizes
};

Reduction parse_dims(const Tensor& x, const Shape& dims, bool keepdim, const char* op) {
    EMBER_CHECK(x.defined(), op, ": undefined tensor");
    const int64_t nd = x.dim(), n = std::max<int64_t>(nd, 1);  // a 0-d tensor takes dim 0 / -1
    Reduction r;
    r.reduced.assign(size_t(nd), dims.empty());
    std::vector<bool> seen(size_t(n), false);
    for (int64_t d : dims) {
        EMBER_CHECK(d >= -n && d < n, op, ": dim ", d, " out of range for input ", describe(x),
                    " (dims ", shape_str(dims), ")");
        const int64_t w = wrap_dim(d, nd, op);
        EMBER_CHECK(!seen[size_t(w)], op, ": dim ", d, " appears twice in dims ", shape_str(dims),
                    " for input ", describe(x));
        seen[size_t(w)] = true;
        if (nd > 0) r.reduced[size_t(w)] = true;
    }
    for (int64_t d = 0; d < nd; ++d) {
        if (r.reduced[size_t(d)]) {
            // The product can only overflow when a kept dim is 0 (else it is at most
            // numel); the output is then empty, and a saturated size is harmless.
            if (__builtin_mul_overflow(r.size, x.shape()[size_t(d)], &r.size)) r.size = INT64_MAX;
            if (keepdim) r.out_shape.push_back(1);
        } else {
            r.out_shape.push_back(x.shape()[size_t(d)]);
        }
    }
    return r;
}

// [outer, size, inner] when, walking `order` (dims of size > 1), the reduced
// dims are consecutive and the kept dims come in increasing (logical) order, so
// that the output [outer, inner] is laid out like the contiguous result.
std::optional<ReduceShape> as_block(const Tensor& x, const std::vector<int64_t>& order,
                                         const std::vector<bool>& reduced) {
    ReduceShape s;
    int phase = 0;  // 0: before the reduced block, 1: in it, 2: after it
    int64_t last_kept = -1;
    for (int64_t d : order) {
        const int64_t n = x.shape()[size_t(d)];
        if (reduced[size_t(d)]) {
            if (phase == 2) return std::nullopt;
            phase = 1;
            s.size *= n;
        } else {
            if (d < last_kept) return std::nullopt;
            last_kept = d;
            if (phase == 0) {
                s.outer *= n;
            } else {
                phase = 2;
                s.inner *= n;
            }
        }
    }
    return s;
}

struct Plan {
    Tensor src;  // dense, in the order the shape below walks
    ReduceShape shape;
};

// The kernels' view of a planned source: a flat buffer (its dims may be
// permuted in memory, which the plan's shape already accounts for).
View flat_view(const Plan& p, const char* op) {
    View v = view_of(p.src, op);
    v.ndim = 1;
    v.shape[0] = p.src.numel();
    v.strides[0] = 1;
    return v;
}

// Avoids a copy when x, taken in its memory order, is dense and the reduced
// dims form a block there (last dim, first dim, all dims, transposes); else
// copies: contiguous() when the block exists in logical order, otherwise
// permuted so the reduced dims come last. x must not be empty.
Plan plan_layout(const Tensor& x, const std::vector<bool>& reduced) {
    std::vector<int64_t> order;
    for (int64_t d = 0; d < x.dim(); ++d)
        if (x.shape()[size_t(d)] > 1) order.push_back(d);
    std::vector<int64_t> mem = order;
    std::stable_sort(mem.begin(), mem.end(), [&](int64_t a, int64_t b) {
        return x.strides()[size_t(a)] > x.strides()[size_t(b)];
    });
    bool dense = true;
    int64_t expected = 1;
    for (size_t i = mem.size(); i-- > 0;) {
        dense = dense && x.strides()[size_t(mem[i])] == expected;
        expected *= x.shape()[size_t(mem[i])];
    }
    if (dense)
        if (auto s = as_block(x, mem, reduced)) return {x, *s};
    if (auto s = as_block(x, order, reduced)) return {contiguous(x), *s};
    Shape perm;
    for (int pass = 0; pass < 2; ++pass)
        for (int64_t d = 0; d < x.dim(); ++d)
            if (reduced[size_t(d)] == (pass == 1)) perm.push_back(d);
    Plan p{contiguous(views::permute(x, perm)), {}};
    for (int64_t d = 0; d < x.dim(); ++d)
        (reduced[size_t(d)] ? p.shape.size : p.shape.outer) *= x.shape()[size_t(d)];
    return p;
}

// A dims reduction made ready for its kernel: the output, and unless it is
// already done (empty output, or nothing to reduce), the planned input.
struct Prepared {
    Tensor out;
    bool done = false;
    Plan plan;
    View o, in;
};

// The shared front of the dims reductions: `empty_value` is the result of
// reducing nothing (none: an error).
Prepared prepare(const char* op, const Tensor& x, const Shape& dims, bool keepdim, DType out_dtype,
                 std::optional<double> empty_value) {
    const Reduction r = parse_dims(x, dims, keepdim, op);
    Prepared p{empty(r.out_shape, like(x, out_dtype))};
    if (p.out.numel() == 0) {
        p.done = true;
        return p;
    }
    if (r.size == 0) {
        EMBER_CHECK(empty_value.has_value(), op, ": cannot reduce over an empty dim of input ",
                    describe(x), " (dims ", shape_str(dims), ")");
        fill(p.out, *empty_value);
        p.done = true;
        return p;
    }
    p.plan = plan_layout(x, r.reduced);
    p.o = view_of(p.out, op);
    p.in = flat_view(p.plan, op);
    return p;
}

ValuesIndices extreme(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool is_max,
                      bool want_values) {
    const Reduction r = parse_dims(x, {dim}, keepdim, op);
    ValuesIndices res;
    if (want_values) res.values = empty(r.out_shape, like(x));
    res.indices = empty(r.out_shape, like(x, DType::i64));
    if (res.indices.numel() == 0) return res;
    EMBER_CHECK(r.size > 0, op, ": cannot reduce over dim ", dim, " of size 0 of input ",
                describe(x));
    const Plan p = plan_layout(x, r.reduced);
    const View values = want_values ? view_of(res.values, op) : View{};
    const View indices = view_of(res.indices, op), in = flat_view(p, op);
    dispatch({op, x.device(), {&res.values, &res.indices, &p.src}},
             [&] { (is_max ? cpu::max : cpu::min)(values, indices, in, p.shape); },
             [&](auto stream) {
                 (is_max ? cuda::max : cuda::min)(values, indices, in, p.shape, stream);
             });
    return res;
}

Tensor arg_extreme(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                   bool is_max) {
    if (dim) return extreme(op, x, *dim, keepdim, is_max, false).indices;
    EMBER_CHECK(x.defined(), op, ": undefined tensor");
    EMBER_CHECK(x.numel() > 0, op, ": cannot take the ", op, " of an empty input ", describe(x));
    Tensor flat = extreme(op, reshape(x, {-1}), 0, false, is_max, false).indices;
    return keepdim ? reshape(flat, Shape(size_t(x.dim()), 1)) : flat;
}

}  // namespace

// Each reduction: its checks, prepare(), then one dispatch; the CPU and CUDA
// kernels take the same planned layout.

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
    EMBER_CHECK(x.defined(), "sum: undefined tensor");
    const DType dt = is_floating(x.dtype()) ? x.dtype() : DType::i64;
    const Prepared p = prepare("sum", x, dims, keepdim, dt, 0.0);
    if (!p.done)
        dispatch({"sum", x.device(), {&p.out, &p.plan.src}},
                 [&] { cpu::sum(p.o, p.in, p.plan.shape); },
                 [&](auto stream) { cuda::sum(p.o, p.in, p.plan.shape, stream); });
    return p.out;
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
    EMBER_CHECK(x.defined(), "mean: undefined tensor");
    check_floating(x, "mean");
    const Prepared p = prepare("mean", x, dims, keepdim, x.dtype(), NAN);
    if (!p.done)
        dispatch({"mean", x.device(), {&p.out, &p.plan.src}},
                 [&] { cpu::mean(p.o, p.in, p.plan.shape); },
                 [&](auto stream) { cuda::mean(p.o, p.in, p.plan.shape, stream); });
    return p.out;
}

Tensor norm(const Tensor& x, double ord, const Shape& dims, bool keepdim) {
    EMBER_CHECK(x.defined(), "norm: undefined tensor");
    check_floating(x, "norm");
    EMBER_CHECK(ord == 1 || ord == 2 || (std::isinf(ord) && ord > 0),
                "norm: p must be 1, 2 or inf, got ", ord, " for input ", describe(x));
    const Prepared p = prepare("norm", x, dims, keepdim, x.dtype(), 0.0);
    if (!p.done)
        dispatch({"norm", x.device(), {&p.out, &p.plan.src}},
                 [&] { cpu::norm(p.o, p.in, p.plan.shape, ord); },
                 [&](auto stream) { cuda::norm(p.o, p.in, p.plan.shape, ord, stream); });
    return p.out;
}

Tensor var(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
    EMBER_CHECK(x.defined(), "var: undefined tensor");
    check_floating(x, "var");
    const Prepared p = prepare("var", x, dims, keepdim, x.dtype(), NAN);
    if (!p.done)
        dispatch({"var", x.device(), {&p.out, &p.plan.src}},
                 [&] { cpu::var(p.o, p.in, p.plan.shape, correction); },
                 [&](auto stream) { cuda::var(p.o, p.in, p.plan.shape, correction, stream); });
    return p.out;
}

Tensor std(const Tensor& x, const Shape& dims, double correction, bool keepdim) {
    EMBER_CHECK(x.defined(), "std: undefined tensor");
    check_floating(x, "std");
    const Prepared p = prepare("std", x, dims, keepdim, x.dtype(), NAN);
    if (!p.done)
        dispatch({"std", x.device(), {&p.out, &p.plan.src}},
                 [&] { cpu::std(p.o, p.in, p.plan.shape, correction); },
                 [&](auto stream) { cuda::std(p.o, p.in, p.plan.shape, correction, stream); });
    return p.out;
}

Tensor amax(const Tensor& x, const Shape& dims, bool keepdim) {
    EMBER_CHECK(x.defined(), "amax: undefined tensor");
    const Prepared p = prepare("amax", x, dims, keepdim, x.dtype(), std::nullopt);
    if (!p.done)
        dispatch({"amax", x.device(), {&p.out, &p.plan.src}},
                 [&] { cpu::amax(p.o, p.in, p.plan.shape); },
                 [&](auto stream) { cuda::amax(p.o, p.in, p.plan.shape, stream); });
    return p.out;
}

Tensor amin(const Tensor& x, const Shape& dims, bool keepdim) {
    EMBER_CHECK(x.defined(), "amin: undefined tensor");
    const Prepared p = prepare("amin", x, dims, keepdim, x.dtype(), std::nullopt);
    if (!p.done)
        dispatch({"amin", x.device(), {&p.out, &p.plan.src}},
                 [&] { cpu::amin(p.o, p.in, p.plan.shape); },
                 [&](auto stream) { cuda::amin(p.o, p.in, p.plan.shape, stream); });
    return p.out;
}

ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim) {
    return extreme("max", x, dim, keepdim, true, true);
}

ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim) {
    return extreme("min", x, dim, keepdim, false, true);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
    return arg_extreme("argmax", x, dim, keepdim, true);
}

Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
    return arg_extreme("argmin", x, dim, keepdim, false);
}

}  // namespace ember::kernels

// CUDA elementwise kernels: unary math, clamp, binary arithmetic (tensor or
// scalar right operand), comparisons and where. Each op applies its functor
// from kernels/math.h — the very code the CPU twin kernels/cpu/elementwise.cpp
// runs — through cuda::map (kernels/cuda/loop.cuh): 16-byte vector loads when
// dense, an offset calculator when strided or broadcast.
// Math: out[i] = f(in[i], ...) in Acc<T> (f32 for f16/bf16). Dtypes as the CPU twin.
// Bytes per element (s = dtype size): unary, clamp, scalar binary 2s; binary 3s;
// compare 2s + 1; where 3s + 1. FLOPs: 1-2 for arithmetic, ~10-30 for
// transcendental ops (all memory-bound on a GPU). Launch: grid-stride, 256
// threads; deterministic. Test: tests/cuda/test_cuda_elementwise.cpp; bench:
// `ember bench elementwise` (GPU rows on a machine with a device).
#include <cmath>
#include <type_traits>

#include "core/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/loop.cuh"

namespace ember::kernels::cuda {

namespace {

using math::Acc;

// Compare and where produce or consume bool; Apply would cast through Acc, so
// comparisons get their own adaptor that loads and compares.
template <class Op>
struct CompareApply {
    Op op;
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a, T b) const {
        return op(math::load(a), math::load(b));
    }
};

template <class Op>
struct CompareScalarApply {
    Op op;
    template <class T>
    EMBER_HD EMBER_INLINE bool operator()(T a) const {
        return op(math::load(a));
    }
};

struct WhereBytes {  // the condition read as bytes, as on the CPU
    template <class T>
    EMBER_HD EMBER_INLINE T operator()(uint8_t c, T a, T b) const {
        return math::Where{}(c != 0, a, b);
    }
};

}  // namespace

void unary(UnaryOp op, const View& out, const View& in, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    math::visit_op(op, [&](auto f) {
        using F = decltype(f);
        math::visit_accepted<math::accepts_v<F>>(in.dtype, [&](auto tag) {
            using T = typename decltype(tag)::type;
            map<T, T>(stream, out, Apply<T, F>{f}, in);
        });
    });
}

void clamp(const View& out, const View& in, double lo, double hi, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.dtype == in.dtype);
    math::visit_accepted<math::Accepts::numeric>(in.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        // Integers: the nearest integers inside [lo, hi] (as the CPU twin).
        const double l = std::is_integral_v<T> ? std::ceil(lo) : lo;
        const double h = std::is_integral_v<T> ? std::floor(hi) : hi;
        using C = math::Clamp<Acc<T>>;
        map<T, T>(stream, out, Apply<T, C>{C{math::cast<Acc<T>>(l), math::cast<Acc<T>>(h)}}, in);
    });
}

void binary(BinaryOp op, const View& out, const View& a, const View& b, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype && a.dtype == b.dtype);
    math::visit_op(op, [&](auto f) {
        using F = decltype(f);
        math::visit_accepted<math::accepts_v<F>>(a.dtype, [&](auto tag) {
            using T = typename decltype(tag)::type;
            map<T, T, T>(stream, out, Apply<T, F>{f}, a, b);
        });
    });
}

void binary_scalar(BinaryOp op, const View& out, const View& a, double s, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.dtype == a.dtype);
    visit_floating(a.dtype, "cuda binary_scalar (internal error)", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const A v = math::cast<A>(s);
        math::visit_op(op, [&](auto f) {
            using R = math::RightScalar<decltype(f), A>;
            map<T, T>(stream, out, Apply<T, R>{R{f, v}}, a);
        });
    });
}

void compare(CompareOp op, const View& out, const View& a, const View& b, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean && a.dtype == b.dtype);
    visit_dtype(a.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        math::visit_op(op, [&](auto f) { map<bool, T, T>(stream, out, CompareApply<decltype(f)>{f}, a, b); });
    });
}

void compare_scalar(CompareOp op, const View& out, const View& a, double s, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(out.dtype == DType::boolean);
    visit_floating(a.dtype, "cuda compare_scalar (internal error)", [&](auto tag) {
        using T = typename decltype(tag)::type;
        using A = Acc<T>;
        const A v = math::cast<A>(s);
        math::visit_op(op, [&](auto f) {
            using R = math::RightScalar<decltype(f), A>;
            map<bool, T>(stream, out, CompareScalarApply<R>{R{f, v}}, a);
        });
    });
}

void where(const View& out, const View& cond, const View& a, const View& b, StreamRef stream) {
    EMBER_INTERNAL_ASSERT(cond.dtype == DType::boolean && out.dtype == a.dtype &&
                          a.dtype == b.dtype);
    View c = cond;
    c.dtype = DType::u8;  // same bytes; see WhereBytes
    visit_dtype(out.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        map<T, uint8_t, T, T>(stream, out, WhereBytes{}, c, a, b);
    });
}

}  // namespace ember::kernels::cuda

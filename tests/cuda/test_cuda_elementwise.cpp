// CUDA elementwise ops against the CPU backend on random inputs: every op and
// dtype, dense (vectorized path), strided and broadcast (offset path), odd
// sizes (vector tails). Both backends run the functors of kernels/math.h, so
// results agree to the last bit except where the device math library differs
// (exp, log, tanh, erf, pow: a few ulp).
#include "support.h"

#include "kernels/elementwise.h"

using namespace ember;
using namespace ember::test;
namespace k = ember::kernels;

namespace {
const Device kGpu = Device::cuda(0);
const DType kFloat[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
const DType kInt[] = {DType::i32, DType::i64, DType::u8};

Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }

// Layouts: dense with an odd size, transposed, and broadcast.
struct Case {
    Shape a, b;
    bool transpose;
};
const Case kCases[] = {{{1001}, {1001}, false},
                       {{37, 65}, {37, 65}, true},
                       {{4, 1, 33}, {5, 33}, false},
                       {{64, 128}, {128}, false}};

double tol(DType t, bool transcendental) {
    if (!transcendental) return 0;
    return t == DType::f64 ? 1e-13 : t == DType::f32 ? 4e-6 : rtol_for(t);
}
}  // namespace

TEST_CASE("cuda: unary ops equal the CPU's", "[cuda][elementwise]") {
    const k::UnaryOp exact[] = {k::UnaryOp::neg, k::UnaryOp::abs, k::UnaryOp::relu};
    const k::UnaryOp transcendental[] = {k::UnaryOp::exp,  k::UnaryOp::log,     k::UnaryOp::sqrt,
                                         k::UnaryOp::rsqrt, k::UnaryOp::gelu,   k::UnaryOp::gelu_tanh,
                                         k::UnaryOp::sigmoid, k::UnaryOp::tanh};
    for (const Case& c : kCases) {
        for (DType t : kFloat) {
            Tensor x = random_tensor(c.a, t, 1, 0.01, 3.0);
            if (c.transpose && x.dim() >= 2) x = non_contiguous(x);
            for (k::UnaryOp op : exact) {
                INFO(k::op_name(op) << " " << dtype_name(t) << " " << shape_str(c.a));
                check_close(cpu(k::unary(op, gpu(x))), k::unary(op, x), 0, 0);
            }
            for (k::UnaryOp op : transcendental) {
                INFO(k::op_name(op) << " " << dtype_name(t) << " " << shape_str(c.a));
                check_close(cpu(k::unary(op, gpu(x))), k::unary(op, x), tol(t, true), tol(t, true));
            }
        }
        for (DType t : kInt) {
            Tensor x = random_tensor(c.a, t, 2, 0, 100);
            for (k::UnaryOp op : exact)
                check_close(cpu(k::unary(op, gpu(x))), k::unary(op, x), 0, 0);
        }
    }
}

TEST_CASE("cuda: binary ops, scalars, comparisons and where equal the CPU's", "[cuda][elementwise]") {
    const k::BinaryOp ops[] = {k::BinaryOp::add, k::BinaryOp::sub, k::BinaryOp::mul,
                               k::BinaryOp::div, k::BinaryOp::maximum, k::BinaryOp::minimum};
    const k::CompareOp cmps[] = {k::CompareOp::eq, k::CompareOp::ne, k::CompareOp::lt,
                                 k::CompareOp::le, k::CompareOp::gt, k::CompareOp::ge};
    for (const Case& c : kCases) {
        for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
            Tensor a = random_tensor(c.a, t, 3, 1, 9), b = random_tensor(c.b, t, 4, 1, 9);
            if (c.transpose) a = non_contiguous(a), b = non_contiguous(b);
            for (k::BinaryOp op : ops) {
                INFO(k::op_name(op) << " " << dtype_name(t) << " " << shape_str(c.a));
                check_close(cpu(k::binary(op, gpu(a), gpu(b))), k::binary(op, a, b), 0, 0);
                check_close(cpu(k::binary(op, gpu(a), 2.5)), k::binary(op, a, 2.5), 0, 0);
            }
            const double ptol = tol(t, true);
            check_close(cpu(k::pow(gpu(a), gpu(b))), k::pow(a, b), ptol, ptol);
            for (k::CompareOp op : cmps) {
                check_close(cpu(k::compare(op, gpu(a), gpu(b))), k::compare(op, a, b), 0, 0);
                check_close(cpu(k::compare(op, gpu(a), 4.0)), k::compare(op, a, 4.0), 0, 0);
            }
            Tensor cond = k::gt(a, 5.0);
            check_close(cpu(k::where(gpu(cond), gpu(a), gpu(b))), k::where(cond, a, b), 0, 0);
            check_close(cpu(k::clamp(gpu(a), 2.0, 7.0)), k::clamp(a, 2.0, 7.0), 0, 0);
        }
    }
    // In place on a strided device view.
    Tensor base = random_tensor({8, 16}, DType::f32, 5);
    Tensor g = gpu(base);
    Tensor view = g.slice(1, 0, 16, 2);
    k::add_(view, gpu(random_tensor({8}, DType::f32, 6)).unsqueeze(1));
    Tensor host = base.clone();
    k::add_(host.slice(1, 0, 16, 2), random_tensor({8}, DType::f32, 6).unsqueeze(1));
    check_close(cpu(g), host, 0, 0);
}

TEST_CASE("cuda: mixing devices is a clear error", "[cuda][elementwise]") {
    REQUIRE_THROWS_WITH_MSG(k::add(ones({2}), ones({2}, {.device = kGpu})), "cuda:0");
}

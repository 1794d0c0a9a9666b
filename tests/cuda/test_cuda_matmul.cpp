// Matrix products on CUDA (cuBLAS, kernels/cuda/matmul.cpp) beyond the op
// table: the random comparisons with the CPU — matmul (2-d at sizes 1, 7, 33
// and 127, batches broadcast, 1-d promotions), bmm, addmm and linear, every
// floating dtype, contiguous, transposed and padded-row operands, K = 0 and
// empty products — are tests/ops/entries_matmul.cpp's cuda_cases, run by
// tests/cuda/test_cuda_ops.cpp. Here: operands that need a copy (strided
// both ways, expanded, overlapping) or interleave batch and rows; K = 0 over
// memory that held other values; f32 with TF32 on (loose); integer operands
// refused; determinism and a side stream; and the autograd gradients of
// matmul, bmm, addmm and linear against the CPU's.
#include <cmath>
#include <functional>
#include <vector>

#include "core/cuda_context.h"
#include "core/cuda_stream.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();
const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// TF32 on for one scope, then as it was.
struct Tf32Guard {
    explicit Tf32Guard(bool on) : previous(allow_tf32()) { set_allow_tf32(on); }
    ~Tf32Guard() { set_allow_tf32(previous); }
    bool previous;
};

// Tolerances against the CPU for a product summing `k` terms of inputs in
// [-1, 1] (terms up to 1, results ~ sqrt(k) / 3): both sides accumulate in
// f32 (f64) in their own order, f16/bf16 results are rounded once from f32.
struct Tol {
    double rtol, atol;
};
Tol tol(DType t, int64_t k, bool tf32 = false) {
    const double s = std::sqrt(double(std::max<int64_t>(k, 1)));
    switch (t) {
        case DType::f64:
            return {1e-12, 1e-13 * s};
        case DType::f32:
            return tf32 ? Tol{5e-3, 5e-3 * s} : Tol{1e-5, 1e-5 * s};
        case DType::f16:
            return {2e-3, 1e-3 * s};
        default:  // bf16
            return {1.6e-2, 8e-3 * s};
    }
}

// The CPU's result in a dtype the comparison trusts: f16/bf16 inputs are cast
// to f32 first (the CPU's own f16 path rounds its f32 result once more).
Tensor cpu_input(const Tensor& t) {
    return t.dtype() == DType::f16 || t.dtype() == DType::bf16 ? t.to(DType::f32) : t;
}

using Op = std::function<Tensor(const std::vector<Tensor>&)>;
using Layout = std::function<Tensor(const Tensor&)>;

// op on the CPU (contiguous inputs) and on the GPU (inputs moved there and
// then given `layout`, which keeps their values), compared with tol(dtype, k).
void check_op(const Op& op, const std::vector<Tensor>& in, int64_t k_terms,
              const Layout& layout = {}, bool tf32 = false) {
    std::vector<Tensor> c, g;
    for (const Tensor& t : in) {
        c.push_back(cpu_input(t));
        Tensor d = t.to(kGpu);
        g.push_back(layout ? layout(d) : d);
    }
    const Tensor want = op(c);
    const Tensor got = op(g);
    REQUIRE(got.device() == kGpu);
    REQUIRE(got.dtype() == in[0].dtype());
    const Tol t = tol(in[0].dtype(), k_terms, tf32);
    check_close(got.to(kCpu), want, t.rtol, t.atol);
}

Tensor rnd(const Shape& s, DType dt, uint64_t seed) { return random_tensor(s, dt, seed, -1, 1); }

const Op kMatmul = [](const std::vector<Tensor>& v) { return kernels::matmul(v[0], v[1]); };

void require_same_bits(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    const std::vector<double> va = values(a), vb = values(b);
    int64_t differ = 0;
    for (size_t i = 0; i < va.size(); ++i) differ += va[i] != vb[i];
    CHECK(differ == 0);
}

}  // namespace

TEST_CASE("cuda matmul reads operands the op table's layouts do not make", "[cuda][matmul]") {
    // Transposed views, padded rows and strided vectors are the op table's
    // transposed and strided layouts; these need a copy first (or a batch
    // stride that is not the matrix's).
    uint64_t seed = 200;
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        const Tensor a = rnd({33, 7}, dt, ++seed), b = rnd({7, 127}, dt, ++seed);
        const Tol t7 = tol(dt, 7);
        {
            INFO("strided both ways: copied first");
            check_op(kMatmul, {a, b}, 7, [](const Tensor& t) {
                Tensor big = zeros({2 * t.size(0), 2 * t.size(1)}, {t.dtype(), t.device()});
                Tensor view = big.slice(0, 0, 2 * t.size(0), 2).slice(1, 0, 2 * t.size(1), 2);
                view.copy_(t);
                return view;
            });
        }
        {
            INFO("a row expanded to a matrix (row stride 0): copied first");
            const Tensor row = rnd({1, 7}, dt, ++seed);
            const Tensor want = kernels::matmul(cpu_input(row).expand({33, 7}), cpu_input(b));
            const Tensor got = kernels::matmul(row.to(kGpu).expand({33, 7}), b.to(kGpu));
            check_close(got.to(kCpu), want, t7.rtol, t7.atol);
        }
        {
            INFO("overlapping rows: copied first");
            const Tensor buf = rnd({40}, dt, ++seed);
            const Tensor over_c = cpu_input(buf).as_strided({8, 5}, {2, 1}, 0);
            const Tensor over_g = buf.to(kGpu).as_strided({8, 5}, {2, 1}, 0);
            const Tensor rhs = rnd({5, 9}, dt, ++seed);
            const Tol t5 = tol(dt, 5);
            check_close(kernels::matmul(over_g, rhs.to(kGpu)).to(kCpu),
                        kernels::matmul(over_c, cpu_input(rhs)), t5.rtol, t5.atol);
        }
        {
            INFO("batch dims interleaved with the rows");
            // x [T, B, K] read as [B, T, K]: the batch stride is K, the row stride B * K.
            const Tensor x = rnd({7, 3, 33}, dt, ++seed), w = rnd({3, 33, 5}, dt, ++seed);
            const Op op = [](const std::vector<Tensor>& v) {
                return kernels::matmul(v[0].transpose(0, 1), v[1]);
            };
            check_op(op, {x, w}, 33);
        }
    }
}

TEST_CASE("cuda matmul with K = 0 writes zeros over memory that held other values",
          "[cuda][matmul]") {
    // The op table compares K = 0 and empty products with the CPU's; here the
    // block the allocator hands back held 7s first, so zeros are written, not
    // found.
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        { const Tensor junk = full({33, 7}, 7.0, {dt, kGpu}); }
        const Tensor z = kernels::matmul(zeros({33, 0}, {dt, kGpu}), zeros({0, 7}, {dt, kGpu}));
        REQUIRE(z.shape() == Shape{33, 7});
        check_close(z.to(kCpu), std::vector<double>(33 * 7, 0.0), 0, 0);
        { const Tensor junk = full({2, 5, 3}, 7.0, {dt, kGpu}); }
        const Tensor zb = kernels::matmul(zeros({2, 5, 0}, {dt, kGpu}), zeros({0, 3}, {dt, kGpu}));
        check_close(zb.to(kCpu), std::vector<double>(30, 0.0), 0, 0);
        // ... and c itself when there is one.
        const Tensor c = rnd({7}, dt, 5);
        { const Tensor junk = full({3, 7}, 7.0, {dt, kGpu}); }
        const Tensor got =
            kernels::addmm(c.to(kGpu), zeros({3, 0}, {dt, kGpu}), zeros({0, 7}, {dt, kGpu}));
        check_close(got.to(kCpu), kernels::addmm(c, zeros({3, 0}, {dt}), zeros({0, 7}, {dt})), 0,
                    0);
        { const Tensor junk = full({4, 7}, 7.0, {dt, kGpu}); }
        const Tensor lin =
            kernels::linear(zeros({4, 0}, {dt, kGpu}), zeros({7, 0}, {dt, kGpu}), c.to(kGpu));
        check_close(lin.to(kCpu), kernels::linear(zeros({4, 0}, {dt}), zeros({7, 0}, {dt}), c), 0,
                    0);
    }
}

TEST_CASE("cuda f32 matmul with TF32 allowed", "[cuda][matmul]") {
    REQUIRE_FALSE(allow_tf32());  // off by default
    const Tensor a = rnd({256, 512}, DType::f32, 41), b = rnd({512, 384}, DType::f32, 42);
    const Tensor exact = kernels::matmul(a.to(kGpu), b.to(kGpu)).to(kCpu);
    Tensor fast;
    {
        Tf32Guard tf32(true);
        REQUIRE(allow_tf32());
        check_op(kMatmul, {a, b}, 512, {}, true);
        check_op(kMatmul, {rnd({3, 33, 127}, DType::f32, 43), rnd({127, 7}, DType::f32, 44)}, 127,
                 {}, true);
        fast = kernels::matmul(a.to(kGpu), b.to(kGpu)).to(kCpu);
        // f64 ignores the setting.
        check_op(kMatmul, {rnd({33, 127}, DType::f64, 45), rnd({127, 7}, DType::f64, 46)}, 127);
    }
    CHECK_FALSE(allow_tf32());
    // The setting took effect: 10-bit operands change the low bits somewhere.
    const std::vector<double> ve = values(exact), vf = values(fast);
    int64_t differ = 0;
    for (size_t i = 0; i < ve.size(); ++i) differ += ve[i] != vf[i];
    CHECK(differ > 0);
}

TEST_CASE("cuda matmul refuses integer operands", "[cuda][matmul]") {
    for (DType dt : {DType::i32, DType::i64}) {
        const Tensor a = zeros({3, 4}, {dt, kGpu}), b = zeros({4, 5}, {dt, kGpu});
        REQUIRE_THROWS_WITH_MSG(kernels::matmul(a, b), "integer dtypes are not supported on cuda");
        REQUIRE_THROWS_WITH_MSG(kernels::linear(a, zeros({5, 4}, {dt, kGpu})),
                                "not supported on cuda");
    }
    REQUIRE_THROWS_WITH_MSG(kernels::matmul(zeros({3, 4}, {DType::f32, kGpu}), zeros({4, 5})),
                            "matmul");
}

TEST_CASE("cuda matmul is deterministic and follows the current stream", "[cuda][matmul]") {
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        const Tensor a = rnd({4, 200, 300}, dt, 51).to(kGpu), b = rnd({300, 150}, dt, 52).to(kGpu);
        const Tensor w = rnd({6, 300, 70}, dt, 53).to(kGpu);
        require_same_bits(kernels::matmul(a, b).to(kCpu), kernels::matmul(a, b).to(kCpu));
        require_same_bits(kernels::matmul(a.slice(0, 0, 1), w).to(kCpu),
                          kernels::matmul(a.slice(0, 0, 1), w).to(kCpu));
        const Tensor want = kernels::matmul(a, b).to(kCpu);
        CudaStream side(kGpu);
        Tensor got;
        {
            StreamGuard guard(side.ref());
            got = kernels::matmul(a, b);
        }
        side.synchronize();
        require_same_bits(got.to(kCpu), want);
    }
}

TEST_CASE("cuda gradients of matmul, bmm, addmm and linear equal the CPU's", "[cuda][matmul]") {
    // Forward and backward on each device from the same leaves; the products
    // of the backward (dC·Bᵀ, Aᵀ·dC with transposed views, sums over
    // broadcast batch dims) all run on the GPU.
    using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
    struct Case {
        const char* name;
        std::vector<Shape> shapes;
        Fn f;
        int64_t k;  // the longest sum in the forward or backward products
    };
    const std::vector<Case> cases = {
        {"matmul 2-d", {{33, 7}, {7, 127}}, [](auto& v) { return matmul(v[0], v[1]); }, 127},
        {"matmul broadcast",
         {{3, 1, 7, 5}, {4, 5, 6}},
         [](auto& v) { return matmul(v[0], v[1]); },
         84},
        {"matmul vector", {{33}, {2, 33, 7}}, [](auto& v) { return matmul(v[0], v[1]); }, 33},
        {"matmul dot", {{127}, {127}}, [](auto& v) { return matmul(v[0], v[1]); }, 127},
        {"bmm", {{4, 7, 33}, {4, 33, 5}}, [](auto& v) { return bmm(v[0], v[1]); }, 33},
        {"addmm", {{127}, {33, 7}, {7, 127}}, [](auto& v) { return addmm(v[0], v[1], v[2]); }, 127},
        {"linear",
         {{4, 7, 33}, {127, 33}, {127}},
         [](auto& v) { return linear(v[0], v[1], v[2]); },
         127},
        {"linear without bias", {{9, 33}, {7, 33}}, [](auto& v) { return linear(v[0], v[1]); }, 33},
    };
    uint64_t seed = 600;
    for (const Case& c : cases) {
        INFO(c.name);
        std::vector<Tensor> cpu, gpu;
        for (const Shape& s : c.shapes) {
            const Tensor t = rnd(s, DType::f32, ++seed);
            cpu.push_back(t.clone());
            gpu.push_back(t.to(kGpu));
        }
        for (Tensor& t : cpu) t.set_requires_grad();
        for (Tensor& t : gpu) t.set_requires_grad();
        const Tensor yc = c.f(cpu), yg = c.f(gpu);
        const Tensor g = rnd(yc.shape(), DType::f32, ++seed);
        yc.backward(g);
        yg.backward(g.to(kGpu));
        const Tol t = tol(DType::f32, c.k);
        check_close(yg.to(kCpu), yc, t.rtol, t.atol);
        for (size_t i = 0; i < cpu.size(); ++i) {
            INFO("input " << i);
            REQUIRE(gpu[i].grad().defined());
            REQUIRE(gpu[i].grad().device() == kGpu);
            check_close(gpu[i].grad().to(kCpu), cpu[i].grad(), t.rtol, t.atol);
        }
    }
}

// Matrix products on CUDA (cuBLAS, kernels/cuda/matmul.cpp) against the CPU
// backend: matmul (2-d, batched with broadcasting, 1-d promotions), bmm,
// addmm and linear with and without bias; transposed, padded, interleaved,
// broadcast and overlapping operands; every floating dtype — f32 with TF32
// off (tight) and on (loose), f16/bf16 against the CPU's f32 result from the
// same inputs, f64 — at sizes 1, 7, 33 and 127; K = 0 and empty products;
// integer operands refused; determinism; a side stream; and the autograd
// gradients of matmul, bmm, addmm and linear against the CPU's.
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

TEST_CASE("cuda matmul of 2-d operands equals the CPU's", "[cuda][matmul]") {
    const int64_t sizes[] = {1, 7, 33, 127};
    uint64_t seed = 0;
    for (DType dt : kFloats)
        for (int64_t m : sizes)
            for (int64_t kk : sizes)
                for (int64_t n : sizes) {
                    INFO(dtype_name(dt)
                         << " [" << m << ", " << kk << "] x [" << kk << ", " << n << "]");
                    check_op(kMatmul, {rnd({m, kk}, dt, ++seed), rnd({kk, n}, dt, ++seed)}, kk);
                }
}

TEST_CASE("cuda matmul broadcasts batches and promotes 1-d operands", "[cuda][matmul]") {
    const std::vector<std::pair<Shape, Shape>> shapes = {
        {{3, 7, 5}, {5, 4}},          // a batch times one matrix (one tall GEMM)
        {{7, 5}, {2, 3, 5, 4}},       // one matrix times a batch (stride-0 left operand)
        {{2, 1, 7, 33}, {3, 33, 4}},  // broadcast both ways (a loop of batched calls)
        {{2, 3, 7, 5}, {1, 3, 5, 6}},
        {{4, 1, 33}, {33}},  // matrix · vector
        {{33}, {2, 33, 7}},  // vector · batch
        {{127}, {127}},      // dot product: a 0-d result
        {{1}, {1, 1}},
        {{5, 1, 1}, {1, 1, 1}},
        {{6, 127, 33}, {6, 33, 1}},
    };
    uint64_t seed = 100;
    for (DType dt : kFloats)
        for (const auto& [sa, sb] : shapes) {
            INFO(dtype_name(dt) << " " << shape_str(sa) << " x " << shape_str(sb));
            const int64_t kk = sa.back();
            check_op(kMatmul, {rnd(sa, dt, ++seed), rnd(sb, dt, ++seed)}, kk);
        }
}

TEST_CASE("cuda matmul reads transposed and strided operands", "[cuda][matmul]") {
    uint64_t seed = 200;
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        const Tensor a = rnd({33, 7}, dt, ++seed), b = rnd({7, 127}, dt, ++seed);
        const Tol t7 = tol(dt, 7);
        {
            INFO("transposed views (CUBLAS_OP_T, no copy)");
            check_op(kMatmul, {a, b}, 7, [](const Tensor& t) { return non_contiguous(t); });
        }
        {
            INFO("padded rows: a leading dim past the row");
            check_op(kMatmul, {a, b}, 7, [](const Tensor& t) {
                Tensor wide = zeros({t.size(0), t.size(1) + 3}, {t.dtype(), t.device()});
                Tensor view = wide.slice(1, 0, t.size(1));
                view.copy_(t);
                return view;
            });
        }
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
        {
            INFO("strided vectors");
            const Tensor v = rnd({33}, dt, ++seed), m = rnd({4, 33, 6}, dt, ++seed);
            check_op(kMatmul, {v, m}, 33, [](const Tensor& t) { return non_contiguous(t); });
            check_op([](const std::vector<Tensor>& x) { return kernels::matmul(x[1], x[0]); },
                     {rnd({7}, dt, ++seed), rnd({2, 5, 7}, dt, ++seed)}, 7,
                     [](const Tensor& t) { return non_contiguous(t); });
        }
    }
}

TEST_CASE("cuda bmm, addmm and linear equal the CPU's", "[cuda][matmul]") {
    uint64_t seed = 300;
    const Op bmm = [](const std::vector<Tensor>& v) { return kernels::bmm(v[0], v[1]); };
    const Op addmm = [](const std::vector<Tensor>& v) { return kernels::addmm(v[0], v[1], v[2]); };
    const Op linear = [](const std::vector<Tensor>& v) {
        return kernels::linear(v[0], v[1], v[2]);
    };
    const Op linear_nb = [](const std::vector<Tensor>& v) { return kernels::linear(v[0], v[1]); };
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        check_op(bmm, {rnd({5, 33, 7}, dt, ++seed), rnd({5, 7, 127}, dt, ++seed)}, 7);
        check_op(bmm, {rnd({1, 1, 1}, dt, ++seed), rnd({1, 1, 1}, dt, ++seed)}, 1);
        check_op(bmm, {rnd({4, 7, 33}, dt, ++seed), rnd({4, 33, 7}, dt, ++seed)}, 33,
                 [](const Tensor& t) { return non_contiguous(t); });
        // addmm: a bias row, a column, a full matrix, a scalar-like [1, 1].
        for (const Shape& cs : std::vector<Shape>{{127}, {33, 1}, {33, 127}, {1, 1}}) {
            INFO("addmm c " << shape_str(cs));
            check_op(addmm,
                     {rnd(cs, dt, ++seed), rnd({33, 7}, dt, ++seed), rnd({7, 127}, dt, ++seed)}, 7);
            check_op(addmm,
                     {rnd(cs, dt, ++seed), rnd({33, 7}, dt, ++seed), rnd({7, 127}, dt, ++seed)}, 7,
                     [](const Tensor& t) { return non_contiguous(t); });
        }
        // linear: rows of x, a batch of rows, one vector; with and without bias.
        for (const Shape& xs : std::vector<Shape>{{33, 127}, {4, 7, 127}, {127}, {1, 127}}) {
            INFO("linear x " << shape_str(xs));
            check_op(linear,
                     {rnd(xs, dt, ++seed), rnd({33, 127}, dt, ++seed), rnd({33}, dt, ++seed)}, 127);
            check_op(linear_nb, {rnd(xs, dt, ++seed), rnd({7, 127}, dt, ++seed)}, 127);
        }
        // A non-contiguous weight (its transpose is then row-major).
        check_op(linear, {rnd({9, 33}, dt, ++seed), rnd({7, 33}, dt, ++seed), rnd({7}, dt, ++seed)},
                 33, [](const Tensor& t) { return non_contiguous(t); });
    }
}

TEST_CASE("cuda matmul with K = 0 or an empty result", "[cuda][matmul]") {
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        // K = 0: an empty sum, zeros. (A freed block filled with 7s first, so
        // that memory the allocator hands back is likely not zero already.)
        { const Tensor junk = full({33, 7}, 7.0, {dt, kGpu}); }
        const Tensor z = kernels::matmul(zeros({33, 0}, {dt, kGpu}), zeros({0, 7}, {dt, kGpu}));
        REQUIRE(z.shape() == Shape{33, 7});
        check_close(z.to(kCpu), std::vector<double>(33 * 7, 0.0), 0, 0);
        const Tensor zb = kernels::matmul(zeros({2, 5, 0}, {dt, kGpu}), zeros({0, 3}, {dt, kGpu}));
        check_close(zb.to(kCpu), std::vector<double>(30, 0.0), 0, 0);
        // ... and c itself when there is one.
        const Tensor c = rnd({7}, dt, 5);
        const Tensor got =
            kernels::addmm(c.to(kGpu), zeros({3, 0}, {dt, kGpu}), zeros({0, 7}, {dt, kGpu}));
        check_close(got.to(kCpu), kernels::addmm(c, zeros({3, 0}, {dt}), zeros({0, 7}, {dt})), 0,
                    0);
        const Tensor lin =
            kernels::linear(zeros({4, 0}, {dt, kGpu}), zeros({7, 0}, {dt, kGpu}), c.to(kGpu));
        check_close(lin.to(kCpu), kernels::linear(zeros({4, 0}, {dt}), zeros({7, 0}, {dt}), c), 0,
                    0);
        // Empty results: nothing to compute.
        CHECK(kernels::matmul(zeros({0, 5}, {dt, kGpu}), zeros({5, 3}, {dt, kGpu})).shape() ==
              Shape{0, 3});
        CHECK(kernels::matmul(zeros({2, 0, 4, 5}, {dt, kGpu}), zeros({5, 3}, {dt, kGpu})).shape() ==
              Shape{2, 0, 4, 3});
        CHECK(kernels::bmm(zeros({3, 4, 5}, {dt, kGpu}), zeros({3, 5, 0}, {dt, kGpu})).shape() ==
              Shape{3, 4, 0});
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

// Cross-entropy on CUDA beyond the op table (kernels/cuda/loss.cu). The
// comparisons with the CPU backend on random inputs (forward and backward,
// every logits dtype, an f16 grad_loss, label smoothing, ignore_index, each
// launch mapping, transposed inputs) are the op table's
// (tests/ops/entries_loss.cpp, run by tests/cuda/test_cuda_ops.cpp; its
// cuda_tolerance holds f64 logits to 1e-12). Here: the reductions and the
// gradient through the differentiable op, bad targets reported through the
// device error flag at the next synchronization (and nothing read back
// before it), determinism, NaN and infinities. Beside it, softmax cases the
// op table does not hold: a middle dim, a 50000-long row, NaN and infinities
// in each launch mapping, determinism (kernels/cuda/softmax.cu).
#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/cuda_context.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const Device kCpu = Device::cpu();
const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// Class indices in [0, c), every fifth row set to ignore_index.
Tensor make_targets(int64_t n, int64_t c, uint64_t seed, int64_t ignore_index) {
    std::vector<int64_t> v =
        random_tensor({n}, DType::i64, seed, 0, double(c)).to_vector<int64_t>();
    for (size_t i = 0; i < v.size(); i += 5) v[i] = ignore_index;
    return from_vector(v, {n});
}

// Tolerance of an f32-or-wider result computed from `logits` of dtype t: the
// two backends round once from f64 sums of terms whose exps differ by an ulp.
double acc_tol(DType t) { return t == DType::f64 ? 1e-12 : 2e-6; }
// Of a result in the logits' dtype.
double out_tol(DType t) { return t == DType::f64 ? 1e-12 : t == DType::f32 ? 2e-6 : rtol_for(t); }
// softmax: as tests/cuda/test_cuda_ops.cpp (the device's __expf is a few ulp off).
double softmax_tol(DType t) {
    return t == DType::f64 ? 1e-13 : t == DType::f32 ? 4e-6 : rtol_for(t);
}

void require_same_bits(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    const std::vector<double> va = values(a), vb = values(b);
    int64_t differ = 0;
    for (size_t i = 0; i < va.size(); ++i) differ += va[i] != vb[i];
    CHECK(differ == 0);
}

}  // namespace

TEST_CASE("cuda cross_entropy: reductions and the gradient through the op", "[cuda][loss]") {
    const Reduction reductions[] = {Reduction::none, Reduction::mean, Reduction::sum};
    uint64_t seed = 200;
    for (DType dt : {DType::f32, DType::bf16})
        for (Reduction r : reductions)
            for (const auto& [n, c] :
                 std::vector<std::pair<int64_t, int64_t>>{{37, 1000}, {6, 3000}}) {
                INFO(dtype_name(dt) << " [" << n << ", " << c << "], reduction " << int(r));
                const Tensor x = random_tensor({n, c}, dt, ++seed, -4, 4);
                const Tensor t = make_targets(n, c, seed, -100);
                const CrossEntropyOptions o{0.1, r, -100};
                Tensor xc = x.clone(), xg = x.to(kGpu);
                xc.set_requires_grad(true);
                xg.set_requires_grad(true);
                const Tensor yc = cross_entropy(xc, t, o), yg = cross_entropy(xg, t.to(kGpu), o);
                REQUIRE(yg.device() == kGpu);
                check_close(yg.to(kCpu), yc, 2e-6, 2e-6);
                const Tensor gy = random_tensor(yc.shape(), yc.dtype(), seed + 1, -1, 1);
                yc.backward(gy);
                yg.backward(gy.to(kGpu));
                check_close(xg.grad().to(kCpu), xc.grad(), out_tol(dt), out_tol(dt) * 0.1);
            }
}

TEST_CASE("cuda cross_entropy: a bad target is an Error at the next synchronization",
          "[cuda][loss]") {
    const Tensor x = random_tensor({4, 5}, DType::f32, 1).to(kGpu);
    for (int64_t bad : {int64_t(5), int64_t(-1), int64_t(1) << 40}) {
        INFO("bad target " << bad);
        const Tensor t = from_vector<int64_t>({0, 1, bad, -100}, {4}).to(kGpu);
        const std::string where = "target " + std::to_string(bad) + " at position 2";
        // Nothing is read back to the host before the synchronization: the
        // calls themselves return (unless sync-debug mode checks every op).
        std::string msg;
        if (!sync_debug()) {
            kernels::CrossEntropyForward f;
            REQUIRE_NOTHROW(f = kernels::cross_entropy_forward(x, t, 0.1, -100));
            msg = error_of([&] { synchronize(kGpu); });
        } else {
            msg = error_of([&] { (void)kernels::cross_entropy_forward(x, t, 0.1, -100); });
        }
        INFO(msg);
        CHECK(msg.find("cross_entropy_forward: " + where) != std::string::npos);

        const Tensor lse = zeros({4}, {DType::f64, kGpu}), g = ones({4}, {DType::f32, kGpu});
        msg = error_of([&] {
            (void)kernels::cross_entropy_backward(g, x, lse, t, 0.1, -100);
            synchronize(kGpu);
        });
        CHECK(msg.find("cross_entropy_backward: " + where) != std::string::npos);

        // The mean through the differentiable op divides on the device: the
        // call returns, and the error comes with the copy of its value.
        Tensor loss;
        if (!sync_debug()) {
            REQUIRE_NOTHROW(loss = cross_entropy(x, t));
            msg = error_of([&] { (void)loss.to(kCpu); });
        } else {
            msg = error_of([&] { (void)cross_entropy(x, t); });
        }
        CHECK(msg.find("cross_entropy_forward: " + where) != std::string::npos);

        msg = error_of([&] {
            kernels::check_class_targets("nll_loss", t, 5, -100);
            synchronize(kGpu);
        });
        CHECK(msg.find("nll_loss: " + where) != std::string::npos);
    }
    // The context is not poisoned: later work and checks succeed.
    const Tensor t = from_vector<int64_t>({0, 1, 4, -100}, {4}).to(kGpu);
    CHECK_NOTHROW(cross_entropy(x, t).to(kCpu));
    CHECK_NOTHROW(synchronize(kGpu));
}

TEST_CASE("cuda cross_entropy and softmax give the same bits every run", "[cuda][loss][softmax]") {
    for (const auto& [n, c] : std::vector<std::pair<int64_t, int64_t>>{{64, 5000}, {200, 300}}) {
        const Tensor x = random_tensor({n, c}, DType::f32, 9, -4, 4).to(kGpu);
        const Tensor t = make_targets(n, c, 9, -100).to(kGpu);
        const Tensor g = random_tensor({n}, DType::f32, 10, -1, 1).to(kGpu);
        const kernels::CrossEntropyForward a = kernels::cross_entropy_forward(x, t, 0.1, -100),
                                           b = kernels::cross_entropy_forward(x, t, 0.1, -100);
        require_same_bits(a.loss.to(kCpu), b.loss.to(kCpu));
        require_same_bits(a.lse.to(kCpu), b.lse.to(kCpu));
        require_same_bits(kernels::cross_entropy_backward(g, x, a.lse, t, 0.1, -100).to(kCpu),
                          kernels::cross_entropy_backward(g, x, a.lse, t, 0.1, -100).to(kCpu));
        const Tensor y = kernels::softmax(x, 1),
                     gy = random_tensor({n, c}, DType::f32, 11).to(kGpu);
        require_same_bits(y.to(kCpu), kernels::softmax(x, 1).to(kCpu));
        require_same_bits(kernels::log_softmax(x, 1).to(kCpu), kernels::log_softmax(x, 1).to(kCpu));
        require_same_bits(kernels::softmax_backward(gy, y, 1).to(kCpu),
                          kernels::softmax_backward(gy, y, 1).to(kCpu));
    }
    const Tensor x3 = random_tensor({4, 3000, 3}, DType::f32, 12).to(kGpu);
    require_same_bits(kernels::softmax(x3, 1).to(kCpu), kernels::softmax(x3, 1).to(kCpu));
}

TEST_CASE("cuda softmax over a middle dim and along long rows equals the CPU's",
          "[cuda][softmax]") {
    // [outer, size, inner] with inner > 1 (a thread per column), a long row
    // (a block per row), size 1.
    const std::vector<std::pair<Shape, int64_t>> cases = {
        {{4, 3000, 3}, 1}, {{2, 5, 7000}, 1}, {{2, 50000}, 1}, {{3, 1, 5}, 1}, {{6, 1000}, 0}};
    uint64_t seed = 300;
    for (DType dt : kFloats)
        for (const auto& [shape, dim] : cases) {
            INFO(dtype_name(dt) << " " << shape_str(shape) << " dim " << dim);
            const Tensor x = random_tensor(shape, dt, ++seed, -4, 4), xg = x.to(kGpu);
            const double tol = softmax_tol(dt);
            const Tensor y = kernels::softmax(x, dim), ly = kernels::log_softmax(x, dim);
            check_close(kernels::softmax(xg, dim).to(kCpu), y, tol, tol);
            check_close(kernels::log_softmax(xg, dim).to(kCpu), ly, tol, tol);
            const Tensor g = random_tensor(shape, dt, seed + 1, -1, 1), gg = g.to(kGpu);
            check_close(kernels::softmax_backward(gg, y.to(kGpu), dim).to(kCpu),
                        kernels::softmax_backward(g, y, dim), tol, tol);
            check_close(kernels::log_softmax_backward(gg, ly.to(kGpu), dim).to(kCpu),
                        kernels::log_softmax_backward(g, ly, dim), tol, tol);
        }
}

TEST_CASE("cuda softmax and cross_entropy: NaN and infinities as on the CPU in every mapping",
          "[cuda][softmax][loss]") {
    const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
    for (int64_t c : {int64_t(100), int64_t(3000)}) {  // a warp per row; a block per row
        // Rows: plain; some -inf; a NaN; all -inf; a +inf; magnitude 1000.
        std::vector<double> v = values(random_tensor({6, c}, DType::f64, 5, -4, 4));
        for (int64_t j = 0; j < c; j += 3) v[size_t(c + j)] = -inf;
        v[size_t(2 * c + c / 2)] = nan;
        for (int64_t j = 0; j < c; ++j) v[size_t(3 * c + j)] = -inf;
        v[size_t(4 * c + 7)] = inf;
        for (int64_t j = 0; j < c; ++j) v[size_t(5 * c + j)] *= 250;
        for (DType dt : kFloats) {
            INFO(dtype_name(dt) << ", " << c << " classes");
            const Tensor x = from_vector(v, {6, c}).to(dt);
            const double tol = softmax_tol(dt);
            for (bool log : {false, true}) {
                INFO((log ? "log_softmax" : "softmax"));
                const auto f = log ? kernels::log_softmax : kernels::softmax;
                check_close(f(x.to(kGpu), 1).to(kCpu), f(x, 1), tol, tol);
                // The same rows as columns (inner > 1).
                const Tensor xt = x.transpose(0, 1).contiguous();
                check_close(f(xt.to(kGpu), 0).to(kCpu), f(xt, 0), tol, tol);
            }
            // cross-entropy of the same rows (a warp per row; a block per row).
            const Tensor t = from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {6});
            const kernels::CrossEntropyForward want =
                                                   kernels::cross_entropy_forward(x, t, 0.1, -100),
                                               got = kernels::cross_entropy_forward(
                                                   x.to(kGpu), t.to(kGpu), 0.1, -100);
            check_close(got.loss.to(kCpu), want.loss, acc_tol(dt), acc_tol(dt));
            check_close(got.lse.to(kCpu), want.lse, acc_tol(dt), acc_tol(dt));
        }
    }
}

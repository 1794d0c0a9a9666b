// dropout_forward / dropout_backward: the mask equals rand(...) >= p through
// the public rand at the same generator state (which pins it to the stream of
// docs/rng.md), kept values scaled by 1 / (1 − p), the keep fraction, p == 0,
// strided inputs, every floating dtype, thread-count independence, the block
// count, and every error path.
#include <omp.h>

#include <cmath>

#include "kernels/dropout.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};

// The mask rand() gives at (seed, offset): element i kept iff U_i >= p. Also
// checks that rand consumed exactly dropout_blocks(n) blocks.
std::vector<uint8_t> rand_mask(const Shape& shape, double p, uint64_t seed, uint64_t offset) {
    Generator gen(seed);
    gen.set_state({seed, offset});
    const std::vector<float> u = rand(shape, {DType::f32}, &gen).to_vector<float>();
    CHECK(gen.state().offset == offset + kernels::dropout_blocks(int64_t(u.size())));
    std::vector<uint8_t> m;
    for (float v : u) m.push_back(double(v) >= p);
    return m;
}

}  // namespace

TEST_CASE("dropout keeps exactly where rand() >= p and scales by 1 / (1 - p)", "[dropout]") {
    const Shape shapes[] = {{1}, {7}, {3, 5}, {2, 3, 4, 5}, {257, 9}, {0, 4}};
    uint64_t seed = 1;
    for (const Shape& shape : shapes) {
        for (DType dt : kFloats) {
            for (double p : {0.1, 0.5, 0.9}) {
                const uint64_t offset = seed * 1000 + 3;  // any block, not just 0
                const Tensor x = random_tensor(shape, dt, seed++, -3, 3);
                const std::vector<uint8_t> want = rand_mask(shape, p, 77, offset);
                const std::vector<double> xv = values(x);
                std::vector<double> want_y;
                for (size_t i = 0; i < xv.size(); ++i)
                    want_y.push_back(want[i] ? xv[i] / (1 - p) : 0);
                for (bool strided : {false, true}) {
                    INFO(dtype_name(dt)
                         << " " << shape_str(shape) << " p " << p << (strided ? " strided" : ""));
                    const auto f =
                        kernels::dropout_forward(strided ? non_contiguous(x) : x, p, 77, offset);
                    REQUIRE(f.mask.dtype() == DType::u8);
                    REQUIRE(f.mask.shape() == shape);
                    REQUIRE(f.output.dtype() == dt);
                    CHECK(f.mask.to_vector<uint8_t>() == want);
                    check_close(f.output, want_y, rtol_for(dt), 0);
                }
            }
        }
    }
}

TEST_CASE("dropout keeps about 1 - p of 1e5 elements, and masks differ by block", "[dropout]") {
    const Tensor x = ones({100000});
    for (double p : {0.05, 0.3, 0.5, 0.8}) {
        INFO("p " << p);
        const auto f = kernels::dropout_forward(x, p, 5, 0);
        double kept = 0;
        for (uint8_t m : f.mask.to_vector<uint8_t>()) kept += m;
        // 5 standard deviations of a binomial over 1e5 draws.
        const double sd = std::sqrt(p * (1 - p) / 1e5);
        CHECK(std::abs(kept / 1e5 - (1 - p)) < 5 * sd);
    }
    const auto a = kernels::dropout_forward(x, 0.5, 5, 0),
               b = kernels::dropout_forward(x, 0.5, 5, 25000);
    const auto c = kernels::dropout_forward(x, 0.5, 6, 0),
               again = kernels::dropout_forward(x, 0.5, 5, 0);
    CHECK(a.mask.to_vector<uint8_t>() == again.mask.to_vector<uint8_t>());
    CHECK(a.mask.to_vector<uint8_t>() != b.mask.to_vector<uint8_t>());
    CHECK(a.mask.to_vector<uint8_t>() != c.mask.to_vector<uint8_t>());
}

TEST_CASE("dropout with p == 0 is the identity with an all-ones mask", "[dropout]") {
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        const Tensor x = random_tensor({5, 7}, dt, 10);
        const auto f = kernels::dropout_forward(non_contiguous(x), 0, 1, 2);
        CHECK(values(f.output) == values(x));
        CHECK(f.mask.to_vector<uint8_t>() == std::vector<uint8_t>(35, 1));
        CHECK(f.mask.to_vector<uint8_t>() == rand_mask({5, 7}, 0, 1, 2));
    }
}

TEST_CASE("dropout_backward is grad * mask / (1 - p)", "[dropout]") {
    uint64_t seed = 20;
    for (DType dt : kFloats) {
        for (const Shape& shape : {Shape{9}, Shape{4, 6}, Shape{0}}) {
            INFO(dtype_name(dt) << " " << shape_str(shape));
            const auto f = kernels::dropout_forward(random_tensor(shape, dt, seed++), 0.25, 3, 4);
            const Tensor g = random_tensor(shape, dt, seed++);
            const std::vector<double> gv = values(g), mv = values(f.mask);
            std::vector<double> want;
            for (size_t i = 0; i < gv.size(); ++i) want.push_back(gv[i] * mv[i] / 0.75);
            const Tensor gx =
                kernels::dropout_backward(non_contiguous(g), non_contiguous(f.mask), 0.25);
            REQUIRE(gx.dtype() == dt);
            check_close(gx, want, rtol_for(dt), 0);
        }
    }
}

TEST_CASE("dropout gives the same mask for 1 and 2 threads", "[dropout]") {
    const Tensor x = random_tensor({300000}, DType::f32, 30);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(std::max(2, saved));
    const auto many = kernels::dropout_forward(x, 0.4, 9, 11);
    omp_set_num_threads(1);
    const auto one = kernels::dropout_forward(x, 0.4, 9, 11);
    omp_set_num_threads(saved);
    CHECK(many.mask.to_vector<uint8_t>() == one.mask.to_vector<uint8_t>());
    CHECK(many.output.to_vector<float>() == one.output.to_vector<float>());
}

TEST_CASE("dropout_blocks counts 4 elements per block", "[dropout]") {
    CHECK(kernels::dropout_blocks(0) == 0);
    CHECK(kernels::dropout_blocks(1) == 1);
    CHECK(kernels::dropout_blocks(4) == 1);
    CHECK(kernels::dropout_blocks(5) == 2);
    CHECK(kernels::dropout_blocks(int64_t(1) << 40) == uint64_t(1) << 38);
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_blocks(-1),
                            "dropout_blocks: negative element count -1");
}

TEST_CASE("dropout errors name the op and the problem", "[dropout][errors]") {
    const Tensor x = random_tensor({2, 3}, DType::f32, 40);
    const Tensor m = ones({2, 3}, {DType::u8});
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_forward(Tensor(), 0.5, 0, 0),
                            "dropout_forward: undefined input");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_forward(x.to(DType::i64), 0.5, 0, 0),
                            "dropout_forward: expected a floating-point tensor, got i64 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_forward(x, 1.0, 0, 0),
                            "dropout_forward: p must be in [0, 1), got 1");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_forward(x, -0.5, 0, 0),
                            "p must be in [0, 1), got -0.5");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_forward(x, NAN, 0, 0), "p must be in [0, 1)");
    REQUIRE_THROWS_WITH_MSG(
        kernels::dropout_backward(x, m.to(DType::f32), 0.5),
        "dropout_backward: expected mask u8 [2, 3] for grad_y f32 [2, 3] on cpu, "
        "got f32 [2, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_backward(x, ones({3, 2}, {DType::u8}), 0.5),
                            "got u8 [3, 2] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_backward(x, m, 1.5),
                            "dropout_backward: p must be in [0, 1), got 1.5");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_backward(Tensor(), m, 0.5),
                            "dropout_backward: undefined tensor (grad_y undefined, mask u8 [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::dropout_backward(m, m, 0.5),
                            "dropout_backward: expected a floating-point tensor, got u8");
}

// CUDA reductions against the CPU beside the op table's cases
// (test_cuda_ops.cpp): a long row split across blocks, many short rows,
// [outer, size, inner] with inner > 1 split into chunks, size-1 dims, the
// first index of ties and of NaN, integer and bool sums into i64, every
// floating dtype, non-contiguous inputs, and two runs giving the same bits.
// Sums and means add in the CPU's order (Note [Reduction order] in
// kernels/cuda/reduce_plan.h), so they must match exactly; norms and
// variances may differ by FMA contraction.
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/reduce.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
Tensor gpu(const Tensor& t) { return t.to(kGpu); }
Tensor cpu(const Tensor& t) { return t.to(Device::cpu()); }

double tol(DType t) { return t == DType::f64 ? 1e-13 : t == DType::f32 ? 4e-6 : rtol_for(t); }

// Every reduction of x over dims on the GPU against the CPU: sums, means and
// extremes exactly, the rest within a few ulp.
void check_all(const Tensor& x, const Shape& dims) {
    const Tensor g = gpu(x);
    INFO(dtype_name(x.dtype()) << " " << shape_str(x.shape()) << " over dims " << shape_str(dims));
    check_close(cpu(kernels::sum(g, dims)), kernels::sum(x, dims), 0, 0);
    check_close(cpu(kernels::amax(g, dims)), kernels::amax(x, dims), 0, 0);
    check_close(cpu(kernels::amin(g, dims)), kernels::amin(x, dims), 0, 0);
    if (!is_floating(x.dtype())) return;
    const double t = tol(x.dtype());
    check_close(cpu(kernels::mean(g, dims)), kernels::mean(x, dims), 0, 0);
    for (double p : {1.0, 2.0, double(INFINITY)})
        check_close(cpu(kernels::norm(g, p, dims)), kernels::norm(x, p, dims), t, t);
    for (double c : {0.0, 1.0}) {
        check_close(cpu(kernels::var(g, dims, c)), kernels::var(x, dims, c), t, t);
        check_close(cpu(kernels::std(g, dims, c)), kernels::std(x, dims, c), t, t);
    }
}

// max / min along dim: values and indices exactly as the CPU's.
void check_extremes(const Tensor& x, int64_t dim) {
    const Tensor g = gpu(x);
    INFO(dtype_name(x.dtype()) << " " << shape_str(x.shape()) << " along dim " << dim);
    for (bool is_max : {true, false}) {
        const ValuesIndices want = is_max ? kernels::max(x, dim) : kernels::min(x, dim);
        const ValuesIndices got = is_max ? kernels::max(g, dim) : kernels::min(g, dim);
        check_close(cpu(got.indices), want.indices, 0, 0);
        check_close(cpu(got.values), want.values, 0, 0);
        check_close(cpu(is_max ? kernels::argmax(g, dim) : kernels::argmin(g, dim)), want.indices,
                    0, 0);
    }
}

// The bytes of a tensor's elements (as f64 for floating dtypes, i64 otherwise).
std::vector<unsigned char> bits(const Tensor& t) {
    const Tensor h = cpu(t);
    std::vector<unsigned char> out;
    if (is_floating(h.dtype())) {
        const std::vector<double> v = h.to(DType::f64).to_vector<double>();
        out.resize(v.size() * sizeof(double));
        std::memcpy(out.data(), v.data(), out.size());
    } else {
        const std::vector<int64_t> v = h.to(DType::i64).to_vector<int64_t>();
        out.resize(v.size() * sizeof(int64_t));
        std::memcpy(out.data(), v.data(), out.size());
    }
    return out;
}

// Values in {0, 1, 2}: ties everywhere.
Tensor ties(const Shape& shape, DType dtype, uint64_t seed) {
    return random_tensor(shape, DType::i32, seed, 0, 3).to(dtype);
}

// x with NaN written at the given flat positions.
Tensor with_nans(const Tensor& x, const std::vector<int64_t>& at) {
    std::vector<double> v = values(x);
    for (int64_t i : at) v[size_t(i)] = std::numeric_limits<double>::quiet_NaN();
    return from_vector(v, x.shape()).to(x.dtype());
}

}  // namespace

TEST_CASE("cuda: a long row split across blocks equals the CPU's", "[cuda][reduce]") {
    const int64_t n = int64_t(1) << 21;
    for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
        const Tensor x = random_tensor({3, n}, t, 11);
        check_all(x, {1});
        check_all(x, {});
        check_extremes(x, 1);
    }
    // A single row of 2^24 + 3: the most chunks, an odd tail.
    check_all(random_tensor({(int64_t(1) << 24) + 3}, DType::f32, 12), {0});
}

TEST_CASE("cuda: many short rows equal the CPU's", "[cuda][reduce]") {
    for (int64_t size : {1, 2, 7, 16, 17, 255, 256, 257, 513}) {
        const Tensor x = random_tensor({20001, size}, DType::f32, uint64_t(size));
        check_all(x, {1});
        check_extremes(x, 1);
    }
    check_all(random_tensor({100003, 7}, DType::bf16, 13), {1});
}

TEST_CASE("cuda: [outer, size, inner] with inner > 1 equals the CPU's", "[cuda][reduce]") {
    for (DType t : {DType::f32, DType::f64, DType::f16}) {
        check_all(random_tensor({6, 1000, 33}, t, 21), {1});
        check_all(random_tensor({2, 100001, 3}, t, 22), {1});  // few columns: chunks
        check_all(random_tensor({1, 9, 70000}, t, 23), {1});    // many columns, short
        check_all(random_tensor({3, 17, 5}, t, 24), {0, 2});    // a permuted copy
        check_extremes(random_tensor({2, 100001, 3}, t, 25), 1);
        check_extremes(random_tensor({6, 1000, 33}, t, 26), 1);
    }
}

TEST_CASE("cuda: size-1 and size-0 dims", "[cuda][reduce]") {
    check_all(random_tensor({5, 1, 7}, DType::f32, 31), {1});
    check_all(random_tensor({9, 1}, DType::f32, 32), {1});
    check_all(random_tensor({1}, DType::f64, 33), {0});
    check_all(random_tensor({}, DType::f32, 34), {});
    check_extremes(random_tensor({5, 1, 7}, DType::f32, 35), 1);
    const Tensor empty_dim = gpu(random_tensor({3, 0}, DType::f32, 36));
    check_close(cpu(kernels::sum(empty_dim, {1})), {0, 0, 0}, 0, 0);
    REQUIRE(std::isnan(cpu(kernels::mean(empty_dim, {1})).to_vector<float>()[0]));
    REQUIRE(kernels::sum(gpu(random_tensor({0, 4}, DType::f32, 37)), {1}).numel() == 0);
    REQUIRE_THROWS_WITH_MSG(kernels::amax(empty_dim, {1}), "amax: cannot reduce over");
}

TEST_CASE("cuda: max and min give the first index of ties", "[cuda][reduce]") {
    for (DType t : {DType::f32, DType::f16, DType::i32, DType::i64, DType::u8}) {
        check_extremes(ties({300, 257}, t, 41), 1);
        check_extremes(ties({300, 257}, t, 42), 0);
        check_extremes(ties({2, 1 << 20}, t, 43), 1);  // ties across chunks
        check_extremes(ties({4, 3000, 5}, t, 44), 1);
    }
    const Tensor x = gpu(from_vector(std::vector<float>{1, 3, 3, 0, 3, 0}, {6}));
    check_close(cpu(kernels::argmax(x)), {1}, 0, 0);
    check_close(cpu(kernels::argmin(x)), {3}, 0, 0);
}

TEST_CASE("cuda: NaN wins amax, amin, max and min, its first index", "[cuda][reduce]") {
    const int64_t n = int64_t(1) << 20;
    const Tensor rows = with_nans(random_tensor({4, n}, DType::f32, 51),
                                  {5, 7, n + 1000, n + 3, 2 * n + n - 1, 2 * n + 600000});
    check_extremes(rows, 1);
    check_close(cpu(kernels::amax(gpu(rows), {1})), kernels::amax(rows, {1}), 0, 0);
    check_close(cpu(kernels::amin(gpu(rows), {1})), kernels::amin(rows, {1}), 0, 0);
    check_close(cpu(kernels::norm(gpu(rows), INFINITY, {1})), kernels::norm(rows, INFINITY, {1}), 0,
                0);
    const Tensor cols = with_nans(random_tensor({3, 5000, 4}, DType::f16, 52),
                                  {4 * 10 + 1, 4 * 4000 + 1, 20000 + 4 * 7 + 2, 20000 + 2});
    check_extremes(cols, 1);
    const Tensor flat = gpu(with_nans(random_tensor({7, 9}, DType::f32, 53), {40, 20}));
    check_close(cpu(kernels::argmax(flat)), {20}, 0, 0);
    check_close(cpu(kernels::argmin(flat)), {20}, 0, 0);
}

TEST_CASE("cuda: integer and bool sums give i64 as the CPU's", "[cuda][reduce]") {
    for (DType t : {DType::i32, DType::i64, DType::u8, DType::boolean}) {
        const double lo = t == DType::i32 || t == DType::i64 ? -1000 : 0;
        const double hi = t == DType::i32 || t == DType::i64 ? 1000 : 250;
        const Tensor x = random_tensor({5, 70001}, t, 61, lo, hi);
        const Tensor got = cpu(kernels::sum(gpu(x), {1}));
        REQUIRE(got.dtype() == DType::i64);
        check_close(got, kernels::sum(x, {1}), 0, 0);
        check_all(x, {0});
        check_all(random_tensor({3, 2000, 3}, t, 62, lo, hi), {1});
    }
    // Past 2^31 in i32 inputs, and wrapping past 2^63 like the CPU.
    check_close(cpu(kernels::sum(gpu(full({3}, 2e9, {DType::i32})))), {6e9}, 0, 0);
    const Tensor big = full({4}, double(int64_t(1) << 62), {DType::i64});
    REQUIRE(cpu(kernels::sum(gpu(big))).to_vector<int64_t>() ==
            kernels::sum(big).to_vector<int64_t>());
}

TEST_CASE("cuda: non-contiguous inputs equal the CPU's", "[cuda][reduce]") {
    const Tensor base = random_tensor({64, 300}, DType::f32, 71);
    for (const Tensor& x : {base.transpose(0, 1), base.slice(1, 0, 300, 3), base.slice(0, 1, 64, 2)}) {
        check_all(x, {0});
        check_all(x, {1});
        check_extremes(x, 0);
    }
}

TEST_CASE("cuda: two runs of a reduction give the same bits", "[cuda][reduce]") {
    const Tensor x = gpu(random_tensor({3, int64_t(1) << 21}, DType::f32, 81));
    const Tensor c = gpu(random_tensor({2, 100001, 3}, DType::f32, 82));
    for (const Tensor* t : {&x, &c}) {
        const Shape dims = {1};
        REQUIRE(bits(kernels::sum(*t, dims)) == bits(kernels::sum(*t, dims)));
        REQUIRE(bits(kernels::norm(*t, 2, dims)) == bits(kernels::norm(*t, 2, dims)));
        REQUIRE(bits(kernels::var(*t, dims)) == bits(kernels::var(*t, dims)));
        REQUIRE(bits(kernels::max(*t, 1).indices) == bits(kernels::max(*t, 1).indices));
    }
}

// Tests for cat, stack, split and chunk against naive references over
// multi-indices: every dim, size-0 and size-1 dims, non-contiguous inputs,
// mixed dtypes, threaded sizes, split/cat round trips, and every error path.
#include "support/support.h"

#include "kernels/cpu/shape_ops.h"
#include "kernels/front.h"
#include "kernels/shape_ops.h"

using namespace ember;
using namespace ember::test;

namespace {

int64_t flat(const Shape& idx, const Shape& shape) {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
    return f;
}

// Reference cat: output element p comes from the input whose range along dim holds p[dim].
std::vector<double> ref_cat(const std::vector<Tensor>& ts, int64_t dim, const Shape& out_shape) {
    std::vector<std::vector<double>> vals;
    for (const Tensor& t : ts) vals.push_back(values(t));
    std::vector<double> out;
    for (int64_t o = 0; o < shape_numel(out_shape); ++o) {
        Shape p = unravel(o, out_shape);
        size_t i = 0;
        while (p[size_t(dim)] >= ts[i].size(dim)) p[size_t(dim)] -= ts[i++].size(dim);
        out.push_back(vals[i][size_t(flat(p, ts[i].shape()))]);
    }
    return out;
}

std::vector<int64_t> sizes_along(const std::vector<Tensor>& parts, int64_t dim) {
    std::vector<int64_t> s;
    for (const Tensor& p : parts) s.push_back(p.size(dim));
    return s;
}

}  // namespace

TEST_CASE("cat matches the reference for every dim, dtype and layout", "[shape_ops][cat]") {
    const Shape shapes[] = {{5}, {2, 3}, {2, 3, 4}, {3, 0, 2}, {1, 1}, {2, 1, 3, 2}};
    int64_t case_no = 0;
    for (const Shape& base : shapes) {
        for (int64_t dim = -int64_t(base.size()); dim < int64_t(base.size()); ++dim) {
            for (DType dtype :
                 {DType::f32, DType::f64, DType::f16, DType::i64, DType::u8, DType::boolean}) {
                for (int count = 1; count <= 3; ++count) {
                    ++case_no;
                    const int64_t d = dim < 0 ? dim + int64_t(base.size()) : dim;
                    std::vector<Tensor> ts;
                    Shape out_shape = base;
                    out_shape[size_t(d)] = 0;
                    for (int i = 0; i < count; ++i) {
                        Shape s = base;
                        s[size_t(d)] = (case_no + i) % 4;  // 0..3, size 0 included
                        out_shape[size_t(d)] += s[size_t(d)];
                        Tensor t = random_tensor(s, dtype, uint64_t(case_no * 10 + i));
                        ts.push_back((case_no + i) % 3 == 0 ? non_contiguous(t) : t);
                    }
                    INFO("base " << shape_str(base) << " dim " << dim << " " << dtype_name(dtype)
                                 << " x" << count);
                    Tensor out = kernels::cat(ts, dim);
                    REQUIRE(out.shape() == out_shape);
                    REQUIRE(out.dtype() == dtype);
                    check_close(out, ref_cat(ts, d, out_shape), 0, 0);
                }
            }
        }
    }
}

TEST_CASE("cat promotes dtypes and skips legacy 1-d empty tensors", "[shape_ops][cat]") {
    Tensor a = random_tensor({2, 3}, DType::f16, 1), b = random_tensor({1, 3}, DType::f32, 2);
    Tensor c = random_tensor({2, 3}, DType::i64, 3, -50, 50);
    Tensor out = kernels::cat({a, b, c}, 0);
    REQUIRE(out.dtype() == DType::f32);
    check_close(out, ref_cat({a, b, c}, 0, {5, 3}), 0, 0);
    Tensor u = random_tensor({2, 2}, DType::u8, 4, 0, 200),
           m = random_tensor({2, 1}, DType::boolean, 5);
    REQUIRE(kernels::cat({m, u}, 1).dtype() == DType::u8);
    check_close(kernels::cat({m, u}, 1), ref_cat({m, u}, 1, {2, 3}), 0, 0);
    // A [0] tensor of another rank and dtype is skipped: no shape error, no promotion.
    Tensor legacy = empty({0}, {DType::f64});
    Tensor joined = kernels::cat({legacy, b, legacy, b}, 0);
    REQUIRE(joined.dtype() == DType::f32);
    check_close(joined, ref_cat({b, b}, 0, {2, 3}), 0, 0);
    // All [0]: an empty [0] result.
    REQUIRE(kernels::cat({legacy, legacy}, 0).shape() == Shape{0});
}

TEST_CASE("large cats split across threads on the dense and strided paths", "[shape_ops][cat]") {
    for (int64_t dim : {0, 1, 2}) {
        std::vector<Tensor> ts;
        Shape out_shape = {40, 30, 20};
        out_shape[size_t(dim)] = 0;
        for (int i = 0; i < 3; ++i) {
            Shape s = {40, 30, 20};
            s[size_t(dim)] = 5 + 7 * i;
            out_shape[size_t(dim)] += s[size_t(dim)];
            ts.push_back(random_tensor(s, DType::f32, uint64_t(100 + 10 * dim + i)));
        }
        INFO("dim " << dim);
        check_close(kernels::cat(ts, dim), ref_cat(ts, dim, out_shape), 0, 0);  // dense memcpy rows
        ts[1] = non_contiguous(ts[1]);
        check_close(kernels::cat(ts, dim), ref_cat(ts, dim, out_shape), 0, 0);  // strided copies
        ts[1] = ts[1].to(DType::f64);
        check_close(kernels::cat(ts, dim), ref_cat(ts, dim, out_shape), 0, 0);  // casts to f64
    }
}

TEST_CASE("the CPU cat kernel fills a poisoned output on both paths", "[shape_ops][cat]") {
    for (bool dense : {true, false}) {
        Tensor a = random_tensor({3, 2}, DType::f32, 7), b = random_tensor({3, 4}, DType::f32, 8);
        if (!dense) b = non_contiguous(b);
        Tensor out = full({3, 6}, NAN);
        const kernels::View inputs[] = {kernels::view_of(a), kernels::view_of(b)};
        kernels::cpu::cat(kernels::view_of(out), inputs, 1);
        check_close(out, ref_cat({a, b}, 1, {3, 6}), 0, 0);
    }
}

TEST_CASE("stack matches the reference for every dim", "[shape_ops][stack]") {
    int64_t case_no = 0;
    for (const Shape& shape : {Shape{}, Shape{4}, Shape{2, 3}, Shape{2, 0, 3}, Shape{1, 3, 2}}) {
        const int64_t nd = int64_t(shape.size());
        for (int64_t dim = -nd - 1; dim <= nd; ++dim) {
            for (DType dtype : {DType::f32, DType::i64, DType::f16}) {
                ++case_no;
                std::vector<Tensor> ts;
                for (int i = 0; i < 3; ++i) {
                    Tensor t = random_tensor(shape, dtype, uint64_t(case_no * 10 + i));
                    ts.push_back(i == 1 ? non_contiguous(t) : t);
                }
                const int64_t d = dim < 0 ? dim + nd + 1 : dim;
                INFO("shape " << shape_str(shape) << " dim " << dim << " " << dtype_name(dtype));
                Tensor out = kernels::stack(ts, dim);
                Shape want = shape;
                want.insert(want.begin() + d, 3);
                REQUIRE(out.shape() == want);
                std::vector<double> ref;
                for (int64_t o = 0; o < out.numel(); ++o) {
                    Shape p = unravel(o, want);
                    const int64_t i = p[size_t(d)];
                    p.erase(p.begin() + d);
                    ref.push_back(values(ts[size_t(i)])[size_t(flat(p, shape))]);
                }
                check_close(out, ref, 0, 0);
            }
        }
    }
}

TEST_CASE("split and chunk return views that cat back to the original", "[shape_ops][split]") {
    int64_t case_no = 0;
    for (const Shape& shape : {Shape{7}, Shape{5, 6}, Shape{3, 0, 4}, Shape{2, 1, 9}}) {
        for (int64_t dim = -int64_t(shape.size()); dim < int64_t(shape.size()); ++dim) {
            ++case_no;
            Tensor t = random_tensor(shape, DType::f32, uint64_t(case_no));
            if (case_no % 2) t = non_contiguous(t);
            const int64_t n = t.size(dim);
            INFO("shape " << shape_str(shape) << " dim " << dim);
            for (int64_t size : {1, 2, 3, 4, 10}) {
                std::vector<Tensor> parts = kernels::split(t, size, dim);
                std::vector<int64_t> want;
                for (int64_t at = 0; at < n; at += size) want.push_back(std::min(size, n - at));
                if (n == 0) want = {0};
                CHECK(sizes_along(parts, dim) == want);
                for (const Tensor& p : parts) CHECK(p.storage() == t.storage());
                check_close(kernels::cat(parts, dim), t, 0, 0);
            }
            std::vector<int64_t> sizes = {n / 3, 0, n - n / 3};
            std::vector<Tensor> parts = kernels::split(t, sizes, dim);
            CHECK(sizes_along(parts, dim) == sizes);
            check_close(kernels::cat(parts, dim), t, 0, 0);
            for (int64_t chunks : {1, 2, 3, 5})
                check_close(kernels::cat(kernels::chunk(t, chunks, dim), dim), t, 0, 0);
        }
    }
    // Writing through a split view writes the original.
    Tensor t = zeros({4, 3});
    kernels::split(t, 2, 0)[1].fill_(5.0);
    CHECK(t.at({3, 2}) == 5.0);
    CHECK(t.at({1, 2}) == 0.0);
}

TEST_CASE("chunk sizes follow torch.chunk", "[shape_ops][split]") {
    struct Case {
        int64_t size, chunks;
        std::vector<int64_t> want;
    };
    const Case cases[] = {{10, 3, {4, 4, 2}}, {6, 4, {2, 2, 2}},    {5, 5, {1, 1, 1, 1, 1}},
                          {0, 3, {0, 0, 0}},  {1, 4, {1}},          {7, 1, {7}},
                          {9, 2, {5, 4}},     {12, 5, {3, 3, 3, 3}}};
    for (const Case& c : cases) {
        INFO("size " << c.size << " chunks " << c.chunks);
        Tensor t = random_tensor({2, c.size}, DType::f64, 3);
        CHECK(sizes_along(kernels::chunk(t, c.chunks, 1), 1) == c.want);
        CHECK(sizes_along(kernels::chunk(t.t(), c.chunks, 0), 0) == c.want);
    }
}

TEST_CASE("cat, stack, split and chunk errors name the op and the culprit", "[shape_ops][errors]") {
    Tensor a = random_tensor({2, 3}, DType::f32, 1), b = random_tensor({2, 4}, DType::f32, 2);
    REQUIRE_THROWS_WITH_MSG(kernels::cat({}, 0), "cat: expected a non-empty list of tensors");
    REQUIRE_THROWS_WITH_MSG(kernels::stack({}, 0), "stack: expected a non-empty list of tensors");
    REQUIRE_THROWS_WITH_MSG(kernels::cat({a, a, b}, 0),
                            "cat: tensor 2 has shape [2, 4] but tensor 0 has shape [2, 3]; sizes "
                            "must match except in dim 0");
    REQUIRE_THROWS_WITH_MSG(kernels::cat({a, random_tensor({2, 3, 1}, DType::f32, 3)}, -1),
                            "cat: tensor 1 has shape [2, 3, 1] but tensor 0 has shape [2, 3]");
    REQUIRE_THROWS_WITH_MSG(kernels::cat({full({}, 1.0), full({}, 2.0)}, 0),
                            "cat: tensor 0 is zero-dimensional");
    REQUIRE_THROWS_WITH_MSG(kernels::cat({a, Tensor()}, 0), "cat: tensor 1 is undefined");
    REQUIRE_THROWS_WITH_MSG(kernels::cat({a, b}, 2), "cat: dim 2 out of range");
    REQUIRE_THROWS_WITH_MSG(kernels::stack({a, a, b}, 0),
                            "stack: tensor 2 has shape [2, 4] but tensor 0 has shape [2, 3]; all "
                            "must have the same shape");
    REQUIRE_THROWS_WITH_MSG(kernels::stack({a, a}, 3), "stack: dim 3 out of range");
    REQUIRE_THROWS_WITH_MSG(
        kernels::split(a, std::vector<int64_t>{1, 1}, 1),
        "split: sizes [1, 1] sum to 2 but dim 1 of f32 [2, 3] on cpu has size 3");
    REQUIRE_THROWS_WITH_MSG(kernels::split(a, std::vector<int64_t>{4, -1}, 1),
                            "split: sizes [4, -1] contain a negative size");
    REQUIRE_THROWS_WITH_MSG(kernels::split(a, 0, 1), "split: split_size must be positive, got 0");
    REQUIRE_THROWS_WITH_MSG(kernels::split(full({}, 1.0), 1, 0),
                            "split: cannot split a zero-dimensional tensor");
    REQUIRE_THROWS_WITH_MSG(kernels::split(a, 1, -3), "split: dim -3 out of range");
    REQUIRE_THROWS_WITH_MSG(kernels::chunk(a, 0, 0), "chunk: chunks must be positive, got 0");
}

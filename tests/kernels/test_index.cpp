// Tests for index_select, gather, scatter_add, index_add and embedding against
// naive f64 references over multi-indices: shape tables with size-0 and size-1
// dims, every dim, non-contiguous inputs and indices, several dtypes, threaded
// sizes, determinism of scatter_add, and every error path.
#include "support/support.h"

#include <algorithm>

#include <omp.h>

#include "kernels/cpu/index.h"
#include "kernels/front.h"
#include "kernels/index.h"

using namespace ember;
using namespace ember::test;

namespace {

const DType kDataTypes[] = {DType::f32, DType::f64, DType::f16,
                            DType::i64, DType::u8,  DType::boolean};

// Row-major flat position of multi-index `idx` in `shape`.
int64_t flat(const Shape& idx, const Shape& shape) {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + idx[d];
    return f;
}

// Random indices in [0, hi) (hi > 0), many of them repeated when hi is small.
Tensor random_index(const Shape& shape, int64_t hi, DType dtype, uint64_t seed) {
    Generator g(seed);
    return randint(0, hi, shape, {dtype}, &g);
}

// Alternates contiguous and non-contiguous layouts by case number.
Tensor layout(const Tensor& t, int64_t case_no) { return case_no % 2 ? non_contiguous(t) : t; }

// Reference gather: out[p] = in[p with p[dim] = index[p]], over index's shape.
std::vector<double> ref_gather(const Tensor& input, int64_t dim, const Tensor& index) {
    const std::vector<double> in = values(input), idx = values(index);
    std::vector<double> out;
    for (int64_t o = 0; o < index.numel(); ++o) {
        Shape p = unravel(o, index.shape());
        p[size_t(dim)] = int64_t(idx[size_t(o)]);
        out.push_back(in[size_t(flat(p, input.shape()))]);
    }
    return out;
}

// Reference scatter_add in f64 (sequential adds); u8 wraps, bool is `or`.
std::vector<double> ref_scatter_add(const Tensor& self, int64_t dim, const Tensor& index,
                                    const Tensor& src) {
    std::vector<double> out = values(self);
    const std::vector<double> idx = values(index), s = values(src);
    for (int64_t q = 0; q < index.numel(); ++q) {
        Shape p = unravel(q, index.shape());
        const double v = s[size_t(flat(p, src.shape()))];
        p[size_t(dim)] = int64_t(idx[size_t(q)]);
        double& o = out[size_t(flat(p, self.shape()))];
        o += v;
        if (self.dtype() == DType::u8) o = std::fmod(o, 256.0);
        if (self.dtype() == DType::boolean) o = o != 0;
    }
    return out;
}

// Values whose sums stay exact in every dtype (small integers), so f16 and the
// integer types compare exactly with the f64 reference whatever the add order.
Tensor small_ints(const Shape& shape, DType dtype, uint64_t seed) {
    if (dtype == DType::boolean) return random_tensor(shape, dtype, seed);
    const int64_t lo = dtype == DType::u8 ? 0 : -4;
    return random_tensor(shape, DType::i64, seed, double(lo), 5.0).to(dtype);
}

}  // namespace

TEST_CASE("index_select matches the reference for every dim, dtype and layout", "[index]") {
    const Shape shapes[] = {{5}, {4, 3}, {2, 3, 4}, {3, 1, 5}, {2, 0, 3}, {1, 1, 1}, {3, 2, 2, 3}};
    int64_t case_no = 0;
    for (const Shape& shape : shapes) {
        for (int64_t dim = -int64_t(shape.size()); dim < int64_t(shape.size()); ++dim) {
            for (DType dtype : kDataTypes) {
                for (DType itype : {DType::i64, DType::i32}) {
                    ++case_no;
                    const int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
                    const int64_t size = shape[size_t(d)];
                    const int64_t n = size == 0 ? 0 : 1 + case_no % 7;
                    Tensor input = layout(random_tensor(shape, dtype, uint64_t(case_no)), case_no);
                    Tensor index = size == 0
                                       ? empty({0}, {itype})
                                       : random_index({n}, size, itype, uint64_t(case_no) + 99);
                    index = layout(index, case_no / 2);
                    INFO("shape " << shape_str(shape) << " dim " << dim << " " << dtype_name(dtype)
                                  << " index " << dtype_name(itype) << " n " << n);
                    Tensor out = kernels::index_select(input, dim, index);
                    Shape want = shape;
                    want[size_t(d)] = n;
                    REQUIRE(out.shape() == want);
                    REQUIRE(out.dtype() == dtype);
                    // index_select == gather with the index spread along dim.
                    Shape ishape(shape.size(), 1);
                    ishape[size_t(d)] = n;
                    Tensor spread = index.contiguous().reshape(ishape).expand(want).contiguous();
                    check_close(out, ref_gather(input, d, spread), 0, 0);
                }
            }
        }
    }
}

TEST_CASE("index_select with a 0-d index keeps the dim with size 1", "[index]") {
    Tensor input = random_tensor({4, 3}, DType::f32, 5);
    Tensor out = kernels::index_select(input, 0, from_vector(std::vector<int64_t>{2}, {}));
    REQUIRE(out.shape() == Shape{1, 3});
    check_close(out, input.narrow(0, 2, 1), 0, 0);
}

TEST_CASE("gather matches the reference for every dim, dtype and layout", "[index]") {
    const Shape shapes[] = {{6}, {4, 3}, {2, 3, 4}, {3, 1, 5}, {2, 0, 3}, {1, 1}, {2, 3, 2, 3}};
    int64_t case_no = 0;
    for (const Shape& shape : shapes) {
        for (int64_t dim = -int64_t(shape.size()); dim < int64_t(shape.size()); ++dim) {
            for (DType dtype : kDataTypes) {
                for (DType itype : {DType::i64, DType::i32}) {
                    ++case_no;
                    const int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
                    // index no larger than input off dim, any length (even longer) along dim.
                    Shape ishape = shape;
                    for (size_t j = 0; j < shape.size(); ++j)
                        ishape[j] = int64_t(j) == d
                                        ? (shape[j] == 0 ? 0 : 1 + (case_no + int64_t(j)) % 6)
                                        : shape[j] - (case_no + int64_t(j)) % 2 * (shape[j] > 0);
                    Tensor input = layout(random_tensor(shape, dtype, uint64_t(case_no)), case_no);
                    Tensor index =
                        shape[size_t(d)] == 0
                            ? empty(ishape, {itype})
                            : random_index(ishape, shape[size_t(d)], itype, uint64_t(case_no) + 7);
                    index = layout(index, case_no / 2);
                    INFO("shape " << shape_str(shape) << " index " << shape_str(ishape) << " dim "
                                  << dim << " " << dtype_name(dtype) << " index "
                                  << dtype_name(itype));
                    Tensor out = kernels::gather(input, dim, index);
                    REQUIRE(out.shape() == ishape);
                    REQUIRE(out.dtype() == dtype);
                    check_close(out, ref_gather(input, d, index), 0, 0);
                }
            }
        }
    }
}

TEST_CASE("scatter_add accumulates repeated indices like the reference", "[index][scatter]") {
    const Shape shapes[] = {{5}, {4, 3}, {2, 3, 4}, {3, 1, 5}, {2, 0, 3}, {1, 1}};
    int64_t case_no = 0;
    for (const Shape& shape : shapes) {
        for (int64_t dim = -int64_t(shape.size()); dim < int64_t(shape.size()); ++dim) {
            for (DType dtype : {DType::f32, DType::f64, DType::f16, DType::i64, DType::i32,
                                DType::u8, DType::boolean}) {
                ++case_no;
                const int64_t d = dim < 0 ? dim + int64_t(shape.size()) : dim;
                // index: up to self off dim, longer than self along dim (many
                // duplicates); src: at least as large as index everywhere.
                Shape ishape = shape, sshape = shape;
                for (size_t j = 0; j < shape.size(); ++j) {
                    if (int64_t(j) == d)
                        ishape[j] = shape[j] == 0 ? 0 : 2 * shape[j] + case_no % 3;
                    else
                        ishape[j] = shape[j] - (case_no + int64_t(j)) % 2 * (shape[j] > 0);
                    sshape[j] = ishape[j] + int64_t(j) % 2;
                }
                const bool exact = dtype != DType::f32 && dtype != DType::f64;
                Tensor self = exact ? small_ints(shape, dtype, uint64_t(case_no))
                                    : random_tensor(shape, dtype, uint64_t(case_no));
                Tensor src = exact ? small_ints(sshape, dtype, uint64_t(case_no) + 1)
                                   : random_tensor(sshape, dtype, uint64_t(case_no) + 1);
                Tensor index = shape[size_t(d)] == 0
                                   ? empty(ishape, {DType::i64})
                                   : random_index(ishape, shape[size_t(d)],
                                                  case_no % 2 ? DType::i32 : DType::i64,
                                                  uint64_t(case_no) + 2);
                self = layout(self, case_no);
                src = layout(src, case_no / 2);
                index = layout(index, case_no / 4);
                INFO("self " << shape_str(shape) << " index " << shape_str(ishape) << " src "
                             << shape_str(sshape) << " dim " << dim << " " << dtype_name(dtype));
                const std::vector<double> want = ref_scatter_add(self, d, index, src);
                const std::vector<double> before = values(self);
                Tensor out = kernels::scatter_add(self, dim, index, src);
                REQUIRE(out.shape() == shape);
                check_close(out, want, exact ? 0 : 1e-12 + rtol_for(dtype), exact ? 0 : 1e-5);
                check_close(self, before, 0, 0);  // out of place leaves self alone
                // In place, through self's own (possibly strided) layout.
                Tensor same = kernels::scatter_add_(self, dim, index, src);
                CHECK(same.is_same(self));
                check_close(self, want, exact ? 0 : 1e-12 + rtol_for(dtype), exact ? 0 : 1e-5);
            }
        }
    }
}

TEST_CASE("scatter_add is bit-identical run to run and across thread counts", "[index][scatter]") {
    // 4096 lines of 64 adds into 8 slots: the kernel runs on all threads.
    Tensor self = random_tensor({8, 4096}, DType::f32, 11);
    Tensor index = random_index({64, 4096}, 8, DType::i64, 12);
    Tensor src = random_tensor({64, 4096}, DType::f32, 13, -1e3, 1e3);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(std::max(2, saved));
    const std::vector<float> first = kernels::scatter_add(self, 0, index, src).to_vector<float>();
    const std::vector<float> again = kernels::scatter_add(self, 0, index, src).to_vector<float>();
    CHECK(first == again);
    omp_set_num_threads(1);
    const std::vector<float> one = kernels::scatter_add(self, 0, index, src).to_vector<float>();
    omp_set_num_threads(saved);
    CHECK(first == one);
    // ... and it is the sum, not just a stable wrong answer.
    check_close(from_vector(first, {8, 4096}), ref_scatter_add(self, 0, index, src), 1e-4, 1e-2);
    // Along the last dim, non-contiguous, with i32 indices and 1-d src lines.
    Tensor self2 = non_contiguous(random_tensor({300, 7}, DType::f64, 14));
    Tensor index2 = non_contiguous(random_index({300, 200}, 7, DType::i32, 15));
    Tensor src2 = random_tensor({300, 200}, DType::f64, 16);
    const std::vector<double> a = values(kernels::scatter_add(self2, -1, index2, src2));
    CHECK(a == values(kernels::scatter_add(self2, -1, index2, src2)));
    check_close(kernels::scatter_add(self2, 1, index2, src2),
                ref_scatter_add(self2, 1, index2, src2), 1e-12, 1e-9);
}

TEST_CASE("index_add adds source slices at repeated indices", "[index][scatter]") {
    int64_t case_no = 0;
    for (const Shape& shape : {Shape{6}, Shape{4, 3}, Shape{2, 3, 4}, Shape{3, 1, 2}}) {
        for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
            for (DType itype : {DType::i64, DType::i32}) {
                ++case_no;
                const int64_t n = 2 * shape[size_t(d)] + 1;
                Shape sshape = shape;
                sshape[size_t(d)] = n;
                Tensor self = layout(random_tensor(shape, DType::f64, uint64_t(case_no)), case_no);
                Tensor source =
                    layout(random_tensor(sshape, DType::f64, uint64_t(case_no) + 1), case_no / 2);
                Tensor index = layout(
                    random_index({n}, shape[size_t(d)], itype, uint64_t(case_no) + 2), case_no);
                Shape ishape(shape.size(), 1);
                ishape[size_t(d)] = n;
                Tensor spread = index.contiguous().reshape(ishape).expand(sshape).contiguous();
                INFO("self " << shape_str(shape) << " dim " << d);
                check_close(kernels::index_add(self, d, index, source),
                            ref_scatter_add(self, d, spread, source), 1e-12, 1e-12);
            }
        }
    }
}

TEST_CASE("embedding picks rows for any index shape and layout", "[index][embedding]") {
    int64_t case_no = 0;
    for (const Shape& ishape : {Shape{}, Shape{5}, Shape{3, 4}, Shape{2, 0, 3}, Shape{2, 3, 4}}) {
        for (DType dtype : {DType::f32, DType::f16, DType::f64}) {
            for (DType itype : {DType::i64, DType::i32}) {
                ++case_no;
                const int64_t V = 10, D = 1 + case_no % 6;
                Tensor weight = layout(random_tensor({V, D}, dtype, uint64_t(case_no)), case_no);
                Tensor indices =
                    layout(random_index(ishape, V, itype, uint64_t(case_no) + 3), case_no / 2);
                INFO("indices " << shape_str(ishape) << " " << dtype_name(dtype) << " D " << D);
                Tensor out = kernels::embedding(weight, indices);
                Shape want = ishape;
                want.push_back(D);
                REQUIRE(out.shape() == want);
                const std::vector<double> w = values(weight), idx = values(indices);
                std::vector<double> ref;
                for (double i : idx)
                    for (int64_t j = 0; j < D; ++j) ref.push_back(w[size_t(int64_t(i) * D + j)]);
                check_close(out, ref, 0, 0);
            }
        }
    }
}

TEST_CASE("large gathers split across threads match the reference", "[index]") {
    Tensor table = random_tensor({50000, 3}, DType::f32, 21);
    Tensor rows = random_index({40000}, 50000, DType::i64, 22);
    check_close(kernels::index_select(table, 0, rows), kernels::embedding(table, rows), 0, 0);
    Tensor picked = kernels::index_select(table, 0, rows);
    const std::vector<double> t = values(table), r = values(rows), p = values(picked);
    int64_t bad = 0;
    for (size_t i = 0; i < r.size(); ++i)
        for (size_t j = 0; j < 3; ++j) bad += p[i * 3 + j] != t[size_t(r[i]) * 3 + j];
    CHECK(bad == 0);
    Tensor input = non_contiguous(random_tensor({300, 200}, DType::f64, 23));
    Tensor index = non_contiguous(random_index({300, 250}, 200, DType::i32, 24));
    check_close(kernels::gather(input, 1, index), ref_gather(input, 1, index), 0, 0);
}

TEST_CASE("the CPU gather kernel writes every element of a poisoned output", "[index]") {
    Tensor input = random_tensor({6, 5}, DType::f32, 31);
    Tensor index = random_index({4, 5}, 6, DType::i64, 32);
    Tensor out = full({4, 5}, NAN);
    kernels::View in = kernels::view_of(input), ix = kernels::view_of(index),
                  o = kernels::view_of(out);
    in.shape[0] = 4;    // input seen through out's shape,
    in.strides[0] = 0;  // the index steps along dim 0
    CHECK_FALSE(kernels::cpu::gather(o, in, ix, input.stride(0), 6).has_value());
    check_close(out, ref_gather(input, 0, index), 0, 0);
    Tensor sixes = from_vector(std::vector<int64_t>(20, 6), {4, 5});  // one past the end
    ix.data = static_cast<char*>(sixes.data_ptr());
    CHECK(kernels::cpu::gather(o, in, ix, input.stride(0), 6) == std::optional<int64_t>(6));
}

TEST_CASE("the CPU scatter_add kernel skips and reports out-of-range indices", "[index][scatter]") {
    // Called directly (no front validation): index 4 of a size-4 dim must not be written.
    Tensor self = zeros({5, 2}, {DType::f64});
    Tensor inner = self.narrow(0, 0, 4);  // row 4 sits right past the view
    Tensor index = from_vector(std::vector<int64_t>{0, 4, 3, 1}, {2, 2});
    Tensor src = ones({2, 2}, {DType::f64});
    CHECK(kernels::cpu::scatter_add(kernels::view_of(inner), kernels::view_of(index),
                                    kernels::view_of(src), 0) == std::optional<int64_t>(4));
    check_close(self, std::vector<double>{1, 0, 0, 1, 0, 0, 1, 0, 0, 0}, 0, 0);
}

TEST_CASE("out-of-range indices are errors naming the op, the value and the size",
          "[index][errors]") {
    Tensor x = random_tensor({5, 3}, DType::f32, 41);
    auto idx = [](std::vector<int64_t> v) { return from_vector(v); };
    REQUIRE_THROWS_WITH_MSG(kernels::index_select(x, 0, idx({1, 7, 2})),
                            "index_select: index 7 is out of range for dim 0 of size 5");
    REQUIRE_THROWS_WITH_MSG(kernels::index_select(x, 1, idx({-1})),
                            "index -1 is out of range for dim 1 of size 3");
    REQUIRE_THROWS_WITH_MSG(kernels::index_select(x, 0, idx({0, 9}).to(DType::i32)), "index 9");
    REQUIRE_THROWS_WITH_MSG(kernels::index_select(empty({0, 3}), 0, idx({0})),
                            "index 0 is out of range for dim 0 of size 0");
    // Checked even when the output is empty.
    REQUIRE_THROWS_WITH_MSG(kernels::index_select(empty({5, 0}), 0, idx({5})), "index 5");
    REQUIRE_THROWS_WITH_MSG(kernels::gather(x, 1, from_vector(std::vector<int64_t>{0, 3}, {1, 2})),
                            "gather: index 3 is out of range for dim 1 of size 3");
    REQUIRE_THROWS_WITH_MSG(kernels::gather(x, 0, from_vector(std::vector<int64_t>{-2}, {1, 1})),
                            "index -2");
    REQUIRE_THROWS_WITH_MSG(kernels::embedding(random_tensor({10, 4}, DType::f32, 1),
                                               from_vector(std::vector<int64_t>{3, 10}, {1, 2})),
                            "embedding: index 10 is out of range for dim 0 of size 10");
    REQUIRE_THROWS_WITH_MSG(kernels::embedding(x, idx({int64_t(1) << 40})), "index 1099511627776");
    // scatter_add checks before writing: self is unchanged.
    Tensor self = random_tensor({4, 3}, DType::f64, 42);
    const std::vector<double> before = values(self);
    Tensor bad = from_vector(std::vector<int64_t>{0, 1, 2, 3, 4, 1}, {2, 3});
    REQUIRE_THROWS_WITH_MSG(
        kernels::scatter_add_(self, 0, bad, random_tensor({2, 3}, DType::f64, 43)),
        "scatter_add: index 4 is out of range for dim 0 of size 4");
    check_close(self, before, 0, 0);
    REQUIRE_THROWS_WITH_MSG(
        kernels::index_add_(self, 1, idx({0, -3}), random_tensor({4, 2}, DType::f64, 44)),
        "index_add: index -3 is out of range for dim 1 of size 3");
    check_close(self, before, 0, 0);
    // In a threaded gather the first bad index in order is reported, every time.
    std::vector<int64_t> many(100000, 1);
    many[40000] = 1000001;
    many[90000] = 1000002;
    for (int rep = 0; rep < 3; ++rep)
        REQUIRE_THROWS_WITH_MSG(kernels::index_select(x, 0, idx(many)), "index 1000001 is out");
}

TEST_CASE("bad index dtypes, shapes and layouts are errors naming them", "[index][errors]") {
    Tensor x = random_tensor({5, 3}, DType::f32, 51);
    Tensor fidx = from_vector(std::vector<float>{0, 1});
    REQUIRE_THROWS_WITH_MSG(kernels::index_select(x, 0, fidx),
                            "index_select: index must be i64 or i32, got f32 [2]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::gather(x, 0, random_index({2, 3}, 5, DType::i64, 1).to(DType::u8)),
        "gather: index must be i64 or i32, got u8");
    REQUIRE_THROWS_WITH_MSG(kernels::embedding(x, fidx.to(DType::f16)),
                            "embedding: index must be i64 or i32, got f16");
    REQUIRE_THROWS_WITH_MSG(kernels::scatter_add(x, 0, random_tensor({2, 3}, DType::boolean, 1), x),
                            "scatter_add: index must be i64 or i32, got bool");
    Tensor i2 = random_index({2, 2}, 3, DType::i64, 2);
    REQUIRE_THROWS_WITH_MSG(kernels::index_select(x, 0, i2),
                            "index_select: index must be 1-d, got i64 [2, 2]");
    REQUIRE_THROWS_WITH_MSG(kernels::gather(x, 0, random_index({2}, 3, DType::i64, 3)),
                            "gather: index must have as many dims as input");
    REQUIRE_THROWS_WITH_MSG(
        kernels::gather(x, 0, random_index({2, 4}, 3, DType::i64, 3)),
        "gather: index i64 [2, 4] on cpu is larger than input f32 [5, 3] on cpu in dim 1");
    REQUIRE_THROWS_WITH_MSG(kernels::gather(x, 2, i2), "gather: dim 2 out of range");
    REQUIRE_THROWS_WITH_MSG(kernels::scatter_add(x, 0, i2, random_tensor({2, 2}, DType::f64, 4)),
                            "scatter_add: src must have self's dtype, got src f64 [2, 2]");
    REQUIRE_THROWS_WITH_MSG(kernels::scatter_add(x, 0, random_index({2, 3}, 3, DType::i64, 5),
                                                 random_tensor({2, 2}, DType::f32, 4)),
                            "is larger than src f32 [2, 2] on cpu in dim 1");
    REQUIRE_THROWS_WITH_MSG(kernels::scatter_add(x, 1, random_index({6, 3}, 3, DType::i64, 5),
                                                 random_tensor({6, 3}, DType::f32, 4)),
                            "is larger than self f32 [5, 3] on cpu in dim 0");
    REQUIRE_THROWS_WITH_MSG(kernels::scatter_add(x, 0, i2.reshape({4}), x),
                            "self, index and src must have the same number of dims");
    REQUIRE_THROWS_WITH_MSG(kernels::scatter_add_(zeros({1, 3}).expand({4, 3}), 0, i2, x),
                            "scatter_add: self f32 [4, 3] on cpu has stride 0 in dim 0");
    REQUIRE_THROWS_WITH_MSG(kernels::index_add(x, 0, from_vector(std::vector<int64_t>{0, 1}),
                                               random_tensor({3, 3}, DType::f32, 6)),
                            "index_add: source must have self's shape except in dim 0, where it "
                            "needs the index's length 2");
    REQUIRE_THROWS_WITH_MSG(kernels::embedding(random_tensor({10}, DType::f32, 7),
                                               from_vector(std::vector<int64_t>{1})),
                            "embedding: weight must be 2-d [V, D], got f32 [10]");
    REQUIRE_THROWS_WITH_MSG(
        kernels::index_select(full({}, 1.0), 0, from_vector(std::vector<int64_t>{0})),
        "index_select: input must have at least one dim");
}

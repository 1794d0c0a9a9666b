// Views share storage and index like the naive row-major reference; every bad
// view is an ember::Error naming the op and the shapes.
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {
// A tensor whose element at flat index i holds i (f64), so a view's values tell where they came
// from.
Tensor iota(const Shape& s) {
    return arange(0, double(shape_numel(s)), 1, {DType::f64}).reshape(s);
}
}  // namespace

TEST_CASE("permute and transpose index like the reference", "[views]") {
    Tensor x = iota({2, 3, 4});
    Tensor p = x.permute({2, 0, 1});
    REQUIRE(p.shape() == Shape{4, 2, 3});
    CHECK_FALSE(p.is_contiguous());
    for (int64_t a = 0; a < 4; ++a)
        for (int64_t b = 0; b < 2; ++b)
            for (int64_t c = 0; c < 3; ++c) CHECK(p.at({a, b, c}) == double(b * 12 + c * 4 + a));
    Tensor t = x.transpose(0, 2);
    CHECK(t.at({3, 1, 0}) == x.at({0, 1, 3}));
    CHECK(t.storage() == x.storage());
    CHECK(p.contiguous().is_contiguous());
    check_close(p.contiguous(), p);
    REQUIRE_THROWS_WITH_MSG(x.permute({0, 1}), "permute: got 2 dims");
    REQUIRE_THROWS_WITH_MSG(x.permute({0, 1, 1}), "repeat");
    REQUIRE_THROWS_WITH_MSG(x.transpose(0, 3), "dim 3 out of range");
}

TEST_CASE("view, reshape and flatten", "[views]") {
    Tensor x = iota({2, 3, 4});
    Tensor v = x.view({6, -1});
    REQUIRE(v.shape() == Shape{6, 4});
    CHECK(v.storage() == x.storage());
    CHECK(v.at({5, 3}) == 23.0);
    // A transposed tensor cannot be viewed flat, but reshape copies.
    Tensor t = x.transpose(1, 2);
    REQUIRE_THROWS_WITH_MSG(t.view({-1}), "view: cannot view");
    Tensor r = t.reshape({-1});
    CHECK(r.storage() != x.storage());
    for (int64_t i = 0; i < 24; ++i) {
        const Shape idx = unravel(i, t.shape());
        CHECK(r.at({i}) == t.at(idx));
    }
    // Splitting a dim of a non-contiguous tensor is still a view.
    Tensor s = t.view({2, 2, 2, 3});
    CHECK(s.storage() == x.storage());
    CHECK(s.at({1, 1, 0, 2}) == t.at({1, 2, 2}));
    CHECK(x.flatten(1).shape() == Shape{2, 12});
    CHECK(x.flatten().shape() == Shape{24});
    REQUIRE_THROWS_WITH_MSG(x.view({5, -1}),
                            "shape [5, -1] is invalid for input of shape [2, 3, 4]");
    REQUIRE_THROWS_WITH_MSG(x.view({-1, -1}), "only one dimension can be -1");
    REQUIRE_THROWS_WITH_MSG(x.reshape({7}), "invalid for input");
}

TEST_CASE("slice, narrow and select", "[views]") {
    Tensor x = iota({5, 6});
    Tensor s = x.slice(1, 1, 6, 2);  // columns 1, 3, 5
    REQUIRE(s.shape() == Shape{5, 3});
    for (int64_t i = 0; i < 5; ++i)
        for (int64_t j = 0; j < 3; ++j) CHECK(s.at({i, j}) == double(i * 6 + 1 + 2 * j));
    CHECK(x.slice(0, -2, 100).shape() == Shape{2, 6});  // Python-style clamping
    CHECK(x.slice(0, 4, 2).shape() == Shape{0, 6});
    CHECK(x.narrow(0, 1, 3).at({0, 0}) == 6.0);
    REQUIRE_THROWS_WITH_MSG(x.narrow(0, 3, 3), "narrow: start 3 and length 3 out of bounds");
    REQUIRE_THROWS_WITH_MSG(x.narrow(0, 1, INT64_MAX), "out of bounds");
    CHECK(arange(10).slice(0, 0, 10, INT64_MAX).shape() == Shape{1});
    REQUIRE_THROWS_WITH_MSG(x.slice(0, 0, 5, 0), "slice: step must be positive");
    Tensor row = x.select(0, -1);
    REQUIRE(row.shape() == Shape{6});
    CHECK(row.at({2}) == 26.0);
    CHECK(x.select(1, 2).at({4}) == 26.0);
    REQUIRE_THROWS_WITH_MSG(x.select(0, 5), "select: index 5 out of range");
    // Writes through a view land in the base tensor.
    s.fill_(-1.0);
    CHECK(x.at({2, 3}) == -1.0);
    CHECK(x.at({2, 2}) == 14.0);
}

TEST_CASE("expand, squeeze, unsqueeze", "[views]") {
    Tensor x = iota({3, 1});
    Tensor e = x.expand({2, 3, 4});
    REQUIRE(e.shape() == Shape{2, 3, 4});
    CHECK(e.strides() == Shape{0, 1, 0});
    CHECK(e.at({1, 2, 3}) == 2.0);
    CHECK(x.expand({-1, 5}).shape() == Shape{3, 5});
    REQUIRE_THROWS_WITH_MSG(x.expand({4, 4}), "expand: shape [3, 1] cannot expand to [4, 4]");
    REQUIRE_THROWS_WITH_MSG(x.expand({4}), "has fewer dims");
    Tensor u = x.unsqueeze(0);
    CHECK(u.shape() == Shape{1, 3, 1});
    CHECK(x.unsqueeze(-1).shape() == Shape{3, 1, 1});
    CHECK(u.squeeze().shape() == Shape{3});
    CHECK(u.squeeze(0).shape() == Shape{3, 1});
    CHECK(u.squeeze(1).shape() == Shape{1, 3, 1});  // size 3: unchanged
    REQUIRE_THROWS_WITH_MSG(x.unsqueeze(3), "unsqueeze: dim 3 out of range");
    // Expanded views materialize correctly.
    check_close(e.contiguous(), e);
}

TEST_CASE("as_strided is bounds-checked against the storage", "[views]") {
    Tensor x = iota({10});
    Tensor w = x.as_strided({4, 3}, {2, 1}, 1);  // overlapping windows
    CHECK(w.at({3, 2}) == 9.0);
    REQUIRE_THROWS_WITH_MSG(x.as_strided({4, 3}, {3, 1}, 1), "as_strided");
    REQUIRE_THROWS_WITH_MSG(x.as_strided({2}, {1}, -1), "negative offset");
}

TEST_CASE("size-0 and 0-d tensors", "[views]") {
    Tensor z = zeros({0, 3});
    CHECK(z.numel() == 0);
    CHECK(z.reshape({3, 0}).shape() == Shape{3, 0});
    CHECK(z.t().contiguous().shape() == Shape{3, 0});
    Tensor s = full({}, 2.5);
    CHECK(s.dim() == 0);
    CHECK(s.item() == 2.5);
    CHECK(s.reshape({1, 1}).item() == 2.5);
    CHECK(s.unsqueeze(0).shape() == Shape{1});
    REQUIRE_THROWS_WITH_MSG(zeros({2}).item(), "item: expected a tensor with one element");
}

TEST_CASE("views reject sizes and strides that overflow int64", "[views][errors]") {
    Tensor x = zeros({4});
    REQUIRE_THROWS_WITH_MSG(x.as_strided({4}, {int64_t(3074457345618258603)}, 0), "overflows");
    REQUIRE_THROWS_WITH_MSG(arange(6).view({65535, 281479271743489, -1}), "too many elements");
    REQUIRE_THROWS_WITH_MSG(ones({1, 1}).expand({-2, -3}), "cannot expand");
    REQUIRE_THROWS_WITH_MSG(ones({1, 1}).expand({int64_t(1) << 32, int64_t(1) << 32}), "too many");
    REQUIRE_THROWS_WITH_MSG(full({}, 3.0).size(0), "size: a 0-d tensor has no dims");
    std::vector<float> host(4);
    REQUIRE_THROWS_WITH_MSG(from_blob(host.data(), {4, 3}, {int64_t(1) << 62, 1}), "overflows");
}

TEST_CASE("set() converts out-of-range values by the documented rules", "[tensor]") {
    Tensor t = zeros({3}, {.dtype = DType::i32});
    t.set({0}, 1e300);
    t.set({1}, -1e300);
    t.set({2}, NAN);
    CHECK(values(t) == std::vector<double>{2147483647.0, -2147483648.0, 0.0});
}

TEST_CASE("empty tensors may have huge other dims", "[views]") {
    for (const Shape& s : {Shape{0, int64_t(1) << 40, int64_t(1) << 40},
                           Shape{int64_t(1) << 40, int64_t(1) << 40, 0}}) {
        Tensor z = empty(s);
        CHECK(z.numel() == 0);
        CHECK(z.is_contiguous());
        CHECK(z.transpose(0, 2).contiguous().numel() == 0);
        CHECK(z.reshape({0}).numel() == 0);
    }
}

// Found by fuzzing (tests/fuzz/regressions/tensor_args): each was signed
// overflow, which the UBSan builds report and the others silently wrap.
TEST_CASE("layouts that reach past int64 in bytes or offsets are errors", "[views][errors]") {
    std::vector<float> host(4);
    // Elements that fit, bytes that do not.
    REQUIRE_THROWS_WITH_MSG(from_blob(host.data(), {int64_t(1) << 62}, {1}),
                            "more bytes than int64 can count");
    REQUIRE_THROWS_WITH_MSG(from_blob(host.data(), {2}, {-1}), "from_blob: negative stride");
    REQUIRE_THROWS_WITH_MSG(from_blob(host.data(), {-2}, {1}), "from_blob: negative size");
    // An empty view's offset may end the storage, not lie past it.
    Tensor x = zeros({10});
    CHECK(x.as_strided({0, 3}, {1, 1}, 10).numel() == 0);
    REQUIRE_THROWS_WITH_MSG(x.as_strided({1, 12, 4, 0}, {3, 4, 4, 1}, int64_t(1) << 62),
                            "as_strided: offset 4611686018427387904 of an empty view is past the "
                            "10 elements of the storage");
    REQUIRE_THROWS_WITH_MSG(x.as_strided({0}, {-1}, 0), "as_strided: negative stride");
}

TEST_CASE("an empty slice keeps its offset", "[views]") {
    // A size-1 dim may have any stride; slicing past its one element must not
    // step the offset by it.
    Tensor x = zeros({8});
    Tensor v = x.as_strided({2, 1}, {1, int64_t(1) << 62}, 3);
    const Tensor e = v.slice(1, 1, 1);
    CHECK(e.shape() == Shape{2, 0});
    CHECK(e.offset() == 3);
    CHECK(v.narrow(1, 1, 0).offset() == 3);
    CHECK(e.contiguous().numel() == 0);
}

TEST_CASE("views of empty tensors with huge dims do no arithmetic on their strides", "[views]") {
    const int64_t big = int64_t(1) << 47;
    Tensor z = empty({big, big, 0});  // contiguous_strides resets on overflow
    CHECK(z.slice(0, big - 1, big).offset() == z.offset());
    CHECK(z.select(1, big - 1).offset() == z.offset());
    CHECK(z.narrow(0, big - 2, 2).shape() == Shape{2, big, 0});
    CHECK(z.unsqueeze(0).shape() == Shape{1, big, big, 0});
    CHECK(z.flatten(1, 2).shape() == Shape{big, 0});
    REQUIRE_THROWS_WITH_MSG(z.flatten(0, 1),
                            "flatten: dims 0 to 1 of shape [140737488355328, 140737488355328, 0] "
                            "hold more elements than int64 counts");
}

TEST_CASE("channels-last memory format", "[tensor][format]") {
    const Tensor x = arange(0, 2 * 3 * 4 * 5).view({2, 3, 4, 5});
    CHECK(x.is_contiguous(MemoryFormat::contiguous));
    CHECK_FALSE(x.is_contiguous(MemoryFormat::channels_last));
    CHECK(x.suggest_memory_format() == MemoryFormat::contiguous);

    const Tensor cl = x.contiguous(MemoryFormat::channels_last);
    CHECK(cl.strides() == Shape{60, 1, 15, 3});
    CHECK(cl.strides() == format_strides(x.shape(), MemoryFormat::channels_last));
    CHECK(cl.is_contiguous(MemoryFormat::channels_last));
    CHECK_FALSE(cl.is_contiguous());
    CHECK(cl.suggest_memory_format() == MemoryFormat::channels_last);
    CHECK(cl.to_vector<float>() == x.to_vector<float>());           // same values, other layout
    CHECK(cl.contiguous(MemoryFormat::channels_last).is_same(cl));  // already so: no copy
    CHECK(cl.contiguous().to_vector<float>() == x.to_vector<float>());
    // The same layout reached by views: NHWC data seen as NCHW.
    const Tensor nhwc = x.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
    CHECK(nhwc.is_contiguous(MemoryFormat::channels_last));

    // One channel (or one pixel) is both layouts: the strides as they are decide.
    const Tensor one = zeros({2, 1, 4, 5});
    CHECK(one.is_contiguous(MemoryFormat::channels_last));
    CHECK(one.suggest_memory_format() == MemoryFormat::contiguous);
    const Tensor one_last = one.contiguous(MemoryFormat::channels_last);
    CHECK(one_last.strides() == Shape{20, 1, 5, 1});
    CHECK(one_last.is_contiguous());
    CHECK(one_last.suggest_memory_format() == MemoryFormat::channels_last);
    CHECK(one_last.contiguous(MemoryFormat::channels_last).is_same(one_last));
    CHECK(one_last.contiguous().is_same(one_last));  // row-major as well: no copy

    const Tensor e = empty({2, 3, 4, 5}, {}, MemoryFormat::channels_last);
    CHECK(e.is_contiguous(MemoryFormat::channels_last));
    CHECK(empty({0, 3, 4, 5}, {}, MemoryFormat::channels_last)
              .is_contiguous(MemoryFormat::channels_last));

    // Only 4-d tensors have a channels-last layout.
    CHECK_FALSE(zeros({3, 4, 5}).is_contiguous(MemoryFormat::channels_last));
    REQUIRE_THROWS_WITH_MSG(zeros({3, 4, 5}).contiguous(MemoryFormat::channels_last), "4-d");
    REQUIRE_THROWS_WITH_MSG(empty({3, 4}, {}, MemoryFormat::channels_last), "4-d");
    CHECK(std::string(memory_format_name(MemoryFormat::channels_last)) == "channels_last");
}

TEST_CASE("contiguous(format) passes gradients through", "[tensor][format][autograd]") {
    const Tensor x = randn({2, 3, 2, 2}).set_requires_grad();
    const Tensor w = randn({2, 3, 2, 2});
    sum(mul(x.contiguous(MemoryFormat::channels_last), w)).backward();
    CHECK(x.grad().to_vector<float>() == w.to_vector<float>());
}

// The op profiler (kernels/profile.h): one row per op and signature with its
// calls and the FLOPs its front counted, nothing recorded without an
// installed profiler or after it is gone, nested profilers restoring the
// outer one, and an op's kernel that fails still leaving the profiler usable.
#include "kernels/profile.h"

#include "support.h"

using namespace ember;
using namespace ember::test;
using ember::kernels::OpProfiler;
using ember::kernels::OpTime;

namespace {

const OpTime* find_row(const std::vector<OpTime>& rows, const std::string& name,
                       const std::string& signature) {
    for (const OpTime& r : rows)
        if (r.name == name && r.signature == signature) return &r;
    return nullptr;
}

}  // namespace

TEST_CASE("the op profiler counts calls and FLOPs per op and signature", "[profile]") {
    const Tensor a = random_tensor({8, 5}, DType::f32, 1), b = random_tensor({5, 3}, DType::f32, 2);
    const Tensor c = random_tensor({4}, DType::f32, 3);
    REQUIRE(OpProfiler::active() == nullptr);
    OpProfiler prof;
    REQUIRE(OpProfiler::active() == &prof);
    for (int i = 0; i < 3; ++i) (void)kernels::matmul(a, b);
    (void)kernels::unary(kernels::UnaryOp::relu, c);
    (void)kernels::unary(kernels::UnaryOp::relu, a);

    const std::vector<OpTime> rows = prof.rows();
    REQUIRE(rows.size() == 3);
    const OpTime* mm = find_row(rows, "matmul", "f32 [8, 3], f32 [8, 5], f32 [5, 3]");
    REQUIRE(mm != nullptr);
    CHECK(mm->calls == 3);
    CHECK(mm->flops == 3 * 2.0 * 8 * 3 * 5);
    const OpTime* r4 = find_row(rows, "relu", "f32 [4], f32 [4]");
    const OpTime* r85 = find_row(rows, "relu", "f32 [8, 5], f32 [8, 5]");
    REQUIRE((r4 != nullptr && r85 != nullptr));
    CHECK((r4->calls == 1 && r85->calls == 1 && r4->flops == 0));
    double total = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
        CHECK(rows[i].seconds >= 0);
        if (i > 0) CHECK(rows[i - 1].seconds >= rows[i].seconds);  // slowest first
        total += rows[i].seconds;
    }
    CHECK(prof.total_seconds() == total);
    prof.clear();
    CHECK(prof.rows().empty());
}

TEST_CASE("the op profiler records only while installed; nesting restores", "[profile]") {
    const Tensor x = random_tensor({6}, DType::f32, 4);
    (void)kernels::unary(kernels::UnaryOp::relu, x);  // none installed: nothing to record into
    OpProfiler outer;
    {
        OpProfiler inner;
        REQUIRE(OpProfiler::active() == &inner);
        (void)kernels::unary(kernels::UnaryOp::relu, x);
        CHECK(inner.rows().size() == 1);
    }
    REQUIRE(OpProfiler::active() == &outer);
    CHECK(outer.rows().empty());  // the inner one took that call
    (void)kernels::unary(kernels::UnaryOp::exp, x);
    REQUIRE(outer.rows().size() == 1);
    CHECK(outer.rows()[0].name == "exp");
}

TEST_CASE("an op that throws under the profiler leaves it usable", "[profile]") {
    OpProfiler prof;
    const Tensor idx = from_blob(std::vector<int64_t>{0, 7}.data(), {2},
                                 TensorOptions{.dtype = DType::i64})
                           .clone();
    const Tensor src = random_tensor({3}, DType::f32, 5);
    REQUIRE_THROWS(kernels::index_select(src, 0, idx));  // index 7 is out of range
    (void)kernels::unary(kernels::UnaryOp::relu, src);
    const std::vector<OpTime> rows = prof.rows();
    REQUIRE(find_row(rows, "relu", "f32 [3], f32 [3]") != nullptr);
}

// DType sizes, names and the promotion table.
#include "support/support.h"

using namespace ember;

TEST_CASE("dtype sizes and names round-trip", "[dtype]") {
    const DType all[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                         DType::i32, DType::i64, DType::u8,  DType::boolean};
    const int64_t sizes[] = {4, 8, 2, 2, 4, 8, 1, 1};
    for (int i = 0; i < kNumDTypes; ++i) {
        CHECK(dtype_size(all[i]) == sizes[i]);
        CHECK(dtype_from_name(dtype_name(all[i])) == all[i]);
    }
    REQUIRE_THROWS_WITH_MSG(dtype_from_name("float8"), "unknown dtype 'float8'");
}

TEST_CASE("type promotion follows PyTorch's categories", "[dtype]") {
    using D = DType;
    CHECK(promote_types(D::f32, D::f32) == D::f32);
    CHECK(promote_types(D::f32, D::f64) == D::f64);
    CHECK(promote_types(D::f16, D::bf16) == D::f32);
    CHECK(promote_types(D::bf16, D::f16) == D::f32);
    CHECK(promote_types(D::f16, D::f32) == D::f32);
    CHECK(promote_types(D::i64, D::f16) == D::f16);
    CHECK(promote_types(D::i32, D::i64) == D::i64);
    CHECK(promote_types(D::u8, D::i32) == D::i32);
    CHECK(promote_types(D::boolean, D::u8) == D::u8);
    CHECK(promote_types(D::boolean, D::f32) == D::f32);
    CHECK(promote_with_scalar(D::i32, true) == D::f32);
    CHECK(promote_with_scalar(D::i32, false) == D::i32);
    CHECK(promote_with_scalar(D::f16, true) == D::f16);
    CHECK(promote_with_scalar(D::boolean, false) == D::i64);
    // Symmetric for every pair.
    for (int a = 0; a < kNumDTypes; ++a)
        for (int b = 0; b < kNumDTypes; ++b)
            CHECK(promote_types(D(a), D(b)) == promote_types(D(b), D(a)));
}

TEST_CASE("devices parse and print", "[device]") {
    CHECK(Device::parse("cpu") == Device::cpu());
    CHECK(Device::parse("cuda") == Device::cuda(0));
    CHECK(Device::parse("cuda:3") == Device::cuda(3));
    CHECK(Device::cuda(2).str() == "cuda:2");
    REQUIRE_THROWS_WITH_MSG(Device::parse("gpu"), "invalid device 'gpu'");
    REQUIRE_THROWS_WITH_MSG(Device::parse("cuda:x"), "invalid device");
    REQUIRE_THROWS_WITH_MSG(Device::parse("cuda:"), "invalid device");
}

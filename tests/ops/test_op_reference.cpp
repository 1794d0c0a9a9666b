// The op table's reference test: every entry in every signature, case and
// layout against its f64 reference (rounded to the result dtype) with the
// entry's tolerance: the result's dtype, shape and values, or the error the
// reference expects. The differentiable op's forward (contiguous inputs: the
// layout is the front's business) must agree as well. `test_ops -c <name>`
// runs one entry.
#include <cstdint>

#include "ops/op_table.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

void check_entry(const OpEntry& e) {
    uint64_t seed = 0;
    for (const Signature& sig : e.dtypes) {
        Expected want;
        std::vector<std::vector<double>> expected;  // per output, rounded to its dtype
        size_t last_case = SIZE_MAX;
        for (const Sample& s : samples(e, sig, seed += 1000)) {
            INFO(e.name << "(" << s.label << ")");
            if (s.case_index != last_case) {  // the layouts of a case hold the same values
                want = e.reference(s);
                expected.clear();
                for (const ExpectedOutput& o : want.outputs) expected.push_back(rounded(o));
                last_case = s.case_index;
            }
            if (!want.error.empty()) {
                REQUIRE_THROWS_WITH_MSG(e.raw(s.inputs, s.args), want.error);
                continue;
            }
            const Outputs out = e.raw(s.inputs, s.args);
            REQUIRE(out.size() == want.outputs.size());
            for (size_t i = 0; i < out.size(); ++i) {
                INFO("output " << i);
                const ExpectedOutput& w = want.outputs[i];
                const Tolerance tol = e.tolerance(w.dtype, s);
                REQUIRE(out[i].dtype() == w.dtype);
                REQUIRE(out[i].shape() == w.shape);
                // Fronts return new tensors, contiguous or channels-last (which
                // one, where it matters, the entry's raw checks: batch norm's).
                REQUIRE(
                    (out[i].is_contiguous() || out[i].is_contiguous(MemoryFormat::channels_last)));
                check_close(out[i], expected[i], tol.rtol, tol.atol);
            }
            if (!e.differentiable || s.layout != Layout::contiguous) continue;
            INFO("through autograd: " << e.name);
            const ExpectedOutput& w = want.outputs[0];
            const Tolerance tol = e.tolerance(w.dtype, s);
            const Tensor ad = e.differentiable(s.inputs, s.args);
            REQUIRE(ad.dtype() == w.dtype);
            REQUIRE(ad.shape() == w.shape);
            check_close(ad, expected[0], tol.rtol, tol.atol);
        }
    }
}

void check_families(std::initializer_list<Family> families) {
    for (Family f : families)
        for (const OpEntry* e : entries(f)) DYNAMIC_SECTION(e->name) {
                check_entry(*e);
            }
}

}  // namespace

TEST_CASE("op table: elementwise ops match their f64 references", "[ops][elementwise]") {
    check_families({Family::unary, Family::binary, Family::compare, Family::where, Family::clamp,
                    Family::activation_backward});
}

TEST_CASE("op table: reductions match their f64 references", "[ops][reduce]") {
    check_families({Family::reduce});
}

TEST_CASE("op table: softmax and its backward match their f64 references", "[ops][softmax]") {
    check_families({Family::softmax});
}

TEST_CASE("op table: normalizations match their f64 references", "[ops][norm]") {
    check_families({Family::norm});
}

TEST_CASE("op table: convolutions match their f64 references", "[ops][conv]") {
    check_families({Family::conv});
}

TEST_CASE("op table: pooling matches its f64 references", "[ops][pool]") {
    check_families({Family::pool});
}

TEST_CASE("op table: products match their f64 references", "[ops][matmul]") {
    check_families({Family::matmul});
}

TEST_CASE("op table: losses match their f64 references", "[ops][loss]") {
    check_families({Family::loss});
}

TEST_CASE("op table: index ops match their f64 references", "[ops][index]") {
    check_families({Family::index});
}

TEST_CASE("op table: every entry is complete", "[ops]") {
    for (const OpEntry& e : op_table()) {
        INFO(e.name << " (" << family_name(e.family) << ")");
        CHECK(e.raw);
        CHECK(e.reference);
        CHECK(e.tolerance);
        // Convolutions and products are timed against the GEMM peak by
        // bench/conv.cpp and bench/matmul.cpp, and an in-place form
        // (scatter_add_, index_add_) runs its out-of-place twin's kernel;
        // every other entry has its rows.
        const bool in_place = e.name.ends_with('_');
        CHECK((e.bench_cases || e.family == Family::conv || e.family == Family::matmul || in_place));
        if (e.bench_cases) CHECK_FALSE(e.bench_cases(true).empty());
        CHECK_FALSE(e.dtypes.empty());
        CHECK((e.generate || !e.domains.empty()));
        CHECK_FALSE(e.cases.empty());
        CHECK_FALSE(e.layouts.empty());
        for (const Signature& sig : e.dtypes)
            for (const Case& c : e.cases) CHECK(c.shapes.size() <= sig.size());
        CHECK(bool(e.differentiable) == !e.grad_cases.empty());
        CHECK(e.cuda == !e.cuda_cases.empty());
        CHECK(e.cuda_exact <= e.cuda);
    }
    // The names are unique: `test_ops -c <name>` picks one entry.
    for (size_t i = 0; i < op_table().size(); ++i)
        for (size_t j = 0; j < i; ++j) CHECK(op_table()[i].name != op_table()[j].name);
}

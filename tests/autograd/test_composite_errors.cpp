// Ops built from other ops name themselves and the bad argument in their
// errors, never an op they call inside (nll_loss's gather, mse_loss's mean)
// and never the anonymous "operation on an undefined tensor".
#include "support/grad_support.h"

using namespace ember;
using namespace ember::test;

namespace {

Tensor targets(const std::vector<int64_t>& t) { return from_vector(t, {int64_t(t.size())}); }

// The message of the ember::Error `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// `message` names `op` right after its file:line, and no op it calls inside.
void require_named(const std::string& message, const std::string& op, const std::string& rest) {
    INFO(message);
    REQUIRE_THAT(message, Catch::Matchers::Contains(": " + op + ": " + rest));
    for (const char* inner : {"gather", "mean:", "sub:", "where", "operation on an undefined"})
        CHECK_THAT(message, !Catch::Matchers::Contains(inner));
}

}  // namespace

TEST_CASE("nll_loss names itself and the target that is out of range", "[grad][loss][errors]") {
    const Tensor lp = leaf({6, 5}, 1, -3.0, 0.0);
    require_named(error_of([&] { nll_loss(lp, targets({1, 2, 5, 0, 0, 0})); }), "nll_loss",
                  "target 5 at row 2 is out of range for 5 classes (ignore_index -100)");
    require_named(error_of([&] { nll_loss(lp, targets({1, 2, 0, -3, 0, 0})); }), "nll_loss",
                  "target -3 at row 3 is out of range for 5 classes");
    // ignore_index is not a class, even where it is in range.
    require_named(error_of([&] { nll_loss(lp, targets({1, 2, 0, 0, 0, -100}), {.ignore_index = 4}); }),
                  "nll_loss", "target -100 at row 5 is out of range for 5 classes (ignore_index 4)");
    CHECK_NOTHROW(nll_loss(lp, targets({1, 2, 0, 4, 0, 4}), {.ignore_index = 4}));
    // A strided target is read through its strides.
    const Tensor wide = targets({1, 9, 2, 9, 7, 9, 0, 9, 0, 9, 0, 9});
    require_named(error_of([&] { nll_loss(lp, wide.slice(0, 0, 12, 2)); }), "nll_loss",
                  "target 7 at row 2 is out of range");
    require_named(error_of([&] { nll_loss(Tensor(), targets({1})); }), "nll_loss",
                  "undefined tensor (log_probs undefined, target [1])");
    require_named(error_of([&] { nll_loss(lp, Tensor()); }), "nll_loss",
                  "undefined tensor (log_probs [6, 5], target undefined)");
    require_named(error_of([&] { nll_loss(lp.to(DType::i64), targets({1, 2, 0, 0, 0, 0})); }),
                  "nll_loss", "log_probs must be floating-point, got i64");
}

TEST_CASE("mse_loss, dropout, split and chunk name themselves", "[grad][errors]") {
    const Tensor x = leaf({2, 3}, 2);
    require_named(error_of([&] { mse_loss(Tensor(), x); }), "mse_loss",
                  "undefined tensor (input undefined, target [2, 3])");
    require_named(error_of([&] { mse_loss(x.to(DType::i64), x.to(DType::i64)); }), "mse_loss",
                  "input and target must be floating-point, got i64 and i64");
    require_named(error_of([&] { mse_loss(x, x.to(DType::i32)); }), "mse_loss",
                  "input and target must be floating-point, got f64 and i32");
    require_named(error_of([&] { dropout(Tensor(), 0.5, true); }), "dropout", "undefined tensor");
    require_named(error_of([&] { split(Tensor(), 1); }), "split", "undefined tensor");
    require_named(error_of([&] { split(Tensor(), std::vector<int64_t>{1}); }), "split",
                  "undefined tensor");
    require_named(error_of([&] { chunk(Tensor(), 2); }), "chunk", "undefined tensor");
}

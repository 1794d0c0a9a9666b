// ember doctor's verdict (tools/train/doctor.h): a trial is faster or slower
// only outside the reference's measured range. (The doctor end to end:
// tests/cli/train_cli.sh, case doctor.)
#include "tools/train/doctor.h"

#include "support/support.h"

using namespace ember;

TEST_CASE("the doctor's verdicts need the ranges apart", "[doctor]") {
    using train::TrialResult;
    const TrialResult base{.samples_per_s = {100, 110, 105}};
    CHECK(train::verdict({.samples_per_s = {111, 130, 120}}, base) == "faster");
    CHECK(train::verdict({.samples_per_s = {110, 130, 120}}, base) == "within noise");  // touches the max
    CHECK(train::verdict({.samples_per_s = {80, 99, 90}}, base) == "slower");
    CHECK(train::verdict({.samples_per_s = {80, 100, 90}}, base) == "within noise");
    CHECK(train::verdict({.samples_per_s = {50, 200, 120}}, base) == "within noise");  // a wide spread
    // Apart, but by less than 3 %: not named.
    CHECK(train::verdict({.samples_per_s = {107.5, 108, 108.5}}, {.samples_per_s = {105, 106, 107}}) ==
          "within noise");
    CHECK(train::verdict({.samples_per_s = {110.5, 110.3, 111}}, {.samples_per_s = {105, 106, 107}}) ==
          "faster");
    CHECK(train::verdict({.failure = "does not fit"}, base) == "does not fit");
}

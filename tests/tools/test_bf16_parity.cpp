// Training parity under bf16 autocast on the CPU: resnet8's recipe (channels-
// last, its bf16 convolutions and batch norm on bf16 activations) for five
// whole epochs lands within 0.3 points of the same run in f32. Slow (two
// runs of five epochs, minutes on two cores): hidden from the default run,
// run it with `build/release/tests/test_train_tools "[slow]"`. The mlp's
// parity test is tests/optim/test_amp.cpp ("five epochs under bf16 autocast").
#include "support/data_support.h"
#include "support/support.h"
#include "train/run.h"
#include "train/trainer.h"

using namespace ember;

namespace {

double resnet8_accuracy(const std::string& amp, const std::string& dir) {
    train::TrainConfig c;
    c.model = "resnet8";
    c.epochs = 5;
    c.amp = amp;
    c.out = dir;
    train::Run run = train::build_run(c);
    const train::Outcome out = train::fit(run, {.print = false});
    return out.last.accuracy;
}

}  // namespace

TEST_CASE("bf16 parity: five epochs of resnet8 under bf16 autocast within 0.3 points of f32",
          "[.slow][bf16]") {
    test::TempDir dir;
    const double f32 = resnet8_accuracy("off", dir.path + "/f32");
    const double bf16 = resnet8_accuracy("bf16", dir.path + "/bf16");
    INFO("f32 " << f32 << ", bf16 autocast " << bf16);
    CHECK(f32 > 0.89);
    CHECK(std::abs(bf16 - f32) <= 0.003);
}

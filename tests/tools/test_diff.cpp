// ember diff's comparisons (tools/train/diff.h): weight files tensor by
// tensor against differences computed here, and runs' metrics compared only
// over the same steps, bit for bit, with the tolerance applied as stated.
#include "tools/train/diff.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "nn/safetensors.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;
using ember::train::TensorDiff;

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / (name + "." + std::to_string(::getpid()));
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

const TensorDiff& find(const std::vector<TensorDiff>& w, const std::string& name) {
    for (const TensorDiff& d : w)
        if (d.name == name) return d;
    FAIL("no row for " << name);
    return w.front();
}

void write_lines(const fs::path& p, const std::vector<std::string>& lines) {
    std::ofstream f(p);
    for (const std::string& l : lines) f << l << "\n";
}

}  // namespace

TEST_CASE("diff_weights: per tensor, against differences computed here", "[diff]") {
    const fs::path d = fresh_dir("ember_diff_weights");
    const Tensor same = random_tensor({7, 5}, DType::f32, 1);
    const Tensor a = random_tensor({64}, DType::f32, 2);
    Tensor b = a.clone();
    float* pb = b.data<float>();
    pb[3] = std::nextafter(pb[3], 10.0f);  // one ULP
    pb[40] += 0.5f;
    const Tensor half = random_tensor({4}, DType::f32, 3);
    nn::save_safetensors((d / "a.safetensors").string(),
                         {{"same", same}, {"changed", a}, {"only_a", half}, {"shape", half}});
    nn::save_safetensors((d / "b.safetensors").string(),
                         {{"same", same.clone()}, {"changed", b}, {"only_b", half}, {"shape", half.reshape({2, 2})}});
    const std::vector<TensorDiff> w =
        train::diff_weights((d / "a.safetensors").string(), (d / "b.safetensors").string());
    REQUIRE(w.size() == 5);
    // Worst first: the mismatch, the tensors in one file, the differing, the equal.
    CHECK(w[0].name == "shape");
    CHECK(w[0].kind == TensorDiff::Kind::mismatch);
    CHECK((w[0].a == "f32 [4]" && w[0].b == "f32 [2, 2]"));
    CHECK(find(w, "only_a").kind == TensorDiff::Kind::only_a);
    CHECK(find(w, "only_b").kind == TensorDiff::Kind::only_b);
    CHECK(w[3].name == "changed");
    CHECK(w[4].name == "same");
    CHECK(w[4].kind == TensorDiff::Kind::equal);
    const TensorDiff& c = find(w, "changed");
    CHECK(c.kind == TensorDiff::Kind::differs);
    CHECK(c.differing == 2);
    CHECK(c.numel == 64);
    const double x3 = a.data<float>()[3], y3 = pb[3], x40 = a.data<float>()[40], y40 = pb[40];
    const double abs3 = std::fabs(x3 - y3), abs40 = std::fabs(x40 - y40);
    CHECK(c.max_abs == std::max(abs3, abs40));
    const double rel3 = abs3 / std::max(std::fabs(x3), std::fabs(y3));
    const double rel40 = abs40 / std::max(std::fabs(x40), std::fabs(y40));
    CHECK(c.max_rel == std::max(rel3, rel40));
    CHECK(train::format_weights_diff(w, 20).find("4 of 5 tensors differ") != std::string::npos);
    fs::remove_all(d);
}

TEST_CASE("diff_runs: losses only over the same steps, bit for bit; the tolerance as stated",
          "[diff]") {
    const fs::path d = fresh_dir("ember_diff_runs");
    fs::create_directories(d / "a");
    fs::create_directories(d / "b");
    write_lines(d / "a" / "config.toml", {"lr = 0.003", "seed = 0", "out = \"x\""});
    write_lines(d / "b" / "config.toml", {"lr = 0.003", "seed = 1", "out = \"y\""});
    // Step 2 over the same steps: equal. Step 4: over other steps (not
    // compared). Step 6: one ULP apart (bitwise, within 1e-6). Step 8: 1e-3
    // apart (beyond). Fingerprints part at step 5.
    write_lines(d / "a" / "metrics.jsonl",
                {R"({"kind":"step","step":2,"from_step":1,"loss":1.5,"loss_hex":"0x1.8p+0"})",
                 R"({"kind":"step","step":4,"from_step":3,"loss":1.25,"loss_hex":"0x1.4p+0"})",
                 R"({"kind":"step","step":6,"from_step":5,"loss":1.0,"loss_hex":"0x1p+0"})",
                 R"({"kind":"step","step":8,"from_step":7,"loss":1.0,"loss_hex":"0x1p+0"})",
                 R"({"kind":"fingerprint","step":4,"params":2.0,"params_hex":"0x1p+1"})",
                 R"({"kind":"fingerprint","step":5,"params":2.0,"params_hex":"0x1p+1"})"});
    write_lines(d / "b" / "metrics.jsonl",
                {R"({"kind":"step","step":2,"from_step":1,"loss":1.5,"loss_hex":"0x1.8p+0"})",
                 R"({"kind":"step","step":4,"from_step":4,"loss":9.0,"loss_hex":"0x1.2p+3"})",
                 R"({"kind":"step","step":6,"from_step":5,"loss":1.0000000000000002,"loss_hex":"0x1.0000000000001p+0"})",
                 R"({"kind":"step","step":8,"from_step":7,"loss":1.001})", "",
                 R"({"kind":"fingerprint","step":4,"params":2.0,"params_hex":"0x1p+1"})",
                 R"({"kind":"fingerprint","step":5,"params":2.5,"params_hex":"0x1.4p+1"})"});
    const train::RunsDiff r = train::diff_runs((d / "a").string(), (d / "b").string(), 1e-6);
    REQUIRE(r.config.size() == 1);  // `out` is not a difference
    CHECK(r.config[0] == std::vector<std::string>{"seed", "0", "1"});
    CHECK(r.losses_compared == 3);
    CHECK(r.losses_skipped == 1);
    REQUIRE(r.first_bitwise);
    CHECK(r.first_bitwise->step == 6);
    REQUIRE(r.first_beyond);
    CHECK(r.first_beyond->step == 8);
    CHECK((r.first_beyond->a == 1.0 && r.first_beyond->b == 1.001));
    CHECK(r.fingerprints_compared == 2);
    REQUIRE(r.first_fingerprint);
    CHECK(r.first_fingerprint->step == 5);
    CHECK(!r.identical());
    // A tolerance above 1e-3 finds nothing beyond it.
    CHECK(!train::diff_runs((d / "a").string(), (d / "b").string(), 2e-3).first_beyond);
    // A line that is not JSON is an error naming the file and the line.
    write_lines(d / "b" / "metrics.jsonl", {R"({"kind":"step","step":2,"loss":1.5})", "{oops"});
    CHECK_THROWS_WITH(train::diff_runs((d / "a").string(), (d / "b").string(), 1e-6),
                      Catch::Contains("metrics.jsonl':2: not a JSON object"));
    fs::remove_all(d);
}

// The fuzz targets as ordinary tests, in every build: each target runs over
// its seed corpus and over every input saved under tests/fuzz/regressions/
// <target>/ (crashes fuzzing found, kept once fixed). A regression fails
// here — in the sanitizer builds with the sanitizer's report.
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/fuzz_targets.h"
#include "nn/safetensors.h"
#include "support/support.h"

using namespace ember;

namespace {

std::vector<uint8_t> read_all(const std::filesystem::path& p) {
    std::ifstream f(p, std::ios::binary);
    REQUIRE(f.good());
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f),
                                std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("fuzz targets accept their seeds and every saved crash input", "[fuzz]") {
    const std::filesystem::path saved = std::filesystem::path(EMBER_FUZZ_DIR) / "regressions";
    for (const fuzz::Target& t : fuzz::kTargets) {
        INFO("target " << t.name);
        const auto seeds = fuzz::seeds(t.name);
        CHECK(seeds.size() >= 6);
        for (size_t i = 0; i < seeds.size(); ++i) {
            INFO("seed " << i);
            CHECK(t.run(seeds[i].data(), seeds[i].size()) == 0);
        }
        const std::filesystem::path dir = saved / t.name;
        if (!std::filesystem::is_directory(dir)) continue;
        for (const auto& e : std::filesystem::directory_iterator(dir)) {
            if (!e.is_regular_file() || e.path().filename() == "README.md") continue;
            INFO("saved input " << e.path());
            const std::vector<uint8_t> bytes = read_all(e.path());
            CHECK(t.run(bytes.data(), bytes.size()) == 0);
        }
    }
}

TEST_CASE("fuzz seeds: the malformed cases are rejected, the valid files load", "[fuzz]") {
    // The seeds are only useful if they reach both sides of the readers.
    const auto st = fuzz::seeds("safetensors");
    const std::string path = fuzz::scratch_file("check.safetensors", st[1].data(), st[1].size());
    CHECK(nn::load_safetensors(path).tensors.size() == 1);
    const auto& bad = st.back();
    const std::string bad_path = fuzz::scratch_file("bad.safetensors", bad.data(), bad.size());
    REQUIRE_THROWS_AS(nn::load_safetensors(bad_path), Error);
}

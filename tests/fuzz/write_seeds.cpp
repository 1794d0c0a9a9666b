// Writes each fuzz target's seed inputs to <folder>/<target>/seed-<n>, the
// corpus tools/dev fuzz starts from. Usage: fuzz_write_seeds <folder>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "support/fuzz_targets.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <folder>\n", argv[0]);
        return 2;
    }
    for (const ember::fuzz::Target& t : ember::fuzz::kTargets) {
        const std::filesystem::path dir = std::filesystem::path(argv[1]) / t.name;
        std::filesystem::create_directories(dir);
        int n = 0;
        for (const auto& bytes : ember::fuzz::seeds(t.name)) {
            std::ofstream f(dir / ("seed-" + std::to_string(n++)), std::ios::binary);
            f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        }
        std::printf("%s: %d seeds in %s\n", t.name, n, dir.c_str());
    }
    return 0;
}

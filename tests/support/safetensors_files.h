// File helpers for the safetensors tests: a scratch directory removed at the
// end, whole-file reads and writes, and a file assembled from its parts.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "safetensors_cases.h"
#include "support.h"

namespace ember::test {

/// A fresh directory under the system's temporary directory, removed with its
/// contents when this goes out of scope.
class ScratchDir {
public:
    explicit ScratchDir(const std::string& tag) {
        static int count = 0;
        path_ = std::filesystem::temp_directory_path() /
                ("ember-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(count++));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~ScratchDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    std::string file(const std::string& name) const { return (path_ / name).string(); }
    const std::filesystem::path& path() const { return path_; }
    /// Names of the entries in the directory, sorted.
    std::vector<std::string> listing() const {
        std::vector<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(path_))
            names.push_back(e.path().filename().string());
        std::sort(names.begin(), names.end());
        return names;
    }

private:
    std::filesystem::path path_;
};

inline Bytes read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const Bytes& b) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
    REQUIRE(f.good());
}

/// A tensor whose bytes are seeded random bits (any pattern: NaNs, subnormals,
/// negative zeros); bool elements get 0 or 1.
inline Tensor random_bits(const Shape& shape, DType dtype, uint64_t seed) {
    Tensor t = empty(shape, {.dtype = dtype});
    std::mt19937_64 rng(seed);
    auto* p = static_cast<uint8_t*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel() * t.element_size(); ++i)
        p[i] = dtype == DType::boolean ? uint8_t(rng() & 1) : uint8_t(rng());
    return t;
}

/// A tensor's bytes in row-major order.
inline Bytes raw_bytes(const Tensor& t) {
    const Tensor c = t.contiguous();
    const auto* p = static_cast<const uint8_t*>(c.data_ptr());
    return Bytes(p, p + c.numel() * c.element_size());
}

}  // namespace ember::test

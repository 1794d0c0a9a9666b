// Helpers for the data/ tests: a temporary folder per test, crafted IDX files
// (raw and gzip, written with zlib), and the Fashion-MNIST files every CI
// machine has (tools/dev setup installs them) — a clear failure when not.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/fashion_mnist.h"
#include "idx_cases.h"
#include "scoped_env.h"
#include "support.h"

namespace ember::test {

/// A fresh folder under the system's temporary directory, removed at the end.
struct TempDir {
    std::string path;
    TempDir() {
        std::string tmpl = (std::filesystem::temp_directory_path() / "ember-data-XXXXXX").string();
        REQUIRE(mkdtemp(tmpl.data()) != nullptr);
        path = tmpl;
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string file(const std::string& name) const { return path + "/" + name; }
};

/// Writes bytes as they are, or gzip-compressed through zlib's gzwrite.
inline void write_file(const std::string& path, const Bytes& bytes, bool gz = false) {
    if (gz) {
        gzFile f = gzopen(path.c_str(), "wb");
        REQUIRE(f != nullptr);
        if (!bytes.empty())
            REQUIRE(gzwrite(f, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
        REQUIRE(gzclose(f) == Z_OK);
        return;
    }
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    REQUIRE(out.good());
}

inline Bytes read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// Writes u8 images [n, h, w] and u8 labels [n] as IDX files named like Fashion-MNIST's.
inline void write_mnist_like(const std::string& dir, const std::string& prefix, const Bytes& pixels,
                             const Bytes& labels, uint32_t h, uint32_t w, bool gz) {
    const uint32_t n = uint32_t(labels.size());
    const std::string sfx = gz ? ".gz" : "";
    write_file(dir + "/" + prefix + "-images-idx3-ubyte" + sfx,
               concat(idx_header(0x08, {n, h, w}), pixels), gz);
    write_file(dir + "/" + prefix + "-labels-idx1-ubyte" + sfx,
               concat(idx_header(0x08, {n}), labels), gz);
}

/// The Fashion-MNIST folder, or a test failure that says how to get it.
inline std::string fashion_root() {
    const std::string root = data::FashionMNIST::default_root();
    const bool found = std::filesystem::exists(root + "/t10k-images-idx3-ubyte.gz") ||
                       std::filesystem::exists(root + "/t10k-images-idx3-ubyte");
    if (!found)
        FAIL("Fashion-MNIST is not in " << root
                                        << ": run `tools/dev setup` (it installs Debian's "
                                           "dataset-fashion-mnist package), or set EMBER_DATA");
    return root;
}

/// The Fashion-MNIST test split, read once per test binary.
inline std::shared_ptr<const data::FashionMNIST> fashion_test() {
    static std::shared_ptr<const data::FashionMNIST> ds;
    if (!ds) {
        fashion_root();
        ds = std::make_shared<const data::FashionMNIST>(data::Split::test);
    }
    return ds;
}

}  // namespace ember::test

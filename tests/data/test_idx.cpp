// The IDX reader on crafted files, raw and gzip: every element type with its
// big-endian values decoded by hand, empty dims, and each way a file can be
// wrong (truncated, oversized, inconsistent, corrupt) asserted by message;
// then the real Fashion-MNIST headers.
#include <cstring>

#include "data/idx.h"
#include "support/data_support.h"

using namespace ember;
using namespace ember::test;
using data::read_idx;
using data::read_idx_info;

namespace {

// Big-endian bytes of one value of N bytes.
template <class U>
void put_be(Bytes& b, U v) {
    for (int s = int(sizeof(U)) - 1; s >= 0; --s) b.push_back(uint8_t(v >> (8 * s)));
}

}  // namespace

TEST_CASE("read_idx: u8 images, raw and gzip, come back byte for byte", "[data][idx]") {
    TempDir dir;
    const Bytes pixels = random_bytes(3 * 4 * 5, 1);
    for (bool gz : {false, true}) {
        const std::string path = dir.file(gz ? "a.gz" : "a");
        write_file(path, concat(idx_header(0x08, {3, 4, 5}), pixels), gz);
        const Tensor t = read_idx(path);
        CHECK(t.dtype() == DType::u8);
        CHECK(t.shape() == Shape{3, 4, 5});
        CHECK(t.to_vector<uint8_t>() == pixels);
        const data::IdxInfo info = read_idx_info(path);
        CHECK(info.compressed == gz);
        CHECK(info.header_bytes == 16);
        CHECK(info.data_bytes == 60);
        CHECK(info.shape == Shape{3, 4, 5});
    }
}

TEST_CASE("read_idx: i8, i16, i32, f32, f64 decoded from big-endian", "[data][idx]") {
    TempDir dir;
    const std::vector<int32_t> ints = {0, 1, -1, 127, -128, 42, -7};
    const std::vector<double> reals = {0.0, -1.5, 3.25, 1e-3, -2.5e10, 7.0, 0.1};
    const uint32_t n = uint32_t(ints.size());
    for (bool gz : {false, true}) {
        Bytes i8 = idx_header(0x09, {n}), i16 = idx_header(0x0B, {n}), i32 = idx_header(0x0C, {n});
        Bytes f32 = idx_header(0x0D, {n}), f64 = idx_header(0x0E, {n});
        for (size_t k = 0; k < n; ++k) {
            put_be(i8, uint8_t(int8_t(ints[k])));
            put_be(i16, uint16_t(int16_t(ints[k] * 200)));
            put_be(i32, uint32_t(ints[k]) * 16777259u);  // wraps: every byte in use
            uint32_t fb;
            const float fv = float(reals[k]);
            std::memcpy(&fb, &fv, 4);
            put_be(f32, fb);
            uint64_t db;
            std::memcpy(&db, &reals[k], 8);
            put_be(f64, db);
        }
        const std::string s = gz ? ".gz" : "";
        write_file(dir.file("i8" + s), i8, gz);
        write_file(dir.file("i16" + s), i16, gz);
        write_file(dir.file("i32" + s), i32, gz);
        write_file(dir.file("f32" + s), f32, gz);
        write_file(dir.file("f64" + s), f64, gz);
        const Tensor a = read_idx(dir.file("i8" + s)), b = read_idx(dir.file("i16" + s)),
                     c = read_idx(dir.file("i32" + s)), d = read_idx(dir.file("f32" + s)),
                     e = read_idx(dir.file("f64" + s));
        CHECK(a.dtype() == DType::i32);
        CHECK(b.dtype() == DType::i32);
        CHECK(c.dtype() == DType::i32);
        CHECK(d.dtype() == DType::f32);
        CHECK(e.dtype() == DType::f64);
        for (size_t k = 0; k < n; ++k) {
            CHECK(a.to_vector<int32_t>()[k] == ints[k]);
            CHECK(b.to_vector<int32_t>()[k] == ints[k] * 200);
            CHECK(c.to_vector<int32_t>()[k] == int32_t(uint32_t(ints[k]) * 16777259u));
            CHECK(d.to_vector<float>()[k] == float(reals[k]));
            CHECK(e.to_vector<double>()[k] == reals[k]);
        }
    }
}

TEST_CASE("read_idx: empty dims and a single element", "[data][idx]") {
    TempDir dir;
    for (bool gz : {false, true}) {
        write_file(dir.file("e"), idx_header(0x08, {0, 28, 28}), gz);
        const Tensor e = read_idx(dir.file("e"));
        CHECK(e.shape() == Shape{0, 28, 28});
        CHECK(e.numel() == 0);
        write_file(dir.file("one"), concat(idx_header(0x08, {1, 1}), {200}), gz);
        const Tensor one = read_idx(dir.file("one"));
        CHECK(one.shape() == Shape{1, 1});
        CHECK(one.item() == 200);
    }
}

TEST_CASE("read_idx: bad headers are errors naming the file and the problem", "[data][idx]") {
    TempDir dir;
    const std::string p = dir.file("bad-ubyte");
    auto check = [&](const Bytes& bytes, const std::string& msg) {
        for (bool gz : {false, true}) {
            INFO((gz ? "gzip" : "raw") << ", expecting: " << msg);
            write_file(p, bytes, gz);
            REQUIRE_THROWS_WITH_MSG(read_idx(p), msg);
            REQUIRE_THROWS_WITH_MSG(read_idx(p), p);
        }
    };
    for (const IdxCase& c : idx_bad_header_cases()) check(c.bytes, c.message);
}

TEST_CASE("read_idx: data shorter or longer than the header says", "[data][idx]") {
    TempDir dir;
    const std::string p = dir.file("x");
    const Bytes header = idx_header(0x08, {3, 4, 5});
    for (bool gz : {false, true}) {
        INFO((gz ? "gzip" : "raw"));
        write_file(p, concat(header, random_bytes(59, 2)), gz);
        REQUIRE_THROWS_WITH_MSG(
            read_idx(p),
            "truncated: header says [3, 4, 5] x 1 bytes = 60 bytes of data, the file holds 59");
        write_file(p, concat(header, random_bytes(61, 2)), gz);
        REQUIRE_THROWS_WITH_MSG(read_idx(p), "oversized");
    }
    // f32 data must be whole elements too.
    write_file(p, concat(idx_header(0x0D, {2}), random_bytes(7, 3)));
    REQUIRE_THROWS_WITH_MSG(read_idx(p), "[2] x 4 bytes = 8 bytes of data, the file holds 7");
}

TEST_CASE("read_idx: a header claiming huge data is refused before allocating", "[data][idx]") {
    TempDir dir;
    const std::string p = dir.file("huge");
    // 2^32-1 cubed u8 (8e28 would overflow; this is ~2.8e14 bytes) from a tiny file.
    const Bytes header = idx_header(0x08, {65535, 65535, 65535});
    write_file(p, concat(header, random_bytes(100, 4)));
    REQUIRE_THROWS_WITH_MSG(read_idx(p), "truncated: header says [65535, 65535, 65535] x 1 bytes");
    // A gzip file cannot expand more than ~1032x: this one would be a bomb.
    write_file(p, concat(header, Bytes(100000, 0)), true);
    REQUIRE_THROWS_WITH_MSG(read_idx(p), "inconsistent: header says [65535, 65535, 65535]");
    REQUIRE_THROWS_WITH_MSG(read_idx(p), "-byte gzip file can hold");
    // read_idx_info checks the same before any data is read.
    REQUIRE_THROWS_WITH_MSG(read_idx_info(p), "inconsistent");
}

TEST_CASE("read_idx: corrupt and cut-off gzip streams", "[data][idx]") {
    TempDir dir;
    const std::string p = dir.file("c.gz");
    // Incompressible data: deflate stores it, so a flipped byte lands in the
    // data and only the CRC at the end can catch it.
    const Bytes good = concat(idx_header(0x08, {100, 100}), random_bytes(10000, 5));
    write_file(p, good, true);
    Bytes gz = read_file(p);
    REQUIRE(gz.size() > 5000);
    Bytes flipped = gz;
    flipped[gz.size() / 2] ^= 0x40;
    write_file(p, flipped);
    REQUIRE_THROWS_WITH_MSG(read_idx(p), "corrupt gzip data");
    Bytes cut(gz.begin(), gz.begin() + long(gz.size() / 2));
    write_file(p, cut);
    REQUIRE_THROWS_WITH_MSG(read_idx(p),
                            "truncated: header says [100, 100] x 1 bytes = 10000 bytes of data");
    write_file(p, gz);
    CHECK(read_idx(p).to_vector<uint8_t>() == Bytes(good.begin() + 12, good.end()));
}

TEST_CASE("read_idx: missing files and folders", "[data][idx]") {
    TempDir dir;
    REQUIRE_THROWS_WITH_MSG(read_idx(dir.file("nope")),
                            "read_idx: " + dir.file("nope") + ": cannot open: No such file");
    REQUIRE_THROWS_WITH_MSG(read_idx(dir.path), "is a directory; a regular file is needed");
}

TEST_CASE("read_idx: Fashion-MNIST headers", "[data][idx][fashion]") {
    const std::string root = fashion_root();
    const data::IdxInfo im = read_idx_info(root + "/t10k-images-idx3-ubyte.gz");
    CHECK(im.compressed);
    CHECK(im.type_code == 0x08);
    CHECK(im.shape == Shape{10000, 28, 28});
    const Tensor labels = read_idx(root + "/t10k-labels-idx1-ubyte.gz");
    CHECK(labels.shape() == Shape{10000});
    CHECK(labels.dtype() == DType::u8);
}

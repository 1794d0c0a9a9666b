// Malformed safetensors files: one hand-made case per rule of the format,
// each rejected with an ember::Error whose message names the file and the
// problem; a few unusual but valid files that must load; and seeded random
// corruptions of a valid file that must either load or throw ember::Error
// (the sanitizer build runs this too, so "never crashes" includes no UB).
#include <random>

#include "nn/safetensors.h"
#include "support/safetensors_cases.h"
#include "support/safetensors_files.h"

using namespace ember;
using namespace ember::test;
using nn::load_safetensors;
using namespace std::string_literals;
using namespace ember::test::safetensors_cases;

TEST_CASE("load_safetensors: each malformed header is rejected with its reason",
          "[safetensors]") {
    ScratchDir dir("st-bad");
    const std::string path = dir.file("bad.safetensors");
    // The base the cases mutate is itself valid.
    write_bytes(path, file_bytes("{"s + kA + "," + kB + "}", zeros(24)));
    REQUIRE(load_safetensors(path).tensors.size() == 2);
    for (const Case& c : header_cases()) {
        INFO(c.what);
        write_bytes(path, file_bytes(c.header, c.data));
        REQUIRE_THROWS_AS(load_safetensors(path), Error);
        REQUIRE_THROWS_WITH_MSG(load_safetensors(path), c.message);
        REQUIRE_THROWS_WITH_MSG(load_safetensors(path), "load_safetensors: '" + path + "': ");
    }
}

TEST_CASE("load_safetensors: bad length fields and truncated files", "[safetensors]") {
    ScratchDir dir("st-trunc");
    const std::string path = dir.file("t.safetensors");
    const std::string header = "{"s + kA + "," + kB + "}";
    const Bytes valid = file_bytes(header, zeros(24));
    const size_t data_start = 8 + header.size();

    auto rejects = [&](const Bytes& b, const std::string& message) {
        write_bytes(path, b);
        REQUIRE_THROWS_WITH_MSG(load_safetensors(path), message);
    };
    auto with_length = [&](uint64_t n) {
        Bytes b = valid;
        const Bytes len = le64(n);
        std::copy(len.begin(), len.end(), b.begin());
        return b;
    };
    rejects(with_length(0), "the header length is 0");
    rejects(with_length(100'000'001), "the header length 100000001 exceeds the limit of 100000000");
    rejects(with_length(uint64_t(1) << 63), "exceeds the limit of 100000000 bytes");
    rejects(with_length(valid.size() - 7),
            str("the header length ", valid.size() - 7, " exceeds the ", valid.size() - 8,
                " bytes after the length field"));

    // Every proper prefix of a valid file is rejected; a few with their message.
    for (size_t n = 0; n < valid.size(); ++n) {
        INFO("truncated to " << n << " bytes");
        write_bytes(path, Bytes(valid.begin(), valid.begin() + ptrdiff_t(n)));
        REQUIRE_THROWS_AS(load_safetensors(path), Error);
    }
    const auto prefix = [&](size_t n) {
        return Bytes(valid.begin(), valid.begin() + ptrdiff_t(n));
    };
    rejects(prefix(0), "the file is 0 bytes, too short for the 8-byte header length");
    rejects(prefix(7), "the file is 7 bytes, too short");
    rejects(prefix(8), str("the header length ", header.size(), " exceeds the 0 bytes"));
    rejects(prefix(8 + header.size() / 2), "bytes after the length field (is the file truncated?)");
    rejects(prefix(data_start), "extends past the end of the 0-byte data buffer");
    rejects(prefix(data_start + 10), "tensor 'a' (data_offsets [0, 16]) extends past the end");
    rejects(prefix(valid.size() - 1), "tensor 'b' (data_offsets [16, 24]) extends past the end");
}

TEST_CASE("load_safetensors: unusual but valid files", "[safetensors]") {
    ScratchDir dir("st-odd");
    const std::string path = dir.file("ok.safetensors");
    // Header order differs from data order; an empty tensor shares an offset
    // with a full one; trailing-space padding; metadata after the tensors.
    const std::string header =
        R"({"b":{"dtype":"I64","shape":[1],"data_offsets":[16,24]},)"
        R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[16,16]},)" +
        kA + R"(,"__metadata__":{"k":"v"}}      )";
    Bytes data(24);
    for (size_t i = 0; i < data.size(); ++i) data[i] = uint8_t(i);
    write_bytes(path, file_bytes(header, data));
    const nn::TensorFile f = load_safetensors(path);
    REQUIRE(f.tensors.size() == 3);
    CHECK(f.tensors[0].first == "a");  // file (data) order
    CHECK(f.tensors[1].first == "e");
    CHECK(f.tensors[2].first == "b");
    CHECK(f.tensors[1].second.shape() == Shape{0, 3});
    CHECK(raw_bytes(f.tensors[0].second) == Bytes(data.begin(), data.begin() + 16));
    CHECK(raw_bytes(f.tensors[2].second) == Bytes(data.begin() + 16, data.end()));
    CHECK(f.metadata == std::map<std::string, std::string>{{"k", "v"}});

    // No tensors at all, no data.
    write_bytes(path, file_bytes("{}", {}));
    CHECK(load_safetensors(path).tensors.empty());
}

TEST_CASE("load_safetensors: random corruptions load or throw ember::Error", "[safetensors]") {
    ScratchDir dir("st-fuzz");
    const std::string path = dir.file("f.safetensors");
    nn::save_safetensors(path,
                         {{"w", random_bits({8, 16}, DType::f32, 1)},
                          {"h", random_bits({4}, DType::bf16, 2)},
                          {"mask", random_bits({5}, DType::boolean, 3)},
                          {"idx", random_bits({0, 2}, DType::i64, 4)},
                          {"s", random_bits({}, DType::u8, 5)}},
                         {{"format", "pt"}});
    const Bytes valid = read_bytes(path);
    auto length_field = [](const Bytes& b) {
        uint64_t n = 0;
        for (int i = 0; i < 8; ++i) n |= uint64_t(b[size_t(i)]) << (8 * i);
        return n;
    };
    const uint64_t header_end = 8 + length_field(valid);  // where the data starts
    REQUIRE(header_end < valid.size());
    const std::string json_chars = "{}[]:,\"0123456789-.eE \\u";

    std::mt19937_64 rng(2024);
    auto below = [&](uint64_t n) { return n ? rng() % n : 0; };
    int loaded = 0, rejected = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        Bytes b = valid;
        switch (iter % 5) {
            case 0:  // flip a few bits anywhere
                for (int k = 0, n = 1 + int(below(4)); k < n; ++k)
                    b[below(b.size())] ^= uint8_t(1u << below(8));
                break;
            case 1:  // JSON punctuation and digits into the header
                for (int k = 0, n = 1 + int(below(3)); k < n; ++k)
                    b[8 + below(header_end - 8)] = uint8_t(json_chars[below(json_chars.size())]);
                break;
            case 2:  // truncate
                b.resize(below(b.size()));
                break;
            case 3: {  // a wrong length field, near the right one or anything
                const uint64_t n = below(2) ? header_end - 8 + below(33) - 16 : rng();
                const Bytes len = le64(n);
                std::copy(len.begin(), len.end(), b.begin());
                break;
            }
            case 4: {  // cut a piece out of the header, keeping the length field right
                const uint64_t at = 8 + below(header_end - 8), n = 1 + below(12);
                const uint64_t end = std::min(at + n, header_end);
                b.erase(b.begin() + ptrdiff_t(at), b.begin() + ptrdiff_t(end));
                const Bytes len = le64(header_end - 8 - (end - at));
                std::copy(len.begin(), len.end(), b.begin());
                break;
            }
        }
        write_bytes(path, b);
        try {
            const nn::TensorFile f = load_safetensors(path);
            // What loaded must account for every data byte of the file.
            uint64_t total = 0;
            for (const auto& [name, t] : f.tensors) total += uint64_t(t.numel() * t.element_size());
            CHECK(8 + length_field(b) + total == b.size());
            ++loaded;
        } catch (const Error&) {
            ++rejected;
        }
    }
    INFO(loaded << " loaded, " << rejected << " rejected");
    CHECK(loaded > 100);
    CHECK(rejected > 1000);
}

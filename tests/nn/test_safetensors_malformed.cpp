// Malformed safetensors files: one hand-made case per rule of the format,
// each rejected with an ember::Error whose message names the file and the
// problem; a few unusual but valid files that must load; and seeded random
// corruptions of a valid file that must either load or throw ember::Error
// (the sanitizer build runs this too, so "never crashes" includes no UB).
#include <random>

#include "nn/safetensors.h"
#include "safetensors_files.h"

using namespace ember;
using namespace ember::test;
using nn::load_safetensors;
using namespace std::string_literals;

namespace {

// A valid pair of entries: a = F32 [2, 2] at [0, 16), b = I64 [1] at [16, 24).
const std::string kA = R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
const std::string kB = R"("b":{"dtype":"I64","shape":[1],"data_offsets":[16,24]})";
// Entry `a` with its fields replaced by `fields`.
std::string a_with(const std::string& fields) { return "\"a\":{" + fields + "}"; }

struct Case {
    const char* what;
    std::string header;
    Bytes data;
    std::string message;  // expected in the error
};

Bytes zeros(size_t n) { return Bytes(n, 0); }

std::vector<Case> header_cases() {
    const std::string shape = R"("shape":[2,2])", dtype = R"("dtype":"F32")",
                      offsets = R"("data_offsets":[0,16])";
    const std::string deep(100000, '[');
    return {
        {"not JSON", "{not json}", {}, "the header is not valid JSON: [json.exception.parse_error"},
        {"a JSON array", "[{"s + kA + "}]", zeros(16), "the header does not start with '{'"},
        {"leading space", " {}", {}, "the header does not start with '{'"},
        {"trailing garbage", "{}x", {}, "the header is not valid JSON"},
        {"two objects", "{}{}", {}, "the header is not valid JSON"},
        {"NUL after the JSON", std::string("{}\0 ", 4), {}, "holds a NUL byte at offset 2"},
        {"cut short", R"({"a":{"dtype":"F32")", {}, "the header is not valid JSON"},
        {"invalid UTF-8", "{\"a\xff\":{}}", {}, "the header is not valid JSON"},
        {"missing dtype", "{"s + a_with(shape + "," + offsets) + "," + kB + "}", zeros(24),
         "tensor 'a': missing 'dtype'"},
        {"missing shape", "{"s + a_with(dtype + "," + offsets) + "," + kB + "}", zeros(24),
         "tensor 'a': missing 'shape'"},
        {"missing data_offsets", "{"s + a_with(dtype + "," + shape) + "," + kB + "}", zeros(24),
         "tensor 'a': missing 'data_offsets'"},
        {"unknown dtype I8", "{"s + a_with(R"("dtype":"I8",)" + shape + "," + offsets) + "}",
         zeros(16), "tensor 'a': unsupported dtype 'I8' (ember reads F64, F32, F16, BF16"},
        {"unknown dtype F8_E4M3",
         "{"s + a_with(R"("dtype":"F8_E4M3",)" + shape + "," + offsets) + "}", zeros(16),
         "unsupported dtype 'F8_E4M3'"},
        {"dtype not a string", "{"s + a_with(R"("dtype":4,)" + shape + "," + offsets) + "}",
         zeros(16), "tensor 'a': dtype must be a string, got a number"},
        {"negative shape", "{"s + a_with(dtype + R"(,"shape":[2,-2],)" + offsets) + "}", zeros(16),
         "tensor 'a': shape has a negative entry -2"},
        {"float shape", "{"s + a_with(dtype + R"(,"shape":[2,2.0],)" + offsets) + "}", zeros(16),
         "tensor 'a': shape has a non-integer entry 2.0"},
        {"exponent shape", "{"s + a_with(dtype + R"(,"shape":[2,2e0],)" + offsets) + "}",
         zeros(16), "tensor 'a': shape has a non-integer entry 2e0"},
        {"string shape", "{"s + a_with(dtype + R"(,"shape":[2,"2"],)" + offsets) + "}", zeros(16),
         "tensor 'a': shape entries must be non-negative integers, got a string"},
        {"null shape entry", "{"s + a_with(dtype + R"(,"shape":[2,null],)" + offsets) + "}",
         zeros(16), "tensor 'a': shape entries must be non-negative integers, got null"},
        {"nested shape", "{"s + a_with(dtype + R"(,"shape":[[2],2],)" + offsets) + "}", zeros(16),
         "tensor 'a': shape entries must be non-negative integers, got an array"},
        {"shape not an array", "{"s + a_with(dtype + R"(,"shape":4,)" + offsets) + "}", zeros(16),
         "tensor 'a': shape must be an array, got a number"},
        {"element count overflow",
         "{"s + a_with(dtype + R"(,"shape":[1099511627776,1099511627776],)" + offsets) + "}",
         zeros(16), "tensor 'a': shape [1099511627776, 1099511627776] of F32 has too many"},
        {"shape entry past int64",
         "{"s + a_with(dtype + R"(,"shape":[18446744073709551615],)" + offsets) + "}", zeros(16),
         "tensor 'a': shape entry 18446744073709551615 is too large"},
        {"shape entry past uint64",
         "{"s + a_with(dtype + R"(,"shape":[18446744073709551616],)" + offsets) + "}", zeros(16),
         "tensor 'a': shape has a non-integer entry 18446744073709551616"},
        {"span too short", "{"s + a_with(dtype + "," + shape + R"(,"data_offsets":[0,12])") + "}",
         zeros(12),
         "tensor 'a': data_offsets [0, 12] span 12 bytes but shape [2, 2] of F32 needs 16"},
        {"offsets reversed", "{"s + a_with(dtype + "," + shape + R"(,"data_offsets":[16,0])") + "}",
         zeros(16), "tensor 'a': data_offsets [16, 0] end before they begin"},
        {"one offset", "{"s + a_with(dtype + "," + shape + R"(,"data_offsets":[16])") + "}",
         zeros(16), "tensor 'a': data_offsets must be [begin, end], got 1 entries"},
        {"three offsets",
         "{"s + a_with(dtype + "," + shape + R"(,"data_offsets":[0,16,16])") + "}", zeros(16),
         "tensor 'a': data_offsets must be [begin, end], got more than 2 entries"},
        {"negative offset",
         "{"s + a_with(dtype + "," + shape + R"(,"data_offsets":[-1,15])") + "}", zeros(16),
         "tensor 'a': data_offsets has a negative entry -1"},
        {"overlapping spans",
         "{"s + kA + R"(,"b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})", zeros(16),
         "tensor 'b' (data_offsets [8, 16]) overlaps tensor 'a', which ends at 16"},
        {"spans at the same offset",
         "{"s + kA + R"(,"b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", zeros(16),
         "tensor 'a' (data_offsets [0, 16]) overlaps tensor 'b', which ends at 8"},
        {"gap between spans",
         "{"s + kA + R"(,"b":{"dtype":"I64","shape":[1],"data_offsets":[24,32]}})", zeros(32),
         "a gap of 8 bytes before tensor 'b' (data_offsets [24, 32]); the previous data ends at "
         "16"},
        {"gap at the start", "{"s + a_with(dtype + "," + shape + R"(,"data_offsets":[8,24])") + "}",
         zeros(24), "a gap of 8 bytes before tensor 'a'"},
        {"span past the buffer", "{"s + kA + "," + kB + "}", zeros(20),
         "tensor 'b' (data_offsets [16, 24]) extends past the end of the 20-byte data buffer"},
        {"trailing bytes", "{"s + kA + "," + kB + "}", zeros(28),
         "4 trailing bytes after the last tensor's data (the tensors cover 24 of 28 data bytes)"},
        {"data but no tensors", "{}", zeros(8), "8 trailing bytes"},
        {"duplicate tensor",
         "{"s + kA + R"(,"a":{"dtype":"I64","shape":[1],"data_offsets":[16,24]}})",
         zeros(24), "duplicate key 'a'"},
        {"duplicate field", "{"s + a_with(dtype + "," + dtype + "," + shape + "," + offsets) + "}",
         zeros(16), "tensor 'a': duplicate field 'dtype'"},
        {"duplicate __metadata__", R"({"__metadata__":{},"__metadata__":{}})", {},
         "duplicate key '__metadata__'"},
        {"duplicate metadata key", R"({"__metadata__":{"k":"1","k":"2"}})", {},
         "__metadata__: duplicate key 'k'"},
        {"metadata number", R"({"__metadata__":{"k":1}})", {},
         "__metadata__: the value of 'k' must be a string, got a number"},
        {"metadata object", R"({"__metadata__":{"k":{}}})", {},
         "__metadata__: the value of 'k' must be a string, got an object"},
        {"metadata not an object", R"({"__metadata__":"x"})", {},
         "__metadata__ must be an object of strings, got a string"},
        {"unknown field",
         "{"s + a_with(dtype + "," + shape + "," + offsets + R"(,"offsets":[0,16])") + "}",
         zeros(16), "tensor 'a': unknown field 'offsets'"},
        {"empty name", R"({"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})", {},
         "a tensor has an empty name"},
        {"entry not an object", R"({"a":[1]})", {},
         "tensor 'a': entry must be an object, got an array"},
        {"control byte in a name", "{\"a\\u0001b\":5}", {},
         "tensor 'a\\x01b': entry must be an object, got a number"},
        {"deep nesting in metadata", R"({"__metadata__":)" + deep, {},
         "__metadata__ must be an object of strings, got an array"},
        {"deep nesting in a shape", R"({"a":{"dtype":"F32","shape":)" + deep, {},
         "tensor 'a': shape entries must be non-negative integers, got an array"},
        {"BOOL byte not 0 or 1", R"({"m":{"dtype":"BOOL","shape":[3],"data_offsets":[0,3]}})",
         {0, 1, 2}, "tensor 'm': BOOL element 2 is byte 2; it must be 0 or 1"},
    };
}

}  // namespace

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

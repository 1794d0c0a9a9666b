// The malformed safetensors headers of tests/nn/test_safetensors_malformed.cpp,
// one per rule of the format, with the message each must produce. Free of
// Catch2, so that the fuzzer's seed corpus (tests/fuzz/fuzz_seeds.cpp) starts
// from the same cases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::test {

using Bytes = std::vector<uint8_t>;

/// The 8-byte little-endian encoding of v, written out byte by byte.
inline Bytes le64(uint64_t v) {
    Bytes b(8);
    for (int i = 0; i < 8; ++i) b[size_t(i)] = uint8_t(v >> (8 * i));
    return b;
}

/// A safetensors file: the length of `header` (as given: no padding added),
/// the header, then `data`.
inline Bytes file_bytes(const std::string& header, const Bytes& data) {
    Bytes b = le64(header.size());
    b.reserve(8 + header.size() + data.size());
    for (char c : header) b.push_back(uint8_t(c));
    for (uint8_t c : data) b.push_back(c);
    return b;
}

namespace safetensors_cases {

using namespace std::string_literals;

// A valid pair of entries: a = F32 [2, 2] at [0, 16), b = I64 [1] at [16, 24).
inline const std::string kA = R"("a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]})";
inline const std::string kB = R"("b":{"dtype":"I64","shape":[1],"data_offsets":[16,24]})";
// Entry `a` with its fields replaced by `fields`.
inline std::string a_with(const std::string& fields) { return "\"a\":{" + fields + "}"; }

struct Case {
    const char* what;
    std::string header;
    Bytes data;
    std::string message;  // expected in the error
};

inline Bytes zeros(size_t n) { return Bytes(n, 0); }

inline std::vector<Case> header_cases() {
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

}  // namespace safetensors_cases
}  // namespace ember::test

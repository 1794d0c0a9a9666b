// Crafted IDX bytes, free of Catch2: headers, random payloads, and the bad
// headers of tests/data/test_idx.cpp with the message each must produce,
// shared with the fuzzer's seed corpus (tests/fuzz/fuzz_seeds.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::test {

using Bytes = std::vector<uint8_t>;

/// An IDX header: 00 00 type ndims, then each size as a big-endian u32.
inline Bytes idx_header(uint8_t type, const std::vector<uint32_t>& dims) {
    Bytes b = {0, 0, type, uint8_t(dims.size())};
    for (uint32_t d : dims) {
        b.push_back(uint8_t(d >> 24));
        b.push_back(uint8_t(d >> 16));
        b.push_back(uint8_t(d >> 8));
        b.push_back(uint8_t(d));
    }
    return b;
}

inline Bytes concat(Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

/// n pseudo-random bytes (a fixed LCG: the tests need variety, not quality).
inline Bytes random_bytes(size_t n, uint32_t seed) {
    Bytes b(n);
    uint32_t s = seed * 2654435761u + 1;
    for (auto& x : b) {
        s = s * 1664525u + 1013904223u;
        x = uint8_t(s >> 24);
    }
    return b;
}

/// A malformed IDX file and the message read_idx must give for it (raw or gzip).
struct IdxCase {
    Bytes bytes;
    std::string message;
};

inline std::vector<IdxCase> idx_bad_header_cases() {
    return {
        {{}, "truncated header: 0 bytes, the magic number alone needs 4"},
        {{0, 0}, "truncated header: 2 bytes"},
        {{1, 0, 8, 1, 0, 0, 0, 0}, "bad magic number 01 00 08 01"},
        {{0, 0, 0x0A, 1, 0, 0, 0, 0}, "unknown data type code 0x0A"},
        {{0, 0, 8, 0}, "0 dims in the header"},
        {idx_header(0x08, {1, 1, 1, 1, 1, 1, 1, 1, 1}), "9 dims in the header"},
        {{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3},
         "truncated header: 3 dims need 16 header bytes, the file holds 12"},
        // Eight dims of 2^32 - 1 f64 elements overflow int64.
        {idx_header(0x0E, std::vector<uint32_t>(8, 0xFFFFFFFFu)), "overflow"},
        // Data shorter and longer than the header says.
        {concat(idx_header(0x08, {3, 4, 5}), random_bytes(59, 2)),
         "truncated: header says [3, 4, 5] x 1 bytes = 60 bytes of data, the file holds 59"},
        {concat(idx_header(0x08, {3, 4, 5}), random_bytes(61, 2)), "oversized"},
    };
}

}  // namespace ember::test

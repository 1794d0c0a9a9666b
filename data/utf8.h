// UTF-8, strictly: one code point at a time, rejecting what RFC 3629 forbids
// (overlong forms, surrogates, code points past U+10FFFF, cut sequences), so
// a character tokenizer sees every character once and a binary file is
// recognized at its first bad byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ember::data {

/// Decodes the code point at s[pos] into `cp` and advances `pos` past it;
/// false (pos unchanged) if the bytes there are not valid UTF-8.
inline bool decode_utf8(std::string_view s, size_t& pos, char32_t& cp) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char b0 = byte(pos);
    if (b0 < 0x80) {
        cp = b0;
        ++pos;
        return true;
    }
    int extra;
    char32_t c, min;
    if ((b0 & 0xE0) == 0xC0) {
        extra = 1, c = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        extra = 2, c = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        extra = 3, c = b0 & 0x07, min = 0x10000;
    } else {
        return false;  // a continuation byte or 0xF8..0xFF where a character starts
    }
    if (pos + size_t(extra) >= s.size()) return false;  // cut short by the end
    for (int k = 1; k <= extra; ++k) {
        const unsigned char b = byte(pos + size_t(k));
        if ((b & 0xC0) != 0x80) return false;
        c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return false;
    cp = c;
    pos += size_t(extra) + 1;
    return true;
}

/// The UTF-8 bytes of code point `cp` (valid: at most U+10FFFF, no surrogate).
inline std::string encode_utf8(char32_t cp) {
    std::string out;
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
    return out;
}

}  // namespace ember::data

// Character- and byte-level tokenizers and their JSON form.
#include "data/tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "core/error.h"
#include "data/utf8.h"

namespace ember::data {

namespace {

// "U+00E9 ('é')": a character for messages; control characters by code only.
std::string describe(char32_t cp) {
    char code[16];
    std::snprintf(code, sizeof code, "U+%04X", unsigned(cp));
    return cp < 0x20 || cp == 0x7F ? std::string(code) : std::string(code) + " ('" + encode_utf8(cp) + "')";
}

}  // namespace

Tokenizer Tokenizer::bytes() { return Tokenizer(); }

Tokenizer Tokenizer::chars(std::vector<char32_t> vocab) {
    std::sort(vocab.begin(), vocab.end());
    vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
    EMBER_CHECK(!vocab.empty(), "Tokenizer: a character tokenizer needs at least one character");
    for (char32_t c : vocab)
        EMBER_CHECK(c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF),
                    "Tokenizer: code point ", uint32_t(c), " is not a character");
    Tokenizer t;
    t.kind_ = Kind::chars;
    t.vocab_ = std::move(vocab);
    return t;
}

Tokenizer Tokenizer::chars_of(std::string_view utf8, const std::string& source) {
    std::vector<bool> seen_ascii(128, false);
    std::vector<char32_t> vocab;
    for (size_t pos = 0; pos < utf8.size();) {
        const size_t at = pos;
        char32_t cp;
        EMBER_CHECK(decode_utf8(utf8, pos, cp), source, ": byte offset ", at,
                    ": invalid UTF-8 (a binary file? try --tokenizer byte)");
        if (cp < 128) {
            if (!seen_ascii[cp]) seen_ascii[cp] = true, vocab.push_back(cp);
        } else {
            vocab.push_back(cp);
        }
    }
    EMBER_CHECK(!vocab.empty(), source, ": no text to build a vocabulary from");
    return chars(std::move(vocab));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const std::string& source,
                                       int64_t offset) const {
    std::vector<int32_t> out;
    out.reserve(text.size());
    if (kind_ == Kind::bytes) {
        for (char c : text) out.push_back(int32_t(static_cast<unsigned char>(c)));
        return out;
    }
    for (size_t pos = 0; pos < text.size();) {
        const size_t at = pos;
        char32_t cp;
        EMBER_CHECK(decode_utf8(text, pos, cp), source, ": byte offset ", offset + int64_t(at),
                    ": invalid UTF-8 (a binary file? try --tokenizer byte)");
        const auto it = std::lower_bound(vocab_.begin(), vocab_.end(), cp);
        EMBER_CHECK(it != vocab_.end() && *it == cp, source, ": byte offset ", offset + int64_t(at),
                    ": character ", describe(cp), " is not in the tokenizer's vocabulary of ",
                    vocab_.size(), " characters");
        out.push_back(int32_t(it - vocab_.begin()));
    }
    return out;
}

std::string Tokenizer::decode(int32_t token) const {
    EMBER_CHECK(token >= 0 && token < vocab_size(), "Tokenizer: token ", token,
                " is outside the vocabulary of ", vocab_size());
    if (kind_ == Kind::bytes) return std::string(1, char(token));
    return encode_utf8(vocab_[size_t(token)]);
}

std::string Tokenizer::decode(const std::vector<int32_t>& tokens) const {
    std::string out;
    for (int32_t t : tokens) out += decode(t);
    return out;
}

std::string Tokenizer::to_json() const {
    nlohmann::json j;
    j["kind"] = kind_name();
    if (kind_ == Kind::chars) {
        nlohmann::json v = nlohmann::json::array();
        for (char32_t c : vocab_) v.push_back(encode_utf8(c));
        j["vocab"] = v;
    }
    return j.dump();
}

Tokenizer Tokenizer::from_json(const std::string& text) {
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    EMBER_CHECK(!j.is_discarded() && j.is_object(), "Tokenizer: the JSON does not parse");
    EMBER_CHECK(j.contains("kind") && j["kind"].is_string(), "Tokenizer: 'kind' is missing");
    const std::string kind = j["kind"].get<std::string>();
    if (kind == "byte") return bytes();
    EMBER_CHECK(kind == "char", "Tokenizer: unknown kind '", kind, "' (char or byte)");
    EMBER_CHECK(j.contains("vocab") && j["vocab"].is_array(), "Tokenizer: 'vocab' is missing");
    std::vector<char32_t> vocab;
    for (const auto& e : j["vocab"]) {
        EMBER_CHECK(e.is_string(), "Tokenizer: a vocabulary entry is not a string");
        const std::string s = e.get<std::string>();
        size_t pos = 0;
        char32_t cp = 0;
        EMBER_CHECK(!s.empty() && decode_utf8(s, pos, cp) && pos == s.size(),
                    "Tokenizer: vocabulary entry '", s, "' is not one character");
        vocab.push_back(cp);
    }
    // Token i is entry i: entries out of order would renumber the tokens.
    EMBER_CHECK(std::adjacent_find(vocab.begin(), vocab.end(), std::greater_equal<char32_t>()) ==
                    vocab.end(),
                "Tokenizer: the vocabulary is not in strictly increasing code-point order");
    return chars(std::move(vocab));
}

}  // namespace ember::data

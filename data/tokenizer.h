// Tokenizers for text: character-level (the vocabulary is a corpus's
// characters, sorted by code point) and byte-level (the 256 byte values).
// encode/decode, and a JSON form that a run keeps beside its weights
// (tokenizer.json, and the weights' "ember.tokenizer" metadata) so that
// `ember generate` needs nothing but the run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::data {

class Tokenizer {
  public:
    enum class Kind { chars, bytes };

    /// The byte tokenizer: token b is byte b.
    static Tokenizer bytes();
    /// The character tokenizer of `vocab` (code points; sorted and deduplicated here).
    static Tokenizer chars(std::vector<char32_t> vocab);
    /// The character tokenizer of the characters `utf8` holds; an Error
    /// names `source` and the byte offset of the first invalid UTF-8.
    static Tokenizer chars_of(std::string_view utf8, const std::string& source = "text");
    /// Reads the JSON to_json wrote; an Error names what is wrong.
    static Tokenizer from_json(const std::string& json);

    Kind kind() const { return kind_; }
    /// "char" or "byte".
    const char* kind_name() const { return kind_ == Kind::chars ? "char" : "byte"; }
    int64_t vocab_size() const { return kind_ == Kind::bytes ? 256 : int64_t(vocab_.size()); }
    /// The characters of a char tokenizer (token i is vocab()[i]).
    const std::vector<char32_t>& vocab() const { return vocab_; }

    /// The tokens of `text`. Chars: an Error names `source`, the byte offset
    /// (plus `offset`) and the character when it is invalid UTF-8 or not in
    /// the vocabulary.
    std::vector<int32_t> encode(std::string_view text, const std::string& source = "text",
                                int64_t offset = 0) const;
    /// The text of `tokens`; an Error for a token outside the vocabulary.
    std::string decode(const std::vector<int32_t>& tokens) const;
    /// The text of one token.
    std::string decode(int32_t token) const;

    /// {"kind": "char", "vocab": ["\n", " ", ...]} or {"kind": "byte"}.
    std::string to_json() const;

  private:
    Kind kind_ = Kind::bytes;
    std::vector<char32_t> vocab_;  // chars: sorted code points
};

}  // namespace ember::data

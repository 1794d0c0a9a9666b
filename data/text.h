// Text for language models: a corpus of UTF-8 documents split into training
// and validation by document (Debian's fortunes by default), encoded by a
// Tokenizer, and cut into windows of block + 1 tokens that the Loader
// batches (TokenWindows: input = the first block tokens, target = the next
// token at each position). docs/data.md, "Text".
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset.h"
#include "fashion_mnist.h"
#include "tokenizer.h"

namespace ember::data {

/// A piece of a corpus and where it came from (for error messages).
struct TextDocument {
    std::string text;
    std::string file;
    int64_t offset = 0;  ///< byte offset of text in file
};

/// UTF-8 documents split into training and validation by document, never by
/// the position in one concatenated stream (whose tail would be other
/// topics than the rest).
class TextCorpus {
  public:
    /// The most bytes a corpus may hold.
    static constexpr int64_t kMaxBytes = int64_t(1) << 30;

    /// $EMBER_DATA/fortunes when EMBER_DATA is set, else Debian's
    /// /usr/share/games/fortunes (package `fortunes`).
    static std::string default_fortunes_dir();
    /// Debian's fortunes in `dir` (default_fortunes_dir() when empty): every
    /// regular file that is not a .dat or .u8 index, in name order; each
    /// fortune (the text between lines holding only "%") is a document, and
    /// every 10th one (the 10th, 20th, ...) is validation.
    static TextCorpus fortunes(const std::string& dir = "");
    /// A file or a directory (its regular files, not hidden, not recursive,
    /// in name order). With 10 files or more each file is a document and
    /// every 10th file is validation; otherwise the last 10 % of each file
    /// (from the start of a line) is validation.
    static TextCorpus from_path(const std::string& path);

    /// "fortunes" or the path.
    const std::string& name() const { return name_; }
    const std::vector<TextDocument>& documents(Split split) const {
        return split == Split::train ? train_ : validation_;
    }
    /// Bytes of text in both splits.
    int64_t bytes() const;

    /// The character tokenizer of the whole corpus (both splits, and the
    /// newline that separates documents). An Error names the file and byte
    /// offset of invalid UTF-8 or of a NUL byte (a binary file).
    Tokenizer char_tokenizer() const;
    /// The tokens of a split: its documents in order, each followed by a
    /// newline (so fortunes are separated by blank lines). Errors name the
    /// file and byte offset.
    std::vector<int32_t> encode(const Tokenizer& tokenizer, Split split) const;

  private:
    std::string name_;
    std::vector<TextDocument> train_, validation_;
};

/// Windows of block + 1 consecutive tokens, one every `stride` tokens:
/// sample i's input is tokens[i·stride, i·stride + block), its target
/// tokens[i·stride + 1, i·stride + block + 1) (both i64 [block]). Training
/// uses stride 1 (every position; the Loader draws an epoch's windows from
/// (seed, epoch)), validation stride = block (each token predicted once).
class TokenWindows : public Dataset {
  public:
    /// An Error names `name` when the tokens are fewer than one window.
    TokenWindows(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block, int64_t stride,
                 const std::string& name);

    int64_t size() const override { return size_; }
    Shape sample_shape() const override { return {block_}; }
    SampleKind kind() const override { return SampleKind::tokens; }
    /// Not an image: an Error (token datasets are read with read_tokens).
    int64_t read(int64_t i, float* out) const override;
    void read_tokens(int64_t i, int64_t* input, int64_t* target) const override;
    int64_t bytes_per_sample() const override { return (block_ + 1) * int64_t(sizeof(int32_t)); }

    int64_t block() const { return block_; }
    const std::vector<int32_t>& tokens() const { return *tokens_; }

  private:
    std::shared_ptr<const std::vector<int32_t>> tokens_;
    int64_t block_, stride_, size_;
};

}  // namespace ember::data

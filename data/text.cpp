// Text corpora (fortunes, a file, a directory), their split by document, the
// character vocabulary, encoding, and token windows.
#include "data/text.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/file.h"
#include "data/utf8.h"

namespace ember::data {

namespace {

namespace fs = std::filesystem;

// The regular files of `dir` (not hidden; `keep` decides), in name order.
std::vector<std::string> files_in(const std::string& dir, bool (*keep)(const std::string&)) {
    std::error_code ec;
    EMBER_CHECK(fs::is_directory(dir, ec), "text: ", dir, " is not a directory");
    std::vector<std::string> out;
    for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.empty() || name[0] == '.' || !e.is_regular_file(ec) || !keep(name)) continue;
        out.push_back(e.path().string());
    }
    EMBER_CHECK(!ec, "text: cannot list ", dir, ": ", ec.message());
    std::sort(out.begin(), out.end());
    return out;
}

// A whole file, within the corpus's budget of `left` bytes.
std::string read_text(const std::string& path, int64_t& left) {
    RegularFile f = open_regular_file(path, "text " + path);
    EMBER_CHECK(int64_t(f.size) <= left, "text: ", path, ": the corpus would exceed ",
                TextCorpus::kMaxBytes, " bytes");
    left -= int64_t(f.size);
    std::string text(f.size, '\0');
    read_exact(f.fd.get(), text.data(), f.size, 0, "text " + path);
    return text;
}

// Where the last ~10 % of `text` begins: the start of the first line at or
// after 90 % (else of the last line before it; else a character boundary).
size_t validation_cut(const std::string& text) {
    const size_t at = text.size() - text.size() / 10;
    if (at >= text.size()) return text.size();
    const size_t after = text.find('\n', at);
    if (after != std::string::npos && after + 1 < text.size()) return after + 1;
    const size_t before = at > 0 ? text.rfind('\n', at - 1) : std::string::npos;
    if (before != std::string::npos && before + 1 < text.size()) return before + 1;
    size_t cut = at;
    while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;
    return cut;
}

bool is_fortune_file(const std::string& name) {
    const auto ends = [&](const char* suffix) {
        const std::string s(suffix);
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    return !ends(".dat") && !ends(".u8");
}

bool any_file(const std::string&) { return true; }

}  // namespace

std::string TextCorpus::default_fortunes_dir() {
    const char* env = std::getenv("EMBER_DATA");
    if (env && *env) return (fs::path(env) / "fortunes").string();
    return "/usr/share/games/fortunes";
}

TextCorpus TextCorpus::fortunes(const std::string& dir_in) {
    const std::string dir = dir_in.empty() ? default_fortunes_dir() : dir_in;
    EMBER_CHECK(fs::is_directory(dir), "text: fortunes: ", dir,
                " does not exist (install Debian's fortunes package — tools/dev setup does — or "
                "set EMBER_DATA to a folder with a fortunes/ directory)");
    TextCorpus c;
    c.name_ = "fortunes";
    int64_t left = kMaxBytes, index = 0;
    for (const std::string& path : files_in(dir, is_fortune_file)) {
        const std::string text = read_text(path, left);
        // Lines of exactly "%" separate fortunes; each fortune keeps its
        // lines and their newlines.
        size_t start = 0, line = 0;
        auto close = [&](size_t end) {
            if (end > start) {
                TextDocument d{text.substr(start, end - start), path, int64_t(start)};
                (index % 10 == 9 ? c.validation_ : c.train_).push_back(std::move(d));
                ++index;
            }
        };
        while (line < text.size()) {
            size_t eol = text.find('\n', line);
            const size_t next = eol == std::string::npos ? text.size() : eol + 1;
            if (eol == std::string::npos) eol = text.size();
            if (eol - line == 1 && text[line] == '%') {
                close(line);
                start = next;
            }
            line = next;
        }
        close(text.size());
    }
    EMBER_CHECK(!c.train_.empty() && !c.validation_.empty(), "text: fortunes: ", dir,
                " holds ", index, " fortunes; at least 10 are needed (every 10th is validation)");
    return c;
}

TextCorpus TextCorpus::from_path(const std::string& path) {
    std::error_code ec;
    EMBER_CHECK(fs::exists(path, ec), "text: ", path, ": no such file or directory");
    TextCorpus c;
    c.name_ = path;
    int64_t left = kMaxBytes;
    const std::vector<std::string> files =
        fs::is_directory(path, ec) ? files_in(path, any_file) : std::vector<std::string>{path};
    EMBER_CHECK(!files.empty(), "text: ", path, " holds no files");
    for (size_t i = 0; i < files.size(); ++i) {
        std::string text = read_text(files[i], left);
        if (text.empty()) continue;
        if (files.size() >= 10) {  // whole files: every 10th is validation
            (i % 10 == 9 ? c.validation_ : c.train_).push_back({std::move(text), files[i], 0});
            continue;
        }
        const size_t cut = validation_cut(text);
        if (cut > 0) c.train_.push_back({text.substr(0, cut), files[i], 0});
        if (cut < text.size()) c.validation_.push_back({text.substr(cut), files[i], int64_t(cut)});
    }
    EMBER_CHECK(!c.train_.empty() || !c.validation_.empty(), "text: ", path,
                " is empty: no text to train on");
    EMBER_CHECK(!c.train_.empty() && !c.validation_.empty(), "text: ", path,
                " is too short to split into training and validation text");
    return c;
}

int64_t TextCorpus::bytes() const {
    int64_t n = 0;
    for (const auto* docs : {&train_, &validation_})
        for (const TextDocument& d : *docs) n += int64_t(d.text.size());
    return n;
}

Tokenizer TextCorpus::char_tokenizer() const {
    std::vector<bool> ascii(128, false);
    std::vector<char32_t> vocab = {U'\n'};
    for (const auto* docs : {&train_, &validation_})
        for (const TextDocument& d : *docs)
            for (size_t pos = 0; pos < d.text.size();) {
                const size_t at = pos;
                char32_t cp;
                EMBER_CHECK(decode_utf8(d.text, pos, cp), "text: ", d.file, ": byte offset ",
                            d.offset + int64_t(at),
                            ": invalid UTF-8 (a binary file? --tokenizer byte reads any bytes)");
                EMBER_CHECK(cp != 0, "text: ", d.file, ": byte offset ", d.offset + int64_t(at),
                            ": a NUL byte (a binary file? --tokenizer byte reads any bytes)");
                if (cp >= 128)
                    vocab.push_back(cp);
                else if (!ascii[cp])
                    ascii[cp] = true, vocab.push_back(cp);
            }
    return Tokenizer::chars(std::move(vocab));
}

std::vector<int32_t> TextCorpus::encode(const Tokenizer& tokenizer, Split split) const {
    const std::vector<int32_t> newline = tokenizer.encode("\n", "the document separator");
    std::vector<int32_t> out;
    for (const TextDocument& d : documents(split)) {
        const std::vector<int32_t> t = tokenizer.encode(d.text, "text: " + d.file, d.offset);
        out.insert(out.end(), t.begin(), t.end());
        out.insert(out.end(), newline.begin(), newline.end());
    }
    return out;
}

TokenWindows::TokenWindows(std::shared_ptr<const std::vector<int32_t>> tokens, int64_t block,
                           int64_t stride, const std::string& name)
    : tokens_(std::move(tokens)), block_(block), stride_(stride) {
    EMBER_CHECK(tokens_ != nullptr, "TokenWindows: no tokens");
    EMBER_CHECK(block >= 1 && stride >= 1, "TokenWindows: block ", block, " and stride ", stride,
                " must be >= 1");
    const int64_t n = int64_t(tokens_->size());
    EMBER_CHECK(n >= block + 1, name, " has ", n, " tokens, fewer than one window of block + 1 = ",
                block + 1, " (a longer text, or a smaller --block)");
    size_ = (n - block - 1) / stride + 1;
}

int64_t TokenWindows::read(int64_t, float*) const {
    EMBER_FAIL("TokenWindows: samples are tokens, read with read_tokens (the Loader does)");
}

void TokenWindows::read_tokens(int64_t i, int64_t* input, int64_t* target) const {
    check_index(i, "TokenWindows");
    const int32_t* t = tokens_->data() + i * stride_;
    for (int64_t j = 0; j < block_; ++j) {
        input[j] = t[j];
        target[j] = t[j + 1];
    }
}

}  // namespace ember::data

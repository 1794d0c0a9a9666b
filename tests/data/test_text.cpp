// Text data: the UTF-8 decoder, the tokenizers and their JSON, corpora split
// by document (fortunes, a file, a directory) with their errors, token
// windows, and the Loader batching tokens.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "data/loader.h"
#include "data/subset.h"
#include "data/text.h"
#include "data/utf8.h"
#include "support/data_support.h"

using namespace ember;
using namespace ember::data;
using ember::test::TempDir;

namespace {

void write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    REQUIRE(out.good());
}

// Random text of printable ASCII, newlines and a few multi-byte characters.
std::string random_text(std::mt19937& rng, size_t n) {
    static const std::vector<std::string> extra = {"é", "ü", "€", "😀", "\n", "\n", "\t"};
    std::string s;
    while (s.size() < n) {
        const int r = int(rng() % 100);
        if (r < 8)
            s += extra[rng() % extra.size()];
        else
            s += char(' ' + rng() % 95);
    }
    return s;
}

}  // namespace

TEST_CASE("decode_utf8: valid sequences round-trip, every forbidden form is refused", "[data][text]") {
    for (char32_t cp : {U'\0', U'A', U'\x7f', U'\x80', U'\x7ff', U'\x800', U'\xfff0', U'\x10000',
                        U'\x10ffff'}) {
        const std::string bytes = encode_utf8(cp);
        size_t pos = 0;
        char32_t back = 1;
        REQUIRE(decode_utf8(bytes, pos, back));
        CHECK(back == cp);
        CHECK(pos == bytes.size());
    }
    const std::vector<std::string> bad = {
        "\x80",              // a continuation byte where a character starts
        "\xC3",              // cut short
        "\xC0\xAF",          // overlong '/'
        "\xE0\x80\xAF",      // overlong, 3 bytes
        "\xED\xA0\x80",      // a surrogate (U+D800)
        "\xF4\x90\x80\x80",  // past U+10FFFF
        "\xF8\x88\x80\x80",  // a 5-byte lead
        "\xE2\x82",          // cut short, 3 bytes
        "\xC3\x28",          // a non-continuation second byte
    };
    for (const std::string& b : bad) {
        size_t pos = 0;
        char32_t cp;
        CHECK_FALSE(decode_utf8(b, pos, cp));
        CHECK(pos == 0);
    }
}

TEST_CASE("Tokenizer: chars of a text are sorted; encode and decode invert each other",
          "[data][text]") {
    std::mt19937 rng(7);
    const std::string text = random_text(rng, 5000);
    const Tokenizer t = Tokenizer::chars_of(text);
    // An independent count of the distinct code points.
    std::set<char32_t> distinct;
    for (size_t pos = 0; pos < text.size();) {
        char32_t cp;
        REQUIRE(decode_utf8(text, pos, cp));
        distinct.insert(cp);
    }
    CHECK(t.vocab_size() == int64_t(distinct.size()));
    CHECK(std::is_sorted(t.vocab().begin(), t.vocab().end()));
    const std::vector<int32_t> ids = t.encode(text);
    for (int32_t id : ids) REQUIRE((id >= 0 && id < t.vocab_size()));
    CHECK(t.decode(ids) == text);
    // Token i is the i-th smallest code point.
    CHECK(t.decode(0) == encode_utf8(*distinct.begin()));

    const Tokenizer b = Tokenizer::bytes();
    CHECK(b.vocab_size() == 256);
    const std::string binary("\x00\xff\x80 a", 5);
    CHECK(b.encode(binary) == std::vector<int32_t>{0, 255, 128, 32, 97});
    CHECK(b.decode(b.encode(binary)) == binary);
}

TEST_CASE("Tokenizer: JSON round trip; bad JSON and unknown characters are errors", "[data][text]") {
    const Tokenizer t = Tokenizer::chars_of("héllo wörld\n");
    const Tokenizer back = Tokenizer::from_json(t.to_json());
    CHECK(back.kind() == Tokenizer::Kind::chars);
    CHECK(back.vocab() == t.vocab());
    CHECK(Tokenizer::from_json(Tokenizer::bytes().to_json()).vocab_size() == 256);

    // Byte offsets count bytes: é and ö take two each.
    REQUIRE_THROWS_WITH_MSG(t.encode("hé wö!", "prompt"),
                            "prompt: byte offset 7: character U+0021 ('!') is not in the "
                            "tokenizer's vocabulary of 10 characters");
    REQUIRE_THROWS_WITH_MSG(t.encode("h\xC3", "prompt", 100), "prompt: byte offset 101: invalid UTF-8");
    REQUIRE_THROWS_WITH_MSG(t.decode(10), "token 10 is outside the vocabulary of 10");
    REQUIRE_THROWS_WITH_MSG(Tokenizer::from_json("{"), "does not parse");
    REQUIRE_THROWS_WITH_MSG(Tokenizer::from_json(R"({"kind":"word"})"), "unknown kind 'word'");
    REQUIRE_THROWS_WITH_MSG(Tokenizer::from_json(R"({"kind":"char"})"), "'vocab' is missing");
    REQUIRE_THROWS_WITH_MSG(Tokenizer::from_json(R"({"kind":"char","vocab":["ab"]})"),
                            "is not one character");
    // Out of order would renumber the tokens: refused, not sorted silently.
    REQUIRE_THROWS_WITH_MSG(Tokenizer::from_json(R"({"kind":"char","vocab":["b","a"]})"),
                            "strictly increasing");
    REQUIRE_THROWS_WITH_MSG(Tokenizer::from_json(R"({"kind":"char","vocab":["a","a"]})"),
                            "strictly increasing");
}

TEST_CASE("TextCorpus::fortunes: '%' lines separate fortunes; every 10th is validation",
          "[data][text]") {
    TempDir dir;
    // 23 fortunes over two files (name order: a, b), an index file and a
    // .u8 link that must be skipped, and a hidden file.
    std::string a, b;
    for (int i = 0; i < 15; ++i) a += "fortune " + std::to_string(i) + "\nline two\n%\n";
    for (int i = 15; i < 23; ++i) b += "fortune " + std::to_string(i) + "\n%\n";
    b += "%\n";  // an empty fortune is no document
    write_text(dir.file("b"), b);
    write_text(dir.file("a"), a);
    write_text(dir.file("a.dat"), std::string("\x00\x01\x02", 3));
    write_text(dir.file("a.u8"), "not a fortune\n%\n");
    write_text(dir.file(".hidden"), "not a fortune\n%\n");
    const TextCorpus c = TextCorpus::fortunes(dir.path);
    CHECK(c.name() == "fortunes");
    const auto& train = c.documents(Split::train);
    const auto& val = c.documents(Split::validation);
    REQUIRE(train.size() + val.size() == 23);
    REQUIRE(val.size() == 2);  // fortunes 9 and 19
    CHECK(val[0].text == "fortune 9\nline two\n");
    CHECK(val[0].file == dir.file("a"));
    CHECK(val[0].offset == int64_t(a.find("fortune 9")));
    CHECK(val[1].text == "fortune 19\n");
    CHECK(val[1].file == dir.file("b"));
    CHECK(train[0].text == "fortune 0\nline two\n");
    // Encoded: each fortune then a newline, so fortunes are blank-line separated.
    const Tokenizer t = c.char_tokenizer();
    CHECK(t.decode(c.encode(t, Split::validation)) == "fortune 9\nline two\n\nfortune 19\n\n");
}

TEST_CASE("TextCorpus::fortunes: the Debian package's corpus", "[data][text][fortunes]") {
    const TextCorpus c = TextCorpus::fortunes();
    const int64_t n = int64_t(c.documents(Split::train).size() + c.documents(Split::validation).size());
    CHECK(n > 10000);
    CHECK(int64_t(c.documents(Split::validation).size()) == n / 10);
    CHECK(c.bytes() > 2'000'000);
    const Tokenizer t = c.char_tokenizer();
    CHECK(t.vocab_size() > 90);
    CHECK(t.vocab_size() < 200);
    const std::vector<int32_t> val = c.encode(t, Split::validation);
    CHECK(int64_t(val.size()) > 100'000);
}

TEST_CASE("TextCorpus::from_path: a file keeps its last 10 % (from a line start) for validation",
          "[data][text]") {
    TempDir dir;
    std::string text;
    for (int i = 0; i < 100; ++i) text += "line " + std::to_string(i) + "\n";
    write_text(dir.file("one.txt"), text);
    const TextCorpus c = TextCorpus::from_path(dir.file("one.txt"));
    const auto& train = c.documents(Split::train);
    const auto& val = c.documents(Split::validation);
    REQUIRE(train.size() == 1);
    REQUIRE(val.size() == 1);
    CHECK(train[0].text + val[0].text == text);
    CHECK(val[0].text.rfind("line ", 0) == 0);  // starts a line
    CHECK(double(val[0].text.size()) <= 0.1 * double(text.size()) + 1);
    CHECK(double(val[0].text.size()) >= 0.09 * double(text.size()));
    CHECK(val[0].offset == int64_t(train[0].text.size()));
}

TEST_CASE("TextCorpus::from_path: a directory of 10 files or more splits by file", "[data][text]") {
    TempDir dir;
    for (int i = 0; i < 12; ++i) {
        char name[16];
        std::snprintf(name, sizeof name, "f%02d.txt", i);
        write_text(dir.file(name), "file " + std::to_string(i) + "\n");
    }
    const TextCorpus c = TextCorpus::from_path(dir.path);
    REQUIRE(c.documents(Split::train).size() == 11);
    REQUIRE(c.documents(Split::validation).size() == 1);
    CHECK(c.documents(Split::validation)[0].text == "file 9\n");
    // Fewer files: each is cut.
    TempDir few;
    write_text(few.file("a.txt"), std::string(200, 'a') + "\n" + std::string(50, 'b') + "\n");
    write_text(few.file("b.txt"), "x\ny\nz\nw\nv\nu\nt\ns\nr\nq\np\n");
    const TextCorpus d = TextCorpus::from_path(few.path);
    CHECK(d.documents(Split::train).size() == 2);
    CHECK(d.documents(Split::validation).size() == 2);
}

TEST_CASE("TextCorpus: bad input is one error naming the file and byte offset", "[data][text]") {
    TempDir dir;
    REQUIRE_THROWS_WITH_MSG(TextCorpus::from_path(dir.file("missing")), "no such file or directory");
    REQUIRE_THROWS_WITH_MSG(TextCorpus::from_path(dir.path), "holds no files");
    write_text(dir.file("empty.txt"), "");
    REQUIRE_THROWS_WITH_MSG(TextCorpus::from_path(dir.file("empty.txt")), "is empty");
    write_text(dir.file("short.txt"), "one line");
    REQUIRE_THROWS_WITH_MSG(TextCorpus::from_path(dir.file("short.txt")),
                            "too short to split into training and validation");

    std::string text(300, 'a');
    text[250] = '\xC3';  // a cut 2-byte sequence at offset 250 (in the validation part)
    text += "\n";
    write_text(dir.file("bad.txt"), text);
    const TextCorpus bad = TextCorpus::from_path(dir.file("bad.txt"));
    REQUIRE_THROWS_WITH_MSG(bad.char_tokenizer(), dir.file("bad.txt") + ": byte offset 250: invalid UTF-8");
    // The byte tokenizer takes any bytes.
    CHECK(bad.encode(Tokenizer::bytes(), Split::validation).size() > 0);

    std::string binary(400, 'b');
    binary[17] = '\0';
    write_text(dir.file("nul.bin"), binary);
    REQUIRE_THROWS_WITH_MSG(TextCorpus::from_path(dir.file("nul.bin")).char_tokenizer(),
                            "nul.bin: byte offset 17: a NUL byte");
    REQUIRE_THROWS_WITH_MSG(TextCorpus::fortunes(dir.file("nothing")), "does not exist");
    // A corpus with fewer tokens than a window.
    auto few = std::make_shared<const std::vector<int32_t>>(std::vector<int32_t>{1, 2, 3});
    REQUIRE_THROWS_WITH_MSG(TokenWindows(few, 3, 1, "the validation text"),
                            "the validation text has 3 tokens, fewer than one window of block + 1 = 4");
}

TEST_CASE("TokenWindows: inputs and next-token targets at every stride", "[data][text]") {
    std::vector<int32_t> v(50);
    for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t((i * 7 + 3) % 11);
    auto tokens = std::make_shared<const std::vector<int32_t>>(v);
    for (int64_t stride : {1, 4, 8}) {
        const TokenWindows w(tokens, 8, stride, "t");
        CHECK(w.size() == (50 - 9) / stride + 1);
        CHECK(w.kind() == SampleKind::tokens);
        std::vector<int64_t> in(8), tg(8);
        for (int64_t i = 0; i < w.size(); ++i) {
            w.read_tokens(i, in.data(), tg.data());
            for (int64_t j = 0; j < 8; ++j) {
                REQUIRE(in[size_t(j)] == v[size_t(i * stride + j)]);
                REQUIRE(tg[size_t(j)] == v[size_t(i * stride + j + 1)]);
            }
        }
        // The last window ends at or before the last token.
        CHECK((w.size() - 1) * stride + 8 + 1 <= 50);
        REQUIRE_THROWS_WITH_MSG(w.read_tokens(w.size(), in.data(), tg.data()), "out of range");
    }
    std::vector<float> f(8);
    REQUIRE_THROWS_WITH_MSG(TokenWindows(tokens, 8, 1, "t").read(0, f.data()), "read with read_tokens");
}

TEST_CASE("Loader: token batches are [B, T] ids and targets; an epoch is samples_per_epoch windows",
          "[data][text][loader]") {
    std::vector<int32_t> v(3000);
    std::mt19937 rng(3);
    for (int32_t& x : v) x = int32_t(rng() % 97);
    auto tokens = std::make_shared<const std::vector<int32_t>>(v);
    auto windows = std::make_shared<const TokenWindows>(tokens, 16, 1, "t");
    for (int workers : {0, 2}) {
        Loader loader(windows, {.batch_size = 10, .seed = 5, .workers = workers,
                                .samples_per_epoch = 95});
        CHECK(loader.size() == 10);  // 95 windows: 9 full batches and one of 5
        const std::vector<int64_t> order = epoch_order(windows->size(), true, 5, 1);
        int64_t seen = 0;
        for (Batch& b : loader.epoch(1)) {
            REQUIRE(b.input.dtype() == DType::i64);
            REQUIRE(b.target.dtype() == DType::i64);
            REQUIRE(b.input.shape() == b.target.shape());
            REQUIRE(b.input.size(1) == 16);
            for (int64_t k = 0; k < b.input.size(0); ++k) {
                const int64_t start = order[size_t(seen + k)];  // window i starts at token i
                for (int64_t j = 0; j < 16; ++j) {
                    REQUIRE(b.input.data<int64_t>()[k * 16 + j] == v[size_t(start + j)]);
                    REQUIRE(b.target.data<int64_t>()[k * 16 + j] == v[size_t(start + j + 1)]);
                }
            }
            seen += b.input.size(0);
        }
        CHECK(seen == 95);
    }
    // Another epoch draws other windows.
    const auto e0 = epoch_order(windows->size(), true, 5, 0), e1 = epoch_order(windows->size(), true, 5, 1);
    CHECK(!std::equal(e0.begin(), e0.begin() + 95, e1.begin()));
    // Transforms are for images.
    REQUIRE_THROWS_WITH_MSG(Loader(windows, {}, Compose{RandomHorizontalFlip()}),
                            "this dataset's samples are tokens");
    // A Subset of windows is windows.
    auto sub = std::make_shared<const Subset>(windows, 40, 7);
    CHECK(sub->kind() == SampleKind::tokens);
    std::vector<int64_t> in(16), tg(16);
    sub->read_tokens(0, in.data(), tg.data());
    CHECK(in[0] == v[7]);
}

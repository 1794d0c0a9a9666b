// safetensors writing and reading: bit-exact round trips of every dtype and
// layout, a byte-exact golden file spelled out by hand from the format's
// rules, the writer's argument errors, and atomic replacement when a write
// fails (bad input, missing directory, a full disk, a rename that fails).
#include <signal.h>
#include <sys/resource.h>

#include <cstring>

#include "core/atomic_file.h"
#include "nn/safetensors.h"
#include "support/safetensors_files.h"

using namespace ember;
using namespace ember::test;
using nn::load_safetensors;
using nn::save_safetensors;

namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

constexpr DType kAllDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                                DType::i32, DType::i64, DType::u8,  DType::boolean};

// Requires `got` to hold exactly `want`'s names (in order), dtypes, shapes and bytes.
void check_same(const nn::TensorFile& got, const Named& want) {
    REQUIRE(got.tensors.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        const auto& [name, t] = got.tensors[i];
        INFO("tensor " << want[i].first << ": " << dtype_name(want[i].second.dtype()) << " "
                       << shape_str(want[i].second.shape()));
        CHECK(name == want[i].first);
        CHECK(t.dtype() == want[i].second.dtype());
        CHECK(t.shape() == want[i].second.shape());
        CHECK(t.device().is_cpu());
        CHECK(t.is_contiguous());
        CHECK(raw_bytes(t) == raw_bytes(want[i].second));
    }
}

// A tensor of one 16-bit dtype holding exactly `bits`.
Tensor from_bits16(const std::vector<uint16_t>& bits, DType dtype) {
    Tensor t = empty({int64_t(bits.size())}, {.dtype = dtype});
    std::memcpy(t.data_ptr(), bits.data(), bits.size() * 2);
    return t;
}

// Lowers the process's file size limit (RLIMIT_FSIZE) while it lives, with
// SIGXFSZ ignored so that a write past the limit fails with EFBIG instead.
class FileSizeLimit {
public:
    explicit FileSizeLimit(rlim_t bytes) {
        REQUIRE(getrlimit(RLIMIT_FSIZE, &saved_) == 0);
        handler_ = signal(SIGXFSZ, SIG_IGN);
        rlimit lower = saved_;
        lower.rlim_cur = bytes;
        REQUIRE(setrlimit(RLIMIT_FSIZE, &lower) == 0);
    }
    ~FileSizeLimit() {
        setrlimit(RLIMIT_FSIZE, &saved_);
        signal(SIGXFSZ, handler_);
    }

private:
    rlimit saved_{};
    void (*handler_)(int) = nullptr;
};

}  // namespace

TEST_CASE("safetensors: round trip of every dtype and layout is bit-exact", "[safetensors]") {
    ScratchDir dir("st-roundtrip");
    const std::vector<Shape> shapes = {{}, {0}, {1}, {7}, {3, 4}, {2, 0, 5}, {2, 3, 5}, {1, 1, 9}};
    Named in;
    uint64_t seed = 1;
    for (DType dt : kAllDTypes)
        for (const Shape& s : shapes) {
            const std::string name = str("layer.", dtype_name(dt), ".", shape_str(s));
            const Tensor t = random_bits(s, dt, seed++);
            in.push_back({name, t});
            if (t.dim() >= 1 && t.numel() > 1) {
                const Tensor strided = non_contiguous(t);
                REQUIRE(!strided.is_contiguous());
                in.push_back({name + ".strided", strided});
            }
        }
    // A broadcast view (stride 0) is written as the full tensor it shows.
    const Tensor row = random_bits({1, 4}, DType::f32, seed++);
    in.push_back({"broadcast", row.expand({3, 4})});
    const std::map<std::string, std::string> meta = {
        {"format", "pt"}, {"note", "caf\xc3\xa9 \xe2\x9c\x93 \"quoted\"\n"}, {"", "empty key"}};
    const std::string path = dir.file("model.safetensors");
    save_safetensors(path, in, meta);
    const nn::TensorFile got = load_safetensors(path);
    check_same(got, in);
    CHECK(got.metadata == meta);
    const Tensor& b = got.find("broadcast") ? *got.find("broadcast") : row;
    REQUIRE(b.shape() == Shape{3, 4});
    for (int64_t r = 0; r < 3; ++r) CHECK(raw_bytes(b.select(0, r)) == raw_bytes(row.select(0, 0)));
    // The writer pads its header so that the data starts 8-byte aligned.
    const Bytes file = read_bytes(path);
    REQUIRE(file.size() >= 8);
    CHECK(file[0] % 8 == 0);  // the low byte of the little-endian header length

    SECTION("find") {
        const auto want = std::find_if(in.begin(), in.end(),
                                       [](const auto& p) { return p.first == "layer.f32.[3, 4]"; });
        REQUIRE(want != in.end());
        REQUIRE(got.find("layer.f32.[3, 4]") != nullptr);
        CHECK(raw_bytes(*got.find("layer.f32.[3, 4]")) == raw_bytes(want->second));
        CHECK(got.find("layer.f32") == nullptr);
    }
    SECTION("no tensors, no metadata") {
        save_safetensors(path, {});
        CHECK(read_bytes(path) == file_bytes("{}      ", {}));
        const nn::TensorFile empty_file = load_safetensors(path);
        CHECK(empty_file.tensors.empty());
        CHECK(empty_file.metadata.empty());
    }
}

TEST_CASE("safetensors: f16 and bf16 keep NaN, inf, subnormal and signed-zero bits",
          "[safetensors]") {
    ScratchDir dir("st-bits");
    // f16: ±0, subnormals (smallest, largest, negative), largest normal, ±inf,
    // quiet and signalling NaNs with payloads, 1.0.
    const Tensor f16 = from_bits16({0x0000, 0x8000, 0x0001, 0x03ff, 0x8001, 0x7bff, 0x7c00,
                                    0xfc00, 0x7e00, 0x7c01, 0xfe01, 0x7d55, 0x3c00},
                                   DType::f16);
    // bf16: the same kinds of patterns for 8 exponent bits.
    const Tensor bf16 = from_bits16({0x0000, 0x8000, 0x0001, 0x007f, 0x807f, 0x7f7f, 0x7f80,
                                     0xff80, 0x7fc0, 0x7f81, 0xffc1, 0x7faa, 0x3f80},
                                    DType::bf16);
    // Strided views of the same bits, every other element of a wider buffer.
    const Named in = {{"f16", f16}, {"bf16", bf16}, {"f16.strided", non_contiguous(f16)},
                      {"bf16.strided", non_contiguous(bf16)}};
    REQUIRE(!in[2].second.is_contiguous());
    save_safetensors(dir.file("bits.safetensors"), in);
    const nn::TensorFile got = load_safetensors(dir.file("bits.safetensors"));
    check_same(got, in);
    CHECK(raw_bytes(got.tensors[2].second) == raw_bytes(f16));
    CHECK(raw_bytes(got.tensors[3].second) == raw_bytes(bf16));
}

TEST_CASE("safetensors: golden file, byte for byte", "[safetensors]") {
    ScratchDir dir("st-golden");
    // The file the format specifies for a = F32 [2] {1, -2.5} and b = I64 [1]
    // {7} with metadata format=pt: an 8-byte little-endian header length
    // (139 bytes of JSON + 5 spaces of padding = 144 = 0x90, so the data
    // starts at byte 152, a multiple of 8), the JSON, then the data with
    // offsets relative to its start.
    const std::string json =
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}";
    REQUIRE(json.size() == 139);
    const Bytes length = {0x90, 0, 0, 0, 0, 0, 0, 0};
    const Bytes data = {0x00, 0x00, 0x80, 0x3f,      // 1.0f
                        0x00, 0x00, 0x20, 0xc0,      // -2.5f
                        0x07, 0, 0, 0, 0, 0, 0, 0};  // int64 7
    Bytes golden;
    for (const std::string& part : {std::string(length.begin(), length.end()), json,
                                    std::string(5, ' '), std::string(data.begin(), data.end())})
        for (char c : part) golden.push_back(uint8_t(c));
    REQUIRE(golden.size() == 168);

    SECTION("ember reads the golden file") {
        write_bytes(dir.file("golden.safetensors"), golden);
        const nn::TensorFile f = load_safetensors(dir.file("golden.safetensors"));
        REQUIRE(f.tensors.size() == 2);
        CHECK(f.tensors[0].first == "a");
        CHECK(f.tensors[0].second.dtype() == DType::f32);
        CHECK(f.tensors[0].second.to_vector<float>() == std::vector<float>{1.0f, -2.5f});
        CHECK(f.tensors[1].first == "b");
        CHECK(f.tensors[1].second.dtype() == DType::i64);
        CHECK(f.tensors[1].second.to_vector<int64_t>() == std::vector<int64_t>{7});
        CHECK(f.metadata == std::map<std::string, std::string>{{"format", "pt"}});
    }
    SECTION("ember's writer produces exactly the golden bytes") {
        Tensor a = empty({2}, {.dtype = DType::f32});
        a.set({0}, 1.0);
        a.set({1}, -2.5);
        Tensor b = empty({1}, {.dtype = DType::i64});
        b.set({0}, 7);
        const std::string path = dir.file("written.safetensors");
        save_safetensors(path, {{"a", a}, {"b", b}}, {{"format", "pt"}});
        const Bytes written = read_bytes(path);
        // Field by field first, for a readable failure, then the whole file.
        REQUIRE(written.size() == golden.size());
        CHECK(Bytes(written.begin(), written.begin() + 8) == le64(144));
        CHECK(std::string(written.begin() + 8, written.begin() + 8 + 139) == json);
        CHECK(std::string(written.begin() + 147, written.begin() + 152) == "     ");
        CHECK(Bytes(written.begin() + 152, written.end()) == data);
        CHECK(written == golden);
        check_same(load_safetensors(path), {{"a", a}, {"b", b}});
    }
}

TEST_CASE("save_safetensors: argument errors, before any file is made", "[safetensors]") {
    ScratchDir dir("st-args");
    const std::string path = dir.file("w.safetensors");
    const Tensor t = random_bits({2, 3}, DType::f32, 5);
    REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"w", t}, {"b", t}, {"w", t}}),
                            "tensor 'w' appears twice");
    REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"", t}}), "a tensor has an empty name");
    REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"__metadata__", t}}),
                            "'__metadata__' is reserved");
    REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"bad\xff", t}}),
                            "tensor name 'bad\xff' is not valid UTF-8");
    REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"w", Tensor()}}), "tensor 'w' is undefined");
    REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"w", t}}, {{"k", "\xc3"}}),
                            "__metadata__ entry 'k' is not valid UTF-8");
    // Every message names the file.
    REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"", t}}), "save_safetensors: '" + path + "'");
    CHECK(dir.listing().empty());
}

TEST_CASE("load_safetensors: files that cannot be read", "[safetensors]") {
    ScratchDir dir("st-open");
    REQUIRE_THROWS_WITH_MSG(load_safetensors(dir.file("none.safetensors")),
                            "none.safetensors': cannot open: No such file or directory");
    REQUIRE_THROWS_WITH_MSG(load_safetensors(dir.path().string()),
                            "is a directory; a regular file is needed");
}

TEST_CASE("save_safetensors: a failed write leaves the old file and no temporary file",
          "[safetensors]") {
    ScratchDir dir("st-atomic");
    const std::string path = dir.file("w.safetensors");
    const Named old_tensors = {{"w", random_bits({4, 4}, DType::f32, 11)}};
    save_safetensors(path, old_tensors);
    const Bytes old = read_bytes(path);
    const std::vector<std::string> only_old = {"w.safetensors"};
    const Tensor t = random_bits({3}, DType::i64, 12);

    SECTION("invalid input") {
        REQUIRE_THROWS_WITH_MSG(save_safetensors(path, {{"x", t}, {"x", t}}), "appears twice");
    }
    SECTION("a directory that does not exist") {
        const std::string missing = dir.file("no/such/dir/w.safetensors");
        REQUIRE_THROWS_WITH_MSG(save_safetensors(missing, {{"x", t}}),
                                "cannot create the temporary file '" + dir.file("no/such/dir/") +
                                    atomic_temp_prefix("w.safetensors"));
        REQUIRE_THROWS_WITH_MSG(save_safetensors(missing, {{"x", t}}),
                                ": No such file or directory");
    }
    SECTION("the rename fails (the target is a directory)") {
        const std::string target = dir.file("sub");
        std::filesystem::create_directory(target);
        REQUIRE_THROWS_WITH_MSG(save_safetensors(target, {{"x", t}}), "cannot rename");
        CHECK(std::filesystem::is_directory(target));
        std::filesystem::remove(target);
    }
    SECTION("the disk fills midway through the data") {
        // A file size limit makes write() fail with EFBIG after the first
        // 4 KiB of a 256 KiB tensor (the signal it would send is ignored).
        const Tensor big = random_bits({1 << 16}, DType::f32, 13);
        std::string message;
        {
            FileSizeLimit limit(4096);
            try {
                save_safetensors(path, {{"big", big}});
            } catch (const Error& e) {
                message = e.what();
            }
        }
        CHECK_THAT(message, Catch::Matchers::Contains("save_safetensors: '" + path +
                                                      "': writing '" + dir.file(".w.safetensors.")));
        CHECK_THAT(message, Catch::Matchers::Contains("failed: File too large"));
    }
    CHECK(read_bytes(path) == old);
    CHECK(dir.listing() == only_old);
    check_same(load_safetensors(path), old_tensors);
}

TEST_CASE("save_safetensors: a successful write replaces the file", "[safetensors]") {
    ScratchDir dir("st-replace");
    const std::string path = dir.file("w.safetensors");
    save_safetensors(path, {{"w", random_bits({4, 4}, DType::f32, 21)}});
    const Named now = {{"v", random_bits({2, 5}, DType::bf16, 22)},
                       {"mask", random_bits({5}, DType::boolean, 23)}};
    save_safetensors(path, now, {{"step", "2"}});
    check_same(load_safetensors(path), now);
    CHECK(dir.listing() == std::vector<std::string>{"w.safetensors"});
    // A relative path (no directory part) works too.
    const auto cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir.path());
    save_safetensors("rel.safetensors", now);
    std::filesystem::current_path(cwd);
    check_same(load_safetensors(dir.file("rel.safetensors")), now);
}

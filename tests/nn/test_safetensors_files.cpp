// safetensors and the file system: what the reader refuses without blocking
// (named pipes, directories, /proc files), names of every valid length,
// saves through symbolic links, an empty path, and the temporary files of
// saves killed midway (removed by the next save, unless their writer lives).
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <thread>

#include "support/files.h"
#include "nn/module.h"
#include "nn/safetensors.h"
#include "nn/serialize.h"
#include "support/safetensors_files.h"

using namespace ember;
using namespace ember::test;
using nn::load_safetensors;
using nn::save_safetensors;
namespace fs = std::filesystem;

namespace {

using Named = std::vector<std::pair<std::string, Tensor>>;

// The file's tensors byte for byte against `want`.
bool holds(const std::string& path, const Named& want) {
    const nn::TensorFile f = load_safetensors(path);
    if (f.tensors.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i)
        if (f.tensors[i].first != want[i].first ||
            raw_bytes(f.tensors[i].second) != raw_bytes(want[i].second))
            return false;
    return true;
}

// A module with one parameter, for nn::save.
struct One : nn::Module {
    Tensor w = register_parameter("w", random_bits({3}, DType::f32, 7));
};

}  // namespace

TEST_CASE("load_safetensors refuses a named pipe, a directory and a /proc file",
          "[safetensors][files]") {
    ScratchDir dir("st-kinds");
    const std::string fifo = dir.file("w.safetensors");
    make_fifo(fifo);
    require_refused_without_blocking(
        fifo, [&] { load_safetensors(fifo); },
        "load_safetensors: '" + fifo + "': is a named pipe (FIFO); a regular file is needed");
    One model;
    require_refused_without_blocking(
        fifo, [&] { nn::load(model, fifo); }, "is a named pipe (FIFO)");
    REQUIRE_THROWS_WITH_MSG(load_safetensors(dir.path().string()),
                            "': is a directory; a regular file is needed");
    REQUIRE_THROWS_WITH_MSG(load_safetensors(kProcFile),
                            "reports a size of 0 bytes but has content (a /proc or /sys file?)");
    REQUIRE_THROWS_WITH_MSG(load_safetensors(""), "load_safetensors: '': the path is empty");
}

TEST_CASE("save_safetensors writes file names of every valid length", "[safetensors][files]") {
    ScratchDir dir("st-long");
    const Named t = {{"w", random_bits({4, 3}, DType::f32, 1)}};
    // 255 bytes is the longest name a Linux file system takes.
    for (size_t len : {size_t(1), size_t(200), size_t(242), size_t(247), size_t(248),
                       size_t(254), size_t(255)}) {
        INFO("a name of " << len << " bytes");
        const std::string path = dir.file(std::string(len - 1, 'n') + "w");
        save_safetensors(path, t);
        CHECK(holds(path, t));
        save_safetensors(path, t);  // over an existing file, too
        CHECK(holds(path, t));
        fs::remove(path);
        CHECK(dir.listing().empty());
    }
    // Multi-byte characters near the cut of the temporary name.
    std::string name;
    while (name.size() < 240) name += "\xc3\xa9";  // é
    save_safetensors(dir.file(name), t);
    CHECK(holds(dir.file(name), t));
}

TEST_CASE("save_safetensors: an empty path is refused before anything is written",
          "[safetensors][files]") {
    ScratchDir dir("st-empty");
    const auto cwd = fs::current_path();
    fs::current_path(dir.path());
    const Named t = {{"w", random_bits({2}, DType::f32, 2)}};
    std::string save_error, nn_error;
    try {
        save_safetensors("", t);
    } catch (const Error& e) {
        save_error = e.what();
    }
    try {
        nn::save(One(), "");
    } catch (const Error& e) {
        nn_error = e.what();
    }
    const std::vector<std::string> left = dir.listing();
    fs::current_path(cwd);
    CHECK_THAT(save_error, Catch::Matchers::Contains("save_safetensors: '': the path is empty"));
    CHECK_THAT(nn_error, Catch::Matchers::Contains("save_safetensors: '': the path is empty"));
    CHECK(left.empty());
}

TEST_CASE("save_safetensors writes through symbolic links", "[safetensors][files]") {
    ScratchDir dir("st-link");
    const Named old_t = {{"w", random_bits({5}, DType::f32, 3)}};
    const Named new_t = {{"v", random_bits({2, 2}, DType::i64, 4)}};
    fs::create_directory(dir.path() / "store");
    fs::create_directory(dir.path() / "links");
    const std::string target = dir.file("store/real.safetensors");

    auto check_through = [&](const std::string& link) {
        save_safetensors(target, old_t);
        struct stat before {}, after {};
        REQUIRE(::stat(target.c_str(), &before) == 0);
        save_safetensors(link, new_t);
        REQUIRE(::stat(target.c_str(), &after) == 0);
        CHECK(after.st_ino != before.st_ino);  // replaced by a rename, not rewritten in place
        CHECK(fs::is_symlink(link));  // still a link
        CHECK(holds(target, new_t));  // and the file it leads to has the new content
        CHECK(holds(link, new_t));
        // No temporary file left in either folder.
        CHECK(fs::directory_entry(dir.path() / "links").exists());
        size_t files = 0;
        for (const auto& e : fs::recursive_directory_iterator(dir.path()))
            files += e.is_regular_file() && !e.is_symlink() ? 1 : 0;
        CHECK(files == 1);
    };
    SECTION("a relative link") {
        const std::string link = dir.file("links/rel.safetensors");
        fs::create_symlink("../store/real.safetensors", link);
        check_through(link);
    }
    SECTION("an absolute link") {
        const std::string link = dir.file("links/abs.safetensors");
        fs::create_symlink(fs::absolute(target), link);
        check_through(link);
    }
    SECTION("a chain of two links") {
        const std::string first = dir.file("links/first.safetensors");
        fs::create_symlink("second.safetensors", first);
        fs::create_symlink(fs::absolute(target), dir.file("links/second.safetensors"));
        check_through(first);
        CHECK(fs::is_symlink(dir.file("links/second.safetensors")));
    }
    SECTION("a link to a file that does not exist yet creates it") {
        const std::string link = dir.file("links/new.safetensors");
        fs::create_symlink("../store/fresh.safetensors", link);
        save_safetensors(link, new_t);
        CHECK(fs::is_symlink(link));
        CHECK(holds(dir.file("store/fresh.safetensors"), new_t));
    }
    SECTION("a loop of links is an error") {
        const std::string a = dir.file("links/a"), b = dir.file("links/b");
        fs::create_symlink("b", a);
        fs::create_symlink("a", b);
        REQUIRE_THROWS_AS(save_safetensors(a, new_t), Error);
        CHECK(fs::is_symlink(a));
        CHECK(fs::is_symlink(b));
    }
}

TEST_CASE("save_safetensors removes what killed saves left, not what live ones hold",
          "[safetensors][files]") {
    ScratchDir dir("st-kill");
    const std::string path = dir.file("w.safetensors");
    const Named small = {{"w", random_bits({4}, DType::f32, 5)}};
    const Named big = {{"big", random_bits({1 << 22}, DType::f32, 6)}};  // 16 MiB
    save_safetensors(path, small);
    fs::create_directory(dir.path() / "other");  // not ours: must stay
    write_bytes(dir.file("notes.txt"), {1, 2, 3});

    // A child saves the big file over and over; it is stopped in the middle
    // of a write (its temporary file has bytes, so the writer holds its lock:
    // core/atomic_file.cpp takes it before writing), and so it lives.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        try {
            for (;;) save_safetensors(path, big);
        } catch (...) {
        }
        ::_exit(1);
    }
    auto temporaries = [&] {
        std::vector<std::string> t;
        for (const std::string& name : dir.listing())
            if (name != "w.safetensors" && name != "other" && name != "notes.txt")
                t.push_back(name);
        return t;
    };
    auto writing = [&] {  // a temporary file that has bytes already
        for (const std::string& name : temporaries()) {
            std::error_code ec;
            if (fs::file_size(dir.file(name), ec) > 0 && !ec) return true;
        }
        return false;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool stopped = false;
    while (!stopped && std::chrono::steady_clock::now() < deadline) {
        if (writing()) {
            ::kill(child, SIGSTOP);
            int status = 0;
            ::waitpid(child, &status, WUNTRACED);
            stopped = writing();  // it may have renamed just before the stop
            if (!stopped) ::kill(child, SIGCONT);
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    if (!stopped) {
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
        FAIL("never caught the child in the middle of a save");
    }
    const std::vector<std::string> held = temporaries();
    REQUIRE(held.size() == 1);

    // The writer lives: its file is not touched by another save.
    save_safetensors(path, small);
    CHECK(temporaries() == held);
    CHECK(holds(path, small));

    // The writer is killed: the target is whole (old or new content), and the
    // next save removes the temporary file it left.
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    CHECK(temporaries() == held);
    CHECK_NOTHROW(load_safetensors(path));
    save_safetensors(path, small);
    CHECK(temporaries().empty());
    CHECK(holds(path, small));
    CHECK(fs::is_directory(dir.path() / "other"));
    CHECK(read_bytes(dir.file("notes.txt")) == Bytes{1, 2, 3});
}

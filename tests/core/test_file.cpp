// core/file.h and core/atomic_file.h on their own: the kinds of file the
// reader refuses, exact reads, and the documented temporary-name pattern
// (its hash against published FNV-1a test vectors, its length bound, its cut
// at a UTF-8 boundary).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/atomic_file.h"
#include "core/file.h"
#include "support/files.h"

using namespace ember;
using namespace ember::test;

TEST_CASE("open_regular_file names what it found instead of a regular file", "[core][files]") {
    REQUIRE_THROWS_WITH_MSG(open_regular_file("/dev/null", "ctx"),
                            "ctx: is a character device; a regular file is needed");
    REQUIRE_THROWS_WITH_MSG(open_regular_file("/", "ctx"), "ctx: is a directory");
    REQUIRE_THROWS_WITH_MSG(open_regular_file("/no/such/file", "ctx"),
                            "ctx: cannot open: No such file or directory");
    REQUIRE_THROWS_WITH_MSG(open_regular_file("", "ctx"), "ctx: the path is empty");
    REQUIRE_THROWS_WITH_MSG(open_regular_file(kProcFile, "ctx"),
                            "ctx: reports a size of 0 bytes but has content");
}

TEST_CASE("open_regular_file and read_exact on a regular file", "[core][files]") {
    const std::string path =
        (std::filesystem::temp_directory_path() / ("ember-file-" + std::to_string(::getpid())))
            .string();
    { std::ofstream(path, std::ios::binary) << "0123456789"; }
    RegularFile f = open_regular_file(path, "ctx");
    CHECK(f.size == 10);
    // Reads block again after the non-blocking open.
    CHECK((::fcntl(f.fd.get(), F_GETFL) & O_NONBLOCK) == 0);
    char buf[4] = {};
    read_exact(f.fd.get(), buf, 4, 3, "ctx");
    CHECK(std::string(buf, 4) == "3456");
    REQUIRE_THROWS_WITH_MSG(read_exact(f.fd.get(), buf, 4, 8, "ctx"),
                            "ctx: unexpected end of file at byte 10 (did the file change");
    // An empty regular file is a file of 0 bytes, not an error.
    { std::ofstream(path, std::ios::binary | std::ios::trunc); }
    CHECK(open_regular_file(path, "ctx").size == 0);
    std::remove(path.c_str());
}

TEST_CASE("atomic_temp_prefix follows its documented pattern", "[core][files]") {
    // FNV-1a 64 test vectors (Fowler, Noll, Vo): "a" and "foobar".
    CHECK(atomic_temp_prefix("a") == ".a.af63dc4c8601ec8c.ember-tmp-");
    CHECK(atomic_temp_prefix("foobar") == ".foobar.85944171f73967e8.ember-tmp-");
    // Long names keep their first 100 bytes; the hash still tells them apart.
    const std::string a(255, 'a'), b = std::string(254, 'a') + "b";
    CHECK(atomic_temp_prefix(a).size() == 129);
    CHECK(atomic_temp_prefix(a).substr(0, 102) == "." + std::string(100, 'a') + ".");
    CHECK(atomic_temp_prefix(a) != atomic_temp_prefix(b));
    // A two-byte character across byte 100 is left out whole, not cut.
    const std::string e = std::string(99, 'x') + "\xc3\xa9" + "yyy";
    CHECK(atomic_temp_prefix(e).substr(0, 101) == "." + std::string(99, 'x') + ".");
}

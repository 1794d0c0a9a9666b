// Datasets and the file system: named pipes refused without blocking, /proc
// files, folders and pipes where Fashion-MNIST expects its files, an empty
// split, a mapped file that shrinks (copy_on_read turns the SIGBUS into an
// error; checked in a child process, so a regression fails rather than
// killing the test run), and Loader batch sizes far past the dataset.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <filesystem>

#include "data/idx.h"
#include "data/loader.h"
#include "data/mmap_dataset.h"
#include "support/data_support.h"
#include "support/files.h"

using namespace ember;
using namespace ember::test;
using namespace ember::data;

TEST_CASE("dataset readers refuse named pipes without blocking", "[data][files]") {
    TempDir dir;
    write_file(dir.file("y.bin"), Bytes(4, 1));
    write_file(dir.file("x.bin"), random_bytes(16, 1));
    const std::string fifo = dir.file("pipe");
    make_fifo(fifo);
    require_refused_without_blocking(
        fifo, [&] { MmapDataset(fifo, dir.file("y.bin"), {4}); },
        "MmapDataset: " + fifo + ": is a named pipe (FIFO); a regular file is needed");
    require_refused_without_blocking(
        fifo, [&] { MmapDataset(dir.file("x.bin"), fifo, {4}); }, "is a named pipe (FIFO)");
    require_refused_without_blocking(
        fifo, [&] { read_idx(fifo); }, "read_idx: " + fifo + ": is a named pipe (FIFO)");
}

TEST_CASE("dataset readers refuse /proc files, whose size says 0", "[data][files]") {
    REQUIRE_THROWS_WITH_MSG(MmapDataset(kProcFile, kProcFile, {1}),
                            "reports a size of 0 bytes but has content");
    REQUIRE_THROWS_WITH_MSG(read_idx(kProcFile), "read_idx: " + std::string(kProcFile) +
                                                     ": reports a size of 0 bytes");
    REQUIRE_THROWS_WITH_MSG(read_idx_info(kProcFile), "reports a size of 0 bytes");
}

TEST_CASE("FashionMNIST says what it found where a file should be", "[data][files]") {
    TempDir dir;
    write_mnist_like(dir.path, "train", random_bytes(2 * 784, 3), {1, 2}, 28, 28, false);
    const std::string images = dir.file("train-images-idx3-ubyte");
    std::filesystem::remove(images);
    std::filesystem::create_directory(images);
    REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::train, dir.path),
                            "FashionMNIST: " + images +
                                " is a directory; a regular file is needed (raw or .gz)");
    std::filesystem::remove(images);
    make_fifo(images);
    REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::train, dir.path),
                            images + " is a named pipe (FIFO); a regular file is needed");
    // A regular .gz beside the odd raw entry is used.
    write_mnist_like(dir.path, "train", random_bytes(2 * 784, 3), {1, 2}, 28, 28, true);
    std::filesystem::remove(dir.file("train-labels-idx1-ubyte"));
    CHECK(FashionMNIST(Split::train, dir.path).size() == 2);
}

TEST_CASE("FashionMNIST refuses a split without samples, naming its files", "[data][files]") {
    TempDir dir;
    for (bool gz : {false, true}) {
        INFO((gz ? "gzip" : "raw"));
        write_mnist_like(dir.path, "t10k", {}, {}, 28, 28, gz);
        const std::string sfx = gz ? ".gz" : "";
        REQUIRE_THROWS_WITH_MSG(FashionMNIST(Split::test, dir.path),
                                "FashionMNIST: " + dir.file("t10k-images-idx3-ubyte" + sfx) +
                                    " and " + dir.file("t10k-labels-idx1-ubyte" + sfx) +
                                    " hold no samples");
        std::filesystem::remove(dir.file("t10k-images-idx3-ubyte" + sfx));
        std::filesystem::remove(dir.file("t10k-labels-idx1-ubyte" + sfx));
    }
}

TEST_CASE("MmapDataset copy_on_read: same samples, and a file that shrinks is an error",
          "[data][files]") {
    TempDir dir;
    const Bytes px = random_bytes(64 * 4096, 4);  // 64 samples of one page each
    Bytes labels(64);
    for (size_t i = 0; i < labels.size(); ++i) labels[i] = uint8_t(i * 7 % 10);
    write_file(dir.file("x.bin"), px);
    write_file(dir.file("y.bin"), labels);
    const MmapDataset mapped(dir.file("x.bin"), dir.file("y.bin"), {16, 256});
    const MmapDataset copied(dir.file("x.bin"), dir.file("y.bin"), {16, 256},
                             {.copy_on_read = true});
    std::vector<float> a(4096), b(4096);
    for (int64_t i = 0; i < 64; ++i) {
        CHECK(mapped.read(i, a.data()) == copied.read(i, b.data()));
        CHECK(a == b);
        CHECK(copied.read(i, b.data()) == labels[size_t(i)]);
        CHECK(b[100] == float(px[size_t(i * 4096 + 100)]));
    }

    // The file shrinks under a live dataset. In a child process: a SIGBUS
    // there fails this test instead of ending the run.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        int code = 3;
        try {
            const MmapDataset ds(dir.file("x.bin"), dir.file("y.bin"), {16, 256},
                                 {.copy_on_read = true});
            std::vector<float> out(4096);
            ds.read(63, out.data());
            if (::truncate(dir.file("x.bin").c_str(), 4096) != 0) ::_exit(4);
            ds.read(63, out.data());
            code = 2;  // no error
        } catch (const Error& e) {
            const std::string msg = e.what();
            code = msg.find("MmapDataset: " + dir.file("x.bin") +
                            ": unexpected end of file at byte 258048") != std::string::npos
                       ? 0
                       : 1;
        }
        ::_exit(code);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO("child: " << (WIFSIGNALED(status) ? "killed by signal " : "exit code ")
                   << (WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)));
    CHECK(WIFEXITED(status));
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
}

TEST_CASE("Loader: a batch_size past the dataset, and one past the machine's memory",
          "[data][files]") {
    auto small = std::make_shared<SyntheticDataset>(10, Shape{3}, 2, 1);
    for (int64_t bs : {int64_t(11), int64_t(1) << 40, int64_t(INT64_MAX)}) {
        INFO("batch_size " << bs);
        Loader loader(small, {.batch_size = bs, .shuffle = false, .workers = 0});
        REQUIRE(loader.size() == 1);
        const auto b = loader.next();
        REQUIRE(b.has_value());
        CHECK(b->input.shape() == Shape{10, 3});
        CHECK(b->target.shape() == Shape{10});
        CHECK_FALSE(loader.next().has_value());
        Loader dropping(small, {.batch_size = bs, .drop_last = true, .workers = 0});
        CHECK(dropping.size() == 0);
    }
    // 2^40 samples of 1000 values: 4 PB per batch. Refused before any allocation.
    auto huge = std::make_shared<SyntheticDataset>(int64_t(1) << 40, Shape{1000}, 2, 1);
    REQUIRE_THROWS_WITH_MSG(
        Loader(huge, {.batch_size = int64_t(1) << 40, .shuffle = false, .workers = 0}),
        "Loader: batch_size 1099511627776 (1099511627776 samples per batch) of 1000 f32 values");
    REQUIRE_THROWS_WITH_MSG(
        Loader(huge, {.batch_size = int64_t(1) << 40, .shuffle = false, .workers = 0}),
        "more than this machine's");
    // 2^40 samples of 2^24 values: the size of a batch overflows int64.
    auto wide = std::make_shared<SyntheticDataset>(int64_t(1) << 40, Shape{1 << 24}, 2, 1);
    REQUIRE_THROWS_WITH_MSG(
        Loader(wide, {.batch_size = int64_t(1) << 60, .shuffle = false, .workers = 0}),
        "the staging memory's size overflows; lower batch_size");
}

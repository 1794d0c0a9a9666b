// What the fuzz targets share: scratch files for inputs that readers take by
// path, in a private folder (tmpfs when there is one) made once per process.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "support/fuzz_targets.h"

namespace ember::fuzz {

namespace {

// The folder, removed at exit (a crashed run leaves it in /dev/shm or /tmp).
struct Folder {
    std::string path;
    Folder() {
        namespace fs = std::filesystem;
        const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm")
                                                            : fs::temp_directory_path();
        path = (base / ("ember-fuzz-" + std::to_string(::getpid()))).string();
        fs::create_directories(path);
    }
    ~Folder() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

}  // namespace

std::string scratch_file(const std::string& tag, const uint8_t* data, size_t size) {
    static const Folder folder;
    const std::string path = folder.path + "/" + tag;
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        std::perror(path.c_str());
        std::abort();  // the harness, not ember, is broken
    }
    for (size_t done = 0; done < size;) {
        const ssize_t w = ::write(fd, data + done, size - done);
        if (w <= 0) {
            std::perror(path.c_str());
            std::abort();
        }
        done += size_t(w);
    }
    ::close(fd);
    return path;
}

}  // namespace ember::fuzz

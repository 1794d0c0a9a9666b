// Atomic writes of small text files (config.toml).
#include "train/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/error.h"

namespace ember::train {

void write_file_atomic(const std::string& path, const std::string& content) {
    const std::string tmp = path + ".tmp-" + std::to_string(getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    EMBER_CHECK(fd >= 0, "cannot write ", path, ": ", std::strerror(errno));
    size_t done = 0;
    while (done < content.size()) {
        const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            EMBER_FAIL("cannot write ", path, ": ", std::strerror(err));
        }
        done += size_t(n);
    }
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    if (!synced || std::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        EMBER_FAIL("cannot write ", path, ": ", std::strerror(err));
    }
}

}  // namespace ember::train

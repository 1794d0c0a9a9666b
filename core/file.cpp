// Opening files for reading: stat first (so a FIFO or a device is never
// opened, and so never blocks), open without blocking, fstat again, and one
// probe byte for files that claim to be empty.
#include "core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace ember {

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& o) noexcept {
    if (this != &o) {
        reset();
        fd_ = o.release();
    }
    return *this;
}

void FileDescriptor::reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

const char* file_kind(mode_t mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

namespace {

std::string errno_str(int err) { return std::strerror(err); }

void check_regular(const struct stat& st, const std::string& context) {
    EMBER_CHECK(S_ISREG(st.st_mode), context, ": is ", file_kind(st.st_mode),
                "; a regular file is needed");
}

}  // namespace

RegularFile open_regular_file(const std::string& path, const std::string& context) {
    EMBER_CHECK(!path.empty(), context, ": the path is empty");
    struct stat st {};
    EMBER_CHECK(::stat(path.c_str(), &st) == 0, context, ": cannot open: ", errno_str(errno));
    check_regular(st, context);
    // O_NONBLOCK: should a FIFO replace the file after the stat, the open
    // still returns at once (and the fstat below refuses it).
    RegularFile f;
    f.fd = FileDescriptor(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    EMBER_CHECK(f.fd.get() >= 0, context, ": cannot open: ", errno_str(errno));
    EMBER_CHECK(::fstat(f.fd.get(), &st) == 0, context, ": cannot stat: ", errno_str(errno));
    check_regular(st, context);
    const int flags = ::fcntl(f.fd.get(), F_GETFL);
    EMBER_CHECK(flags >= 0 && ::fcntl(f.fd.get(), F_SETFL, flags & ~O_NONBLOCK) == 0, context,
                ": cannot set the file to blocking reads: ", errno_str(errno));
    f.size = uint64_t(st.st_size);
    if (f.size == 0) {
        // /proc and /sys files report 0 bytes whatever they hold.
        char probe;
        ssize_t r;
        do r = ::pread(f.fd.get(), &probe, 1, 0);
        while (r < 0 && errno == EINTR);
        EMBER_CHECK(r <= 0, context,
                    ": reports a size of 0 bytes but has content (a /proc or /sys file?); its "
                    "size cannot be validated: copy it to a regular file first");
    }
    return f;
}

void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& context) {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
        const size_t chunk = size_t(std::min<uint64_t>(n, uint64_t(1) << 30));
        const ssize_t r = ::pread(fd, p, chunk, off_t(offset));
        if (r < 0 && errno == EINTR) continue;
        EMBER_CHECK(r >= 0, context, ": read failed at byte ", offset, ": ", errno_str(errno));
        EMBER_CHECK(r > 0, context, ": unexpected end of file at byte ", offset,
                    " (did the file change while it was read?)");
        p += r;
        n -= uint64_t(r);
        offset += uint64_t(r);
    }
}

}  // namespace ember

// Opening the files ember reads (weights, datasets) safely: only regular
// files, refused by type before anything can block on them (a named pipe
// would hang the open, a directory or device makes no sense), and /proc-style
// files that report a size of 0 but have content caught rather than misread.
// Writing: core/atomic_file.h. Guide: docs/reliability.md.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace ember {

/// A file descriptor, closed when this goes out of scope. Movable.
class FileDescriptor {
  public:
    FileDescriptor() = default;
    explicit FileDescriptor(int fd) : fd_(fd) {}
    ~FileDescriptor() { reset(); }
    FileDescriptor(FileDescriptor&& o) noexcept : fd_(o.release()) {}
    FileDescriptor& operator=(FileDescriptor&& o) noexcept;
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;

    int get() const { return fd_; }
    /// Gives up ownership: the caller closes the returned descriptor.
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    /// Closes the descriptor now (errors ignored: nothing was written through it).
    void reset();

  private:
    int fd_ = -1;
};

/// An open regular file and its size when it was opened.
struct RegularFile {
    FileDescriptor fd;
    uint64_t size = 0;
};

/// What a file mode is, for messages: "a regular file", "a directory", "a
/// named pipe (FIFO)", "a character device", "a block device", "a socket",
/// "a symbolic link".
const char* file_kind(mode_t mode);

/// Opens `path` read-only, refusing anything but a regular file (symbolic
/// links are followed). The type is checked before the open, with stat, so
/// a named pipe or a device is never opened, and again on the open file
/// (fstat), so a file swapped in between is caught too. A file that reports
/// 0 bytes but yields data (/proc, /sys) is refused as well: its size cannot
/// be validated. Errors are ember::Error led by `context`, which names the
/// caller and the path ("load_safetensors: 'w.safetensors'"):
///   "<context>: cannot open: No such file or directory",
///   "<context>: is a named pipe (FIFO); a regular file is needed", ...
RegularFile open_regular_file(const std::string& path, const std::string& context);

/// Reads exactly `n` bytes at `offset` of `fd` into `dst` (pread, retried on
/// EINTR and short counts). A read error, or the end of the file before `n`
/// bytes, is an ember::Error led by `context` that gives the offset and says
/// the file may have changed while it was read.
void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& context);

}  // namespace ember

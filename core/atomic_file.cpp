// AtomicFile: symbolic links resolved to the file they lead to, a short
// temporary name derived from the target's, an flock held while writing (so a
// cleaner can tell a dead writer's file from a live one's), and the rename.
#include "core/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace ember {

namespace {

constexpr size_t kNameBytes = 100;  // of the target's name kept in a temporary's name
constexpr int kMaxLinks = 40;       // as the kernel's limit on nested symbolic links

std::string errno_str() { return std::strerror(errno); }

// Splits at the last '/': ("a/b", "c") for "a/b/c", ("", "c") for "c", ("/", "c") for "/c".
std::pair<std::string, std::string> split_path(const std::string& p) {
    const size_t slash = p.rfind('/');
    if (slash == std::string::npos) return {"", p};
    return {slash == 0 ? "/" : p.substr(0, slash), p.substr(slash + 1)};
}

std::string join(const std::string& dir, const std::string& name) {
    if (dir.empty()) return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Where a write to `path` lands: `path`, or the end of its chain of symbolic
// links (which may not exist yet). Links in the directories on the way are
// the kernel's business: rename follows them.
std::string resolve_links(const std::string& path, const std::string& context) {
    std::string p = path;
    for (int hops = 0;; ++hops) {
        struct stat st {};
        if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
        EMBER_CHECK(hops < kMaxLinks, context, ": more than ", kMaxLinks,
                    " symbolic links in a chain (a loop?)");
        std::vector<char> buf(size_t(std::max<off_t>(st.st_size, 64)) + 1);
        ssize_t n;
        while ((n = ::readlink(p.c_str(), buf.data(), buf.size())) == ssize_t(buf.size()))
            buf.resize(2 * buf.size());  // the link grew since the lstat
        EMBER_CHECK(n >= 0, context, ": cannot read the symbolic link '", p, "': ", errno_str());
        const std::string link(buf.data(), size_t(n));
        p = !link.empty() && link.front() == '/' ? link : join(split_path(p).first, link);
    }
}

// FNV-1a, 64 bits: a stable, documented hash (std::hash may change between builds).
uint64_t fnv1a(const std::string& s) {
    uint64_t h = 14695981039346656037ull;
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
    return h;
}

bool same_file(const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

std::string atomic_temp_prefix(const std::string& name) {
    size_t keep = std::min(name.size(), kNameBytes);
    // Never cut a UTF-8 sequence: back off over continuation bytes.
    while (keep > 0 && keep < name.size() && (static_cast<unsigned char>(name[keep]) & 0xC0) == 0x80)
        --keep;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(name)));
    // (appended piece by piece: GCC 12 warns falsely on "." + std::string)
    std::string prefix = ".";
    prefix.append(name, 0, keep).append(".").append(hex).append(".ember-tmp-");
    return prefix;
}

AtomicFile::AtomicFile(const std::string& path, const std::string& context) : context_(context) {
    EMBER_CHECK(!path.empty(), context_, ": the path is empty");
    target_ = resolve_links(path, context_);
    const auto [dir, name] = split_path(target_);
    EMBER_CHECK(!name.empty() && name != "." && name != "..", context_,
                ": the path names a directory, not a file");
    dir_ = dir.empty() ? "." : dir;
    prefix_ = atomic_temp_prefix(name);
    // Unique across processes (pid) and across threads of this one (the
    // counter, the only state shared between calls).
    static std::atomic<uint64_t> counter{0};
    for (int attempt = 0;; ++attempt) {
        temp_ = join(dir, prefix_ + std::to_string(::getpid()) + "-" +
                              std::to_string(counter.fetch_add(1)));
        fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd_ < 0 && errno == EEXIST && attempt < 100) continue;  // a stale one of an old pid
        EMBER_CHECK(fd_ >= 0, context_, ": cannot create the temporary file '", temp_,
                    "': ", errno_str());
        // The lock says "a live writer owns this file" to remove_stale_temporaries.
        // A cleaner may have taken the file between the open and the lock: then
        // it is unlinked by now, and a new one is made.
        struct stat st {};
        if (::flock(fd_, LOCK_EX) == 0 && ::fstat(fd_, &st) == 0 && st.st_nlink > 0) break;
        ::unlink(temp_.c_str());  // the name is ours alone (pid and counter)
        ::close(fd_);
        fd_ = -1;
        EMBER_CHECK(attempt < 100, context_, ": cannot create and lock a temporary file in '",
                    dir_, "'");
    }
    // Replacing a file keeps its permission bits (best effort: a file we do
    // not own may refuse).
    struct stat old {};
    if (::stat(target_.c_str(), &old) == 0 && S_ISREG(old.st_mode))
        (void)::fchmod(fd_, old.st_mode & 07777);
}

AtomicFile::~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t r = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
        if (r < 0 && errno == EINTR) continue;
        EMBER_CHECK(r > 0, context_, ": writing '", temp_, "' failed: ", errno_str());
        p += r;
        n -= size_t(r);
    }
}

void AtomicFile::commit() {
    EMBER_CHECK(::fsync(fd_) == 0, context_, ": fsync of '", temp_, "' failed: ", errno_str());
    // The rename comes before the close: the lock is held until the file has
    // its final name, so no cleaner ever sees it unlocked under the temporary one.
    EMBER_CHECK(::rename(temp_.c_str(), target_.c_str()) == 0, context_, ": cannot rename '",
                temp_, "' over '", target_, "': ", errno_str());
    committed_ = true;
    const int closed = ::close(fd_);
    fd_ = -1;
    EMBER_CHECK(closed == 0, context_, ": closing '", target_, "' failed: ", errno_str());
    // The rename lives in the directory: flush it too, or a crash may undo it.
    const int d = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    EMBER_CHECK(d >= 0, context_, ": cannot open its directory to flush it: ", errno_str());
    // EINVAL: the file system cannot flush directories; the rename still happened.
    const bool flushed = ::fsync(d) == 0 || errno == EINVAL;
    const int err = errno;
    ::close(d);
    errno = err;
    EMBER_CHECK(flushed, context_, ": fsync of its directory failed: ", errno_str());
    remove_stale_temporaries();
}

void AtomicFile::remove_stale_temporaries() const {
    DIR* dir = ::opendir(dir_.c_str());
    if (!dir) return;
    const int dfd = ::dirfd(dir);
    while (const dirent* e = ::readdir(dir)) {
        const std::string name = e->d_name;
        if (name.compare(0, prefix_.size(), prefix_) != 0) continue;
        const int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) continue;
        struct stat st {}, now {};
        // Only our own regular files, and only when no live writer holds them;
        // the name must still be this file when it is removed.
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
            ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
            ::fstatat(dfd, name.c_str(), &now, AT_SYMLINK_NOFOLLOW) == 0 && same_file(st, now))
            ::unlinkat(dfd, name.c_str(), 0);
        ::close(fd);
    }
    ::closedir(dir);
}

}  // namespace ember

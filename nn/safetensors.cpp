// safetensors files: reading (the whole header validated first, then each
// tensor's span read straight into a new host tensor) and atomic writing (a
// temporary file beside the target, fsync, rename, fsync of the directory).
// Header rules: nn/safetensors_header.cpp; format: docs/safetensors.md.
#include "nn/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "kernels/copy.h"
#include "nn/safetensors_header.h"

namespace ember::nn {

// The length field and the tensor bytes are little-endian in the file and are
// copied as they are; f16 and bf16 are raw 16-bit patterns on both sides.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O copies bytes as they are: it needs a little-endian host");

using detail::quote;

namespace {

constexpr const char* kMetadataKey = "__metadata__";

std::string errno_str() { return std::strerror(errno); }

// Closes a file descriptor when it goes out of scope.
class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

// Reads exactly n bytes at `offset` (pread returns short counts for large n).
void read_exact(int fd, void* dst, uint64_t n, uint64_t offset, const std::string& context) {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
        const size_t chunk = size_t(std::min<uint64_t>(n, uint64_t(1) << 30));
        const ssize_t r = ::pread(fd, p, chunk, off_t(offset));
        if (r < 0 && errno == EINTR) continue;
        EMBER_CHECK(r >= 0, context, ": read failed at byte ", offset, ": ", errno_str());
        EMBER_CHECK(r > 0, context, ": unexpected end of file at byte ", offset,
                    " (did the file change while it was read?)");
        p += r;
        n -= uint64_t(r);
        offset += uint64_t(r);
    }
}

// A C++ bool holding any byte but 0 or 1 is undefined behaviour to read.
void check_bool_bytes(const Tensor& t, const std::string& name, const std::string& context) {
    const auto* b = static_cast<const unsigned char*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel(); ++i)
        EMBER_CHECK(b[i] <= 1, context, ": tensor ", quote(name), ": BOOL element ", i,
                    " is byte ", int(b[i]), "; it must be 0 or 1");
}

// Valid UTF-8, as JSON strings must be; nlohmann's serializer is the judge.
bool valid_utf8(const std::string& s) {
    try {
        (void)nlohmann::json(s).dump();
        return true;
    } catch (const nlohmann::json::exception&) {
        return false;
    }
}

// The JSON header (keys in the order given, "__metadata__" first), padded
// with spaces so that the data buffer starts at an 8-byte aligned offset.
std::string make_header(const std::vector<std::pair<std::string, Tensor>>& tensors,
                        const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json h = nlohmann::ordered_json::object();
    if (!metadata.empty()) h[kMetadataKey] = metadata;
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        const uint64_t nbytes = uint64_t(t.numel()) * uint64_t(t.element_size());
        h[name] = {{"dtype", detail::safetensors_dtype_name(t.dtype())},
                   {"shape", t.shape()},
                   {"data_offsets", {offset, offset + nbytes}}};
        offset += nbytes;
    }
    std::string text = h.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // 8 + size is then a multiple of 8
    return text;
}

// A file written beside `target` and renamed over it by commit(). Until then
// `target` is untouched, and the destructor removes the temporary file, so an
// exception anywhere in between leaves no trace.
class AtomicFile {
public:
    AtomicFile(const std::string& target, const std::string& context)
        : target_(target), context_(context) {
        // Unique across processes (pid) and across threads of this one (the
        // counter, the only state shared between calls).
        static std::atomic<uint64_t> counter{0};
        temp_ = str(target, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
        fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        EMBER_CHECK(fd_ >= 0, context_, ": cannot create the temporary file ", quote(temp_),
                    ": ", errno_str());
    }
    ~AtomicFile() {
        if (fd_ >= 0) ::close(fd_);
        if (!committed_) ::unlink(temp_.c_str());
    }
    AtomicFile(const AtomicFile&) = delete;
    AtomicFile& operator=(const AtomicFile&) = delete;

    void write(const void* data, size_t n) {
        const char* p = static_cast<const char*>(data);
        while (n > 0) {
            const ssize_t r = ::write(fd_, p, std::min<size_t>(n, size_t(1) << 30));
            if (r < 0 && errno == EINTR) continue;
            EMBER_CHECK(r > 0, context_, ": writing ", quote(temp_), " failed: ", errno_str());
            p += r;
            n -= size_t(r);
        }
    }

    void commit() {
        EMBER_CHECK(::fsync(fd_) == 0, context_, ": fsync of ", quote(temp_),
                    " failed: ", errno_str());
        const int closed = ::close(fd_);
        fd_ = -1;
        EMBER_CHECK(closed == 0, context_, ": closing ", quote(temp_), " failed: ", errno_str());
        EMBER_CHECK(::rename(temp_.c_str(), target_.c_str()) == 0, context_, ": cannot rename ",
                    quote(temp_), " over it: ", errno_str());
        committed_ = true;
        // The rename lives in the directory: flush it too, or a crash may undo it.
        const std::filesystem::path dir = std::filesystem::path(target_).parent_path();
        Fd d(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        EMBER_CHECK(d.get() >= 0, context_, ": cannot open its directory to flush it: ",
                    errno_str());
        // EINVAL: the file system cannot flush directories; the rename still happened.
        EMBER_CHECK(::fsync(d.get()) == 0 || errno == EINVAL, context_,
                    ": fsync of its directory failed: ", errno_str());
    }

private:
    std::string target_, context_, temp_;
    int fd_ = -1;
    bool committed_ = false;
};

}  // namespace

const Tensor* TensorFile::find(const std::string& name) const {
    for (const auto& [n, t] : tensors)
        if (n == name) return &t;
    return nullptr;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
    const std::string context = "save_safetensors: " + quote(path);
    // Everything that can be checked is checked before the file is created.
    std::set<std::string> names;
    for (const auto& [name, t] : tensors) {
        EMBER_CHECK(!name.empty(), context, ": a tensor has an empty name");
        EMBER_CHECK(name != kMetadataKey, context, ": '", kMetadataKey,
                    "' is reserved for the metadata and cannot name a tensor");
        EMBER_CHECK(valid_utf8(name), context, ": tensor name ", quote(name),
                    " is not valid UTF-8");
        EMBER_CHECK(names.insert(name).second, context, ": tensor ", quote(name),
                    " appears twice");
        EMBER_CHECK(t.defined(), context, ": tensor ", quote(name), " is undefined");
    }
    for (const auto& [key, value] : metadata)
        EMBER_CHECK(valid_utf8(key) && valid_utf8(value), context, ": __metadata__ entry ",
                    quote(key), " is not valid UTF-8");
    const std::string header = make_header(tensors, metadata);

    AtomicFile file(path, context);
    const uint64_t n = header.size();
    file.write(&n, 8);
    file.write(header.data(), header.size());
    for (const auto& [name, t] : tensors) {
        if (t.numel() == 0) continue;
        Tensor host = t;
        if (!t.device().is_cpu() || !t.is_contiguous()) {  // one tensor's copy at a time
            host = empty(t.shape(), {.dtype = t.dtype()});
            kernels::copy(host, t);
        }
        file.write(host.data_ptr(), size_t(host.numel() * host.element_size()));
    }
    file.commit();
}

TensorFile load_safetensors(const std::string& path) {
    const std::string context = "load_safetensors: " + quote(path);
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    EMBER_CHECK(fd.get() >= 0, context, ": cannot open: ", errno_str());
    struct stat st {};
    EMBER_CHECK(::fstat(fd.get(), &st) == 0, context, ": cannot stat: ", errno_str());
    EMBER_CHECK(S_ISREG(st.st_mode), context, ": not a regular file");
    const uint64_t file_size = uint64_t(st.st_size);
    EMBER_CHECK(file_size >= 8, context, ": the file is ", file_size,
                " bytes, too short for the 8-byte header length (truncated?)");

    uint64_t n = 0;  // little-endian on disk and on the host
    read_exact(fd.get(), &n, 8, 0, context);
    EMBER_CHECK(n > 0, context, ": the header length is 0");
    EMBER_CHECK(n <= kSafetensorsMaxHeaderBytes, context, ": the header length ", n,
                " exceeds the limit of ", kSafetensorsMaxHeaderBytes, " bytes");
    EMBER_CHECK(n <= file_size - 8, context, ": the header length ", n, " exceeds the ",
                file_size - 8, " bytes after the length field (is the file truncated?)");
    std::string text(size_t(n), '\0');
    read_exact(fd.get(), text.data(), n, 8, context);
    // Validates against the real buffer size, so no span asks for more bytes than the file has.
    const detail::SafetensorsHeader header =
        detail::parse_safetensors_header(text, file_size - 8 - n, context);

    TensorFile out;
    out.metadata = header.metadata;
    for (const detail::SafetensorsEntry& e : header.entries) {
        Tensor t = empty(e.shape, {.dtype = e.dtype});
        read_exact(fd.get(), t.data_ptr(), e.end - e.begin, 8 + n + e.begin, context);
        if (e.dtype == DType::boolean) check_bool_bytes(t, e.name, context);
        out.tensors.emplace_back(e.name, std::move(t));
    }
    return out;
}

}  // namespace ember::nn

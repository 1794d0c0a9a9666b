// IDX reading through zlib's gz* functions, which read raw and gzip files
// alike (gzdirect tells them apart). The header is read first and every size
// checked — against the file length for a raw file, against deflate's
// largest possible expansion for a gzip file — before the one allocation.
#include "data/idx.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/file.h"

namespace ember::data {

namespace {

// Deflate cannot expand data more than about 1032:1, so a gzip file of n bytes
// holds at most ~1032 n bytes: a header asking for more is a lie (or a bomb).
constexpr int64_t kMaxDeflateRatio = 1032;
constexpr int64_t kDeflateSlack = 1 << 16;

struct GzCloser {
    explicit GzCloser(gzFile file) : f(file) {}
    GzCloser(const GzCloser&) = delete;
    GzCloser& operator=(const GzCloser&) = delete;
    ~GzCloser() {
        if (f) gzclose(f);
    }
    gzFile f;
};

// Reads up to n bytes; returns how many arrived (fewer only at the end of the
// data). A zlib error (corrupt stream, bad checksum) is an Error.
int64_t read_full(gzFile f, void* dst, int64_t n, const std::string& path) {
    int64_t done = 0;
    while (done < n) {
        const unsigned chunk = unsigned(std::min<int64_t>(n - done, int64_t(1) << 30));
        const int got = gzread(f, static_cast<char*>(dst) + done, chunk);
        if (got < 0) {
            int errnum = 0;
            const char* msg = gzerror(f, &errnum);
            EMBER_FAIL("read_idx: ", path, ": corrupt gzip data (", msg ? msg : "?", ")");
        }
        if (got == 0) break;
        done += got;
    }
    return done;
}

// A truncated gzip stream reads short without an error code from gzread;
// gzerror then says why, which is worth adding to the message.
std::string gz_note(gzFile f) {
    int errnum = Z_OK;
    const char* msg = gzerror(f, &errnum);
    if (errnum == Z_OK || !msg || !*msg) return "";
    return std::string(" (") + msg + ")";
}

void type_of(int code, const std::string& path, IdxInfo& info) {
    switch (code) {
        case 0x08:
            info.dtype = DType::u8, info.element_bytes = 1;
            return;
        case 0x09:
            info.dtype = DType::i32, info.element_bytes = 1;
            return;
        case 0x0B:
            info.dtype = DType::i32, info.element_bytes = 2;
            return;
        case 0x0C:
            info.dtype = DType::i32, info.element_bytes = 4;
            return;
        case 0x0D:
            info.dtype = DType::f32, info.element_bytes = 4;
            return;
        case 0x0E:
            info.dtype = DType::f64, info.element_bytes = 8;
            return;
    }
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02X", code);
    EMBER_FAIL("read_idx: ", path, ": unknown data type code ", hex,
               " (IDX knows 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64)");
}

// Reads and validates the header from an open file; leaves f at the data.
IdxInfo read_header(gzFile f, const std::string& path, int64_t file_bytes) {
    IdxInfo info;
    unsigned char magic[4];
    const int64_t got = read_full(f, magic, 4, path);
    EMBER_CHECK(got == 4, "read_idx: ", path, ": truncated header: ", got,
                " bytes, the magic number alone needs 4", gz_note(f));
    info.compressed = !gzdirect(f);
    char hex[32];
    std::snprintf(hex, sizeof hex, "%02X %02X %02X %02X", magic[0], magic[1], magic[2], magic[3]);
    EMBER_CHECK(magic[0] == 0 && magic[1] == 0, "read_idx: ", path, ": bad magic number ", hex,
                " (an IDX file starts 00 00 <type> <ndims>)");
    info.type_code = magic[2];
    type_of(magic[2], path, info);
    const int ndims = magic[3];
    EMBER_CHECK(ndims >= 1 && ndims <= kMaxIdxDims, "read_idx: ", path, ": ", ndims,
                " dims in the header (magic ", hex, "); 1 to ", kMaxIdxDims, " are supported");

    unsigned char dims[4 * kMaxIdxDims];
    const int64_t dgot = read_full(f, dims, 4 * ndims, path);
    info.header_bytes = 4 + 4 * int64_t(ndims);
    EMBER_CHECK(dgot == 4 * ndims, "read_idx: ", path, ": truncated header: ", ndims, " dims need ",
                info.header_bytes, " header bytes, the file holds ", 4 + dgot, gz_note(f));
    int64_t numel = 1;
    for (int d = 0; d < ndims; ++d) {
        const unsigned char* p = dims + 4 * d;
        const int64_t size = int64_t(p[0]) << 24 | int64_t(p[1]) << 16 | int64_t(p[2]) << 8 | p[3];
        info.shape.push_back(size);
        EMBER_CHECK(!__builtin_mul_overflow(numel, size, &numel), "read_idx: ", path, ": sizes ",
                    shape_str(info.shape), "... overflow");
    }
    EMBER_CHECK(!__builtin_mul_overflow(numel, int64_t(info.element_bytes), &info.data_bytes),
                "read_idx: ", path, ": sizes ", shape_str(info.shape), " overflow");

    const std::string says = str("header says ", shape_str(info.shape), " x ", info.element_bytes,
                                 " bytes = ", info.data_bytes, " bytes of data");
    if (!info.compressed) {
        const int64_t have = file_bytes - info.header_bytes;
        EMBER_CHECK(have >= info.data_bytes, "read_idx: ", path, ": truncated: ", says,
                    ", the file holds ", have);
        EMBER_CHECK(have == info.data_bytes, "read_idx: ", path, ": oversized: ", says,
                    ", the file holds ", have, " (", have - info.data_bytes, " extra bytes)");
    } else {
        const int64_t most = file_bytes > (INT64_MAX - kDeflateSlack) / kMaxDeflateRatio
                                 ? INT64_MAX
                                 : file_bytes * kMaxDeflateRatio + kDeflateSlack;
        EMBER_CHECK(info.data_bytes <= most, "read_idx: ", path, ": inconsistent: ", says,
                    ", more than a ", file_bytes, "-byte gzip file can hold");
    }
    return info;
}

// Big-endian elements to host order, in place.
void to_host_order(void* data, int64_t n, int bytes) {
    if constexpr (std::endian::native == std::endian::big) return;
    if (bytes == 2) {
        auto* p = static_cast<uint16_t*>(data);
        for (int64_t i = 0; i < n; ++i) p[i] = __builtin_bswap16(p[i]);
    } else if (bytes == 4) {
        auto* p = static_cast<uint32_t*>(data);
        for (int64_t i = 0; i < n; ++i) p[i] = __builtin_bswap32(p[i]);
    } else if (bytes == 8) {
        auto* p = static_cast<uint64_t*>(data);
        for (int64_t i = 0; i < n; ++i) p[i] = __builtin_bswap64(p[i]);
    }
}

// The file as a zlib stream (raw or gzip) and its size, once it is known to
// be a regular file: a named pipe or a device is refused without blocking.
GzCloser open_idx(const std::string& path, int64_t* bytes) {
    RegularFile file = open_regular_file(path, "read_idx: " + path);
    *bytes = int64_t(file.size);
    const int fd = file.fd.release();
    gzFile f = gzdopen(fd, "rb");
    if (!f) ::close(fd);
    EMBER_CHECK(f != nullptr, "read_idx: ", path, ": out of memory opening the gzip reader");
    gzbuffer(f, 1 << 18);  // larger reads: fewer calls into inflate
    return GzCloser(f);
}

}  // namespace

IdxInfo read_idx_info(const std::string& path) {
    int64_t bytes = 0;
    GzCloser f = open_idx(path, &bytes);
    return read_header(f.f, path, bytes);
}

Tensor read_idx(const std::string& path) {
    int64_t bytes = 0;
    GzCloser f = open_idx(path, &bytes);
    const IdxInfo info = read_header(f.f, path, bytes);
    const int64_t numel = info.data_bytes / std::max(info.element_bytes, 1);

    Tensor out = empty(info.shape, {.dtype = info.dtype});
    // i8 and i16 are read into a side buffer and widened; the rest land in place.
    const bool widen = info.element_bytes != dtype_size(info.dtype);
    std::vector<unsigned char> side(widen ? size_t(info.data_bytes) : 0);
    void* dst = widen ? side.data() : out.data_ptr();
    const int64_t got = read_full(f.f, dst, info.data_bytes, path);
    // zlib does not count the bytes of a read that ends in an error, so a
    // broken-off gzip stream is reported without a count.
    const std::string note = gz_note(f.f);
    EMBER_CHECK(got == info.data_bytes, "read_idx: ", path, ": truncated: header says ",
                shape_str(info.shape), " x ", info.element_bytes, " bytes = ", info.data_bytes,
                " bytes of data, ",
                note.empty() ? str("the file holds ", got) : "the gzip stream breaks off" + note);
    // One byte more must not exist: decompression stops at the header's size + 1.
    unsigned char extra;
    EMBER_CHECK(read_full(f.f, &extra, 1, path) == 0, "read_idx: ", path,
                ": oversized: more data than the header's ", shape_str(info.shape), " x ",
                info.element_bytes, " bytes = ", info.data_bytes, " bytes");

    if (!widen) {
        to_host_order(dst, numel, info.element_bytes);
    } else {
        int32_t* o = out.data<int32_t>();
        for (int64_t i = 0; i < numel; ++i)
            o[i] = info.element_bytes == 1
                       ? int32_t(int8_t(side[size_t(i)]))
                       : int32_t(
                             int16_t(uint16_t(side[size_t(2 * i)] << 8 | side[size_t(2 * i + 1)])));
    }
    return out;
}

}  // namespace ember::data

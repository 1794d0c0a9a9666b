// Fuzz target: IDX files (data/idx.cpp, data/mmap_dataset.cpp), raw and gzip.
// Any bytes must read or throw ember::Error; what reads must agree with its
// header; a raw u8 file that reads maps to the same samples, mapped or read
// with copy_on_read.
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "data/idx.h"
#include "data/mmap_dataset.h"
#include "support/fuzz_targets.h"

namespace ember::fuzz {

namespace {

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz idx: %s\n", what);
    std::abort();
}

// The bytes as one gzip member (deflate, windowBits 15 + 16 for the gzip wrapper).
std::vector<uint8_t> gzip(const uint8_t* data, size_t size) {
    z_stream z{};
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        broken("deflateInit2");
    std::vector<uint8_t> out(deflateBound(&z, uLong(size)) + 32);
    z.next_in = const_cast<Bytef*>(data);
    z.avail_in = uInt(size);
    z.next_out = out.data();
    z.avail_out = uInt(out.size());
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) broken("deflate");
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

// Reads every sample of a dataset mapped from the raw u8 file at `path`
// (labels made to match) and checks it against `images`.
void check_mapped(const std::string& path, const Tensor& images, bool copy_on_read) {
    const int64_t n = images.size(0);
    std::vector<uint8_t> labels_file = {0, 0, 8, 1, uint8_t(n >> 24), uint8_t(n >> 16),
                                        uint8_t(n >> 8), uint8_t(n)};
    for (int64_t i = 0; i < n; ++i) labels_file.push_back(uint8_t(i % 7));
    const std::string labels =
        scratch_file("labels-idx1-ubyte", labels_file.data(), labels_file.size());
    const auto ds = data::MmapDataset::from_idx(path, labels, 1.0, copy_on_read);
    if (ds->size() != n) broken("MmapDataset size differs from the header");
    const int64_t numel = ds->sample_numel();
    std::vector<float> out(static_cast<size_t>(numel));
    const uint8_t* px = images.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
        if (ds->read(i, out.data()) != i % 7) broken("MmapDataset label differs");
        for (int64_t j = 0; j < numel; ++j)
            if (out[size_t(j)] != float(px[i * numel + j])) broken("MmapDataset sample differs");
    }
}

}  // namespace

int idx(const uint8_t* data, size_t size) {
    const bool wrap = size > 0 && (data[0] & 1);
    const std::vector<uint8_t> bytes =
        wrap ? gzip(data + 1, size - 1) : std::vector<uint8_t>(data + (size > 0), data + size);
    const std::string path = scratch_file("in-ubyte", bytes.data(), bytes.size());
    data::IdxInfo info;
    try {
        info = data::read_idx_info(path);
    } catch (const Error&) {
        return 0;  // read_idx checks the same header first
    }
    Tensor t;
    try {
        t = data::read_idx(path);
    } catch (const Error&) {
        return 0;
    }
    if (t.shape() != info.shape || t.dtype() != info.dtype ||
        t.numel() * info.element_bytes != info.data_bytes)
        broken("read_idx disagrees with read_idx_info");
    // Mapping: raw u8 images [N, ...] with a few samples (labels are written
    // for each, so keep N small).
    if (!info.compressed && info.type_code == 0x08 && t.dim() >= 2 && t.size(0) <= 4096 &&
        t.numel() > 0) {
        for (bool copy : {false, true}) {
            try {
                check_mapped(path, t, copy);
            } catch (const Error& e) {
                std::fprintf(stderr, "%s\n", e.what());
                broken("a valid raw u8 IDX file could not be mapped");
            }
        }
    }
    return 0;
}

}  // namespace ember::fuzz

// Memory-mapped raw samples: the files are checked against the layout once,
// then read() converts one sample straight out of the mapping (or, with
// copy_on_read, out of a pread that notices a file that shrank).
#include "data/mmap_dataset.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "data/idx.h"

namespace ember::data {

MmapDataset::Source::Source(const std::string& path, bool map) : path_(path) {
    RegularFile f = open_regular_file(path, "MmapDataset: " + path);
    bytes_ = size_t(f.size);
    if (!map) {
        fd_ = std::move(f.fd);
        return;
    }
    if (bytes_ > 0) {  // mmap rejects length 0; an empty file maps to nothing
        void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE, f.fd.get(), 0);
        EMBER_CHECK(p != MAP_FAILED, "MmapDataset: cannot map ", path, " (", bytes_,
                    " bytes): ", std::strerror(errno));
        addr_ = p;
    }
}

MmapDataset::Source::~Source() {
    if (addr_) ::munmap(addr_, bytes_);
}

void MmapDataset::Source::read(void* dst, int64_t n, int64_t offset) const {
    if (fd_.get() < 0) {
        std::memcpy(dst, at(offset), size_t(n));
        return;
    }
    read_exact(fd_.get(), dst, uint64_t(n), uint64_t(offset), "MmapDataset: " + path_);
}

MmapDataset::MmapDataset(const std::string& inputs_path, const std::string& labels_path,
                         Shape sample_shape, MmapDatasetOptions options)
    : sample_shape_(std::move(sample_shape)), options_(options), scale_(float(options.scale)) {
    numel_ = shape_numel(sample_shape_);
    EMBER_CHECK(numel_ > 0, "MmapDataset: sample shape ", shape_str(sample_shape_),
                " has no elements");
    const DType lt = options.label_dtype;
    EMBER_CHECK(lt == DType::u8 || lt == DType::i32 || lt == DType::i64,
                "MmapDataset: label dtype must be u8, i32 or i64, got ", dtype_name(lt));
    const int64_t esize = dtype_size(options.dtype);
    EMBER_CHECK(options.inputs_offset >= 0 && options.inputs_offset % esize == 0 &&
                    options.labels_offset >= 0 && options.labels_offset % dtype_size(lt) == 0,
                "MmapDataset: offsets ", options.inputs_offset, " and ", options.labels_offset,
                " must be >= 0 and multiples of their element sizes (", esize, ", ", dtype_size(lt),
                ")");
    EMBER_CHECK(!__builtin_mul_overflow(numel_, esize, &sample_bytes_), "MmapDataset: sample ",
                shape_str(sample_shape_), " overflows");
    label_bytes_ = dtype_size(lt);

    inputs_ = std::make_unique<Source>(inputs_path, !options.copy_on_read);
    labels_ = std::make_unique<Source>(labels_path, !options.copy_on_read);
    const int64_t ibytes = inputs_->bytes() - options.inputs_offset;
    EMBER_CHECK(ibytes >= 0 && ibytes % sample_bytes_ == 0, "MmapDataset: ", inputs_path, " holds ",
                inputs_->bytes(), " bytes; after the ", options.inputs_offset,
                "-byte offset that is not a whole number of ", dtype_name(options.dtype), " ",
                shape_str(sample_shape_), " samples (", sample_bytes_, " bytes each)");
    size_ = ibytes / sample_bytes_;
    const int64_t lbytes = labels_->bytes() - options.labels_offset;
    EMBER_CHECK(lbytes == size_ * label_bytes_, "MmapDataset: ", labels_path, " holds ",
                std::max<int64_t>(lbytes, 0), " bytes of labels after its ", options.labels_offset,
                "-byte offset; ", size_, " samples need ", size_ * label_bytes_);
}

std::shared_ptr<MmapDataset> MmapDataset::from_idx(const std::string& images_path,
                                                   const std::string& labels_path, double scale,
                                                   bool copy_on_read) {
    const IdxInfo im = read_idx_info(images_path), lb = read_idx_info(labels_path);
    auto check = [](const IdxInfo& info, const std::string& path) {
        EMBER_CHECK(!info.compressed, "MmapDataset: ", path,
                    " is gzip-compressed; mapping needs the raw file (gunzip it)");
        EMBER_CHECK(info.type_code == 0x08, "MmapDataset: ", path, " holds IDX type code ",
                    info.type_code, "; only u8 (0x08) files can be mapped");
    };
    check(im, images_path);
    check(lb, labels_path);
    EMBER_CHECK(lb.shape.size() == 1 && lb.shape[0] == im.shape[0], "MmapDataset: ", labels_path,
                " holds labels ", shape_str(lb.shape), " for images ", shape_str(im.shape));
    Shape sample(im.shape.begin() + 1, im.shape.end());
    if (sample.size() == 2) sample.insert(sample.begin(), 1);
    return std::make_shared<MmapDataset>(images_path, labels_path, sample,
                                         MmapDatasetOptions{.dtype = DType::u8,
                                                            .inputs_offset = im.header_bytes,
                                                            .label_dtype = DType::u8,
                                                            .labels_offset = lb.header_bytes,
                                                            .scale = scale,
                                                            .copy_on_read = copy_on_read});
}

int64_t MmapDataset::read(int64_t i, float* out) const {
    check_index(i, "MmapDataset");
    const int64_t at = options_.inputs_offset + i * sample_bytes_;
    visit_dtype(options_.dtype, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if (!options_.copy_on_read) {
            const T* p = reinterpret_cast<const T*>(inputs_->at(at));
            for (int64_t j = 0; j < numel_; ++j) out[j] = static_cast<float>(p[j]) * scale_;
            return;
        }
        // A chunk at a time through the stack: read() allocates nothing.
        constexpr int64_t kChunk = 4096 / int64_t(sizeof(T));
        T chunk[kChunk];
        for (int64_t j = 0; j < numel_; j += kChunk) {
            const int64_t n = std::min(kChunk, numel_ - j);
            inputs_->read(chunk, n * int64_t(sizeof(T)), at + j * int64_t(sizeof(T)));
            for (int64_t k = 0; k < n; ++k) out[j + k] = static_cast<float>(chunk[k]) * scale_;
        }
    });
    const int64_t l = options_.labels_offset + i * label_bytes_;
    switch (options_.label_dtype) {
        case DType::u8: {
            uint8_t v;
            labels_->read(&v, 1, l);
            return v;
        }
        case DType::i32: {
            int32_t v;
            labels_->read(&v, 4, l);
            return v;
        }
        default: {
            int64_t v;
            labels_->read(&v, 8, l);
            return v;
        }
    }
}

}  // namespace ember::data

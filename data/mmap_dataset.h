// MmapDataset: fixed-size samples in a raw binary file, memory-mapped so the
// data may be larger than RAM: the OS pages samples in as workers read them
// and drops them under memory pressure. Labels come from a second raw file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "../core/file.h"
#include "dataset.h"

namespace ember::data {

/// Layout of the two files of an MmapDataset. Values are in host byte order
/// (little-endian on x86 and ARM).
struct MmapDatasetOptions {
    DType dtype = DType::u8;        // element type of the inputs file
    int64_t inputs_offset = 0;      // bytes before the first sample (a header)
    DType label_dtype = DType::u8;  // u8, i32 or i64
    int64_t labels_offset = 0;      // bytes before the first label
    double scale = 1.0;             // inputs are multiplied by this when read as f32
    /// Read samples with pread instead of through a memory mapping: for
    /// files that may shrink or be rewritten while in use. A mapped file that
    /// shrinks kills the process with SIGBUS on the next read of a page it
    /// lost; read this way, that read is an ember::Error naming the file.
    /// Costs a system call per sample (docs/data.md, "Files that change").
    bool copy_on_read = false;
};

/// Sample i is the i-th block of shape_numel(sample_shape) elements after
/// inputs_offset; its label the i-th label after labels_offset. The number of
/// samples follows from the file size, which must hold whole samples and
/// exactly as many labels. Both must be regular files (a named pipe or a
/// /proc file is refused without blocking).
///
/// Contract: a mapped file must not shrink while the dataset lives. The OS
/// signals a read of a page that is gone with SIGBUS, which no library can
/// turn into an error; set copy_on_read for files that may change.
class MmapDataset : public Dataset {
  public:
    MmapDataset(const std::string& inputs_path, const std::string& labels_path, Shape sample_shape,
                MmapDatasetOptions options = {});
    /// Raw (not gzip) u8 IDX files, e.g. gunzipped Fashion-MNIST: the headers
    /// give the sizes; [N, H, W] images get a channel dim, [1, H, W].
    static std::shared_ptr<MmapDataset> from_idx(const std::string& images_path,
                                                 const std::string& labels_path,
                                                 double scale = 1.0 / 255.0,
                                                 bool copy_on_read = false);

    int64_t size() const override { return size_; }
    Shape sample_shape() const override { return sample_shape_; }
    int64_t read(int64_t i, float* out) const override;
    int64_t bytes_per_sample() const override { return sample_bytes_ + label_bytes_; }

  private:
    /// A whole file, read-only: mapped, or open for pread (copy_on_read).
    class Source {
      public:
        Source(const std::string& path, bool map);
        ~Source();
        Source(const Source&) = delete;
        Source& operator=(const Source&) = delete;
        int64_t bytes() const { return int64_t(bytes_); }
        /// n bytes at `offset` into dst: a copy from the mapping, or a pread
        /// that throws (naming the file) when the file no longer holds them.
        void read(void* dst, int64_t n, int64_t offset) const;
        /// The bytes at `offset`, straight from the mapping (when mapped).
        const char* at(int64_t offset) const { return static_cast<const char*>(addr_) + offset; }

      private:
        std::string path_;
        FileDescriptor fd_;  // open only without a mapping
        void* addr_ = nullptr;
        size_t bytes_ = 0;
    };

    Shape sample_shape_;
    MmapDatasetOptions options_;
    int64_t size_ = 0, numel_ = 0, sample_bytes_ = 0, label_bytes_ = 0;
    float scale_ = 1;
    std::unique_ptr<Source> inputs_, labels_;
};

}  // namespace ember::data

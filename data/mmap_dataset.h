// MmapDataset: fixed-size samples in a raw binary file, memory-mapped so the
// data may be larger than RAM: the OS pages samples in as workers read them
// and drops them under memory pressure. Labels come from a second raw file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "data/dataset.h"

namespace ember::data {

/// Layout of the two files of an MmapDataset. Values are in host byte order
/// (little-endian on x86 and ARM).
struct MmapDatasetOptions {
    DType dtype = DType::u8;        // element type of the inputs file
    int64_t inputs_offset = 0;      // bytes before the first sample (a header)
    DType label_dtype = DType::u8;  // u8, i32 or i64
    int64_t labels_offset = 0;      // bytes before the first label
    double scale = 1.0;             // inputs are multiplied by this when read as f32
};

/// Sample i is the i-th block of shape_numel(sample_shape) elements after
/// inputs_offset; its label the i-th label after labels_offset. The number of
/// samples follows from the file size, which must hold whole samples and
/// exactly as many labels. The files must not shrink while mapped.
class MmapDataset : public Dataset {
  public:
    MmapDataset(const std::string& inputs_path, const std::string& labels_path, Shape sample_shape,
                MmapDatasetOptions options = {});
    /// Raw (not gzip) u8 IDX files, e.g. gunzipped Fashion-MNIST: the headers
    /// give the sizes; [N, H, W] images get a channel dim, [1, H, W].
    static std::shared_ptr<MmapDataset> from_idx(const std::string& images_path,
                                                 const std::string& labels_path,
                                                 double scale = 1.0 / 255.0);

    int64_t size() const override { return size_; }
    Shape sample_shape() const override { return sample_shape_; }
    int64_t read(int64_t i, float* out) const override;
    int64_t bytes_per_sample() const override { return sample_bytes_ + label_bytes_; }

  private:
    /// A read-only mapping of a whole file, unmapped on destruction.
    class Mapping {
      public:
        explicit Mapping(const std::string& path);
        ~Mapping();
        Mapping(const Mapping&) = delete;
        Mapping& operator=(const Mapping&) = delete;
        const char* data() const { return static_cast<const char*>(addr_); }
        int64_t bytes() const { return int64_t(bytes_); }

      private:
        void* addr_ = nullptr;
        size_t bytes_ = 0;
    };

    Shape sample_shape_;
    MmapDatasetOptions options_;
    int64_t size_ = 0, numel_ = 0, sample_bytes_ = 0, label_bytes_ = 0;
    float scale_ = 1;
    std::unique_ptr<Mapping> inputs_, labels_;
};

}  // namespace ember::data

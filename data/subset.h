// A contiguous run of a dataset's samples: the first N (`ember train --limit
// N`), or the test split of `--data synthetic` (samples 60000..69999).
#pragma once

#include <memory>

#include "dataset.h"

namespace ember::data {

/// Samples offset..offset+n-1 of `base`, unchanged, as samples 0..n-1.
class Subset : public data::Dataset {
  public:
    Subset(std::shared_ptr<const data::Dataset> base, int64_t n, int64_t offset = 0);
    int64_t size() const override { return n_; }
    Shape sample_shape() const override { return base_->sample_shape(); }
    int64_t read(int64_t i, float* out) const override;
    void read_batch(const int64_t* indices, int64_t count, float* inputs,
                    int64_t* labels) const override;
    int64_t bytes_per_sample() const override { return base_->bytes_per_sample(); }
    SampleKind kind() const override { return base_->kind(); }
    void read_tokens(int64_t i, int64_t* input, int64_t* target) const override;

  private:
    std::shared_ptr<const data::Dataset> base_;
    int64_t n_, offset_;
};

}  // namespace ember::data

// Subset: a contiguous run of a dataset, read through to the dataset itself.
#include "data/subset.h"

#include <vector>

#include "core/error.h"

namespace ember::data {

Subset::Subset(std::shared_ptr<const data::Dataset> base, int64_t n, int64_t offset)
    : base_(std::move(base)), n_(n), offset_(offset) {
    EMBER_CHECK(
        base_ && n >= 0 && offset >= 0 && offset <= base_->size() && n <= base_->size() - offset,
        "Subset: samples [", offset, ", ", offset, " + ", n, ") asked of a dataset of ",
        base_ ? base_->size() : 0);
}

int64_t Subset::read(int64_t i, float* out) const {
    check_index(i, "Subset");
    return base_->read(offset_ + i, out);
}

void Subset::read_tokens(int64_t i, int64_t* input, int64_t* target) const {
    check_index(i, "Subset");
    base_->read_tokens(offset_ + i, input, target);
}

void Subset::read_batch(const int64_t* indices, int64_t count, float* inputs,
                        int64_t* labels) const {
    for (int64_t k = 0; k < count; ++k) check_index(indices[k], "Subset");
    if (offset_ == 0) return base_->read_batch(indices, count, inputs, labels);
    std::vector<int64_t> shifted(indices, indices + count);
    for (int64_t& i : shifted) i += offset_;
    base_->read_batch(shifted.data(), count, inputs, labels);
}

}  // namespace ember::data

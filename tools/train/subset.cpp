// Subset: a prefix of a dataset, read through to the dataset itself.
#include "tools/train/subset.h"

#include "core/error.h"

namespace ember::train {

Subset::Subset(std::shared_ptr<const data::Dataset> base, int64_t n)
    : base_(std::move(base)), n_(n) {
    EMBER_CHECK(base_ && n >= 0 && n <= base_->size(), "Subset: ", n,
                " samples asked of a dataset of ", base_ ? base_->size() : 0);
}

int64_t Subset::read(int64_t i, float* out) const {
    check_index(i, "Subset");
    return base_->read(i, out);
}

void Subset::read_batch(const int64_t* indices, int64_t count, float* inputs,
                        int64_t* labels) const {
    for (int64_t k = 0; k < count; ++k) check_index(indices[k], "Subset");
    base_->read_batch(indices, count, inputs, labels);
}

}  // namespace ember::train

// What the cross-entropy kernels take (kernels/loss.h is the front). No
// Tensor: both backends include this.
#pragma once

#include <cstdint>

namespace ember::kernels {

/// The class count, the smoothing and the ignored target of one cross-entropy
/// call, as both backends' kernels take them.
struct CrossEntropyArgs {
    int64_t classes;
    double label_smoothing;
    int64_t ignore_index;
};

}  // namespace ember::kernels

// Types users pass to ops or get back from them, shared by the differentiable
// ops (ember::gelu, ember::max, ...) and the raw fronts (kernels/<family>.h)
// without exporting the fronts: ember/ember.h includes this, not them.
#pragma once

#include <array>
#include <cstdint>

#include "../core/tensor.h"

namespace ember {

/// Which GELU: the exact erf form or the tanh approximation (torch's `approximate`).
enum class GeluApprox { none, tanh };

/// A (height, width) pair: kernel, stride, padding, dilation or output size.
using Int2 = std::array<int64_t, 2>;

/// What max / min along a dim return.
struct ValuesIndices {
    Tensor values;   ///< the input's dtype
    Tensor indices;  ///< i64 positions along the dim
};

}  // namespace ember

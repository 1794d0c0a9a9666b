// What the pooling kernels take (kernels/pool.h is the front): one window.
// No Tensor: both backends include this.
#pragma once

#include <cstdint>

namespace ember::kernels {

/// A pooling window, as both backends take it: kernel (kh, kw), stride
/// (sh, sw), implicit padding (ph, pw) and dilation (dh, dw).
struct Pool2dWindow {
    int64_t kh, kw, sh, sw, ph, pw;
    int64_t dh = 1, dw = 1;
};

}  // namespace ember::kernels

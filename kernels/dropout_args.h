// What the dropout kernels take (kernels/dropout.h is the front): dense
// buffers of one floating dtype and a u8 mask, the same shape. Both backends
// check their views with these. No Tensor.
#pragma once

#include "view.h"

namespace ember::kernels {

/// out and x of one dtype, mask u8; all contiguous.
inline bool dropout_forward_views(const View& out, const View& mask, const View& x) {
    return out.is_contiguous() && mask.is_contiguous() && x.is_contiguous() &&
           out.dtype == x.dtype && mask.dtype == DType::u8;
}
/// grad_x and grad_y of one dtype, mask u8; all contiguous.
inline bool dropout_backward_views(const View& grad_x, const View& grad_y, const View& mask) {
    return dropout_forward_views(grad_x, mask, grad_y);
}

}  // namespace ember::kernels

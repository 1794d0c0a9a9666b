// Copies, casts and fills: the kernels behind contiguous(), clone(), to() and copy_().
#pragma once

#include "core/tensor.h"

namespace ember::kernels {

/// dst = src, broadcasting src to dst's shape and converting to dst's dtype.
/// Works within and across devices; a cross-device copy converts on the host side.
void copy(const Tensor& dst, const Tensor& src, bool non_blocking = false);
/// Sets every element of dst to `value` converted to dst's dtype.
void fill(const Tensor& dst, double value);
/// A new tensor with src's values converted to `dtype` (contiguous, same device).
Tensor cast(const Tensor& src, DType dtype);

}  // namespace ember::kernels

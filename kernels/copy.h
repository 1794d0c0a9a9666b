// Copies, casts and fills: the kernels behind contiguous(), clone(), to() and copy_().
#pragma once

#include "../core/tensor.h"

namespace ember::kernels {

/// dst = src, broadcasting src to dst's shape and converting to dst's dtype.
/// Works within and across devices; a cross-device copy converts on the host side.
void copy(const Tensor& dst, const Tensor& src, bool non_blocking = false);
/// Sets every element of dst to `value` converted to dst's dtype.
void fill(const Tensor& dst, double value);
/// A new tensor with src's values converted to `dtype` (contiguous, same device).
Tensor cast(const Tensor& src, DType dtype);
/// The same laid out in `format` (Tensor::to keeps a channels-last tensor's format).
Tensor cast(const Tensor& src, DType dtype, MemoryFormat format);
/// A contiguous copy of src with its own storage.
Tensor clone(const Tensor& src);
/// src itself when contiguous, else clone(src).
Tensor contiguous(const Tensor& src);
/// src itself when laid out densely in `format` (channels_last: and
/// suggesting it), else a copy that is.
Tensor contiguous(const Tensor& src, MemoryFormat format);
/// src seen with `shape` (one size may be -1): a view when its strides allow
/// it, else a view of contiguous(src). Records nothing (Tensor::reshape does).
Tensor reshape(const Tensor& src, const Shape& shape);

// Kernel code uses these and views:: (core/tensor.h) rather than Tensor's
// methods, which record for autograd: a front called by a differentiable op
// must not record its internal reshapes and copies a second time.

}  // namespace ember::kernels

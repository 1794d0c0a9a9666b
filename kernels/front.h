// Helpers for front functions (kernels/<family>.cpp), the only kernel-level
// code that sees Tensor: argument checks with clear messages, broadcasting,
// the Tensor -> View conversion handed to the backends, and the dispatch.
#pragma once

#include <initializer_list>
#include <string>

#include "../core/tensor.h"
#include "dispatch.h"
#include "view.h"

namespace ember::kernels {

/// The kernel's view of a tensor (checks the kMaxDims limit).
View view_of(const Tensor& t, const char* op = "op");
/// `t` seen through `shape` (broadcast, stride 0 on expanded dims).
View broadcast_view(const Tensor& t, const Shape& shape, const char* op);

/// Broadcast result shape (NumPy rules); error names the op and both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
/// Whether shapes a and b broadcast together (NumPy rules), without throwing.
bool broadcastable(const Shape& a, const Shape& b);

/// The dtype arithmetic on `d` happens in: math::Acc's host twin (f32 for
/// f16/bf16, `d` itself otherwise). Statistics, losses and products of half
/// inputs are kept in it.
DType acc_dtype(DType d);

/// Throws unless all tensors are defined and on the same device.
void check_same_device(std::initializer_list<const Tensor*> ts, const char* op);
/// Throws unless t's dtype is floating point.
void check_floating(const Tensor& t, const char* op);
/// "f32 [2, 3] on cpu", for messages.
std::string describe(const Tensor& t);

/// True when b reads memory of a in a different layout: writing a element by
/// element would change b's values before they are read (copy through a clone).
bool overlaps_differently(const Tensor& a, const Tensor& b);

/// `t` itself, or a clone of it when it overlaps `dst` differently: what an op
/// writing into dst may read safely.
Tensor unaliased(const Tensor& t, const Tensor& dst);

/// Options for a new tensor like `t` (same device) with `dtype`.
inline TensorOptions like(const Tensor& t, DType dtype) { return {dtype, t.device(), false}; }
inline TensorOptions like(const Tensor& t) { return like(t, t.dtype()); }

}  // namespace ember::kernels

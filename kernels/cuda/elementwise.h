// CUDA elementwise kernels on Views (kernels/cuda/elementwise.cu): the same
// entry points as kernels/cpu/elementwise.h, plus the device index. The front
// has checked the arguments, cast inputs to the compute dtype and broadcast them.
#pragma once

#include "kernels/math.h"
#include "kernels/view.h"

namespace ember::kernels::cuda {

void unary(UnaryOp op, const View& out, const View& in, int device);
void clamp(const View& out, const View& in, double lo, double hi, int device);
void binary(BinaryOp op, const View& out, const View& a, const View& b, int device);
void binary_scalar(BinaryOp op, const View& out, const View& a, double s, int device);
void compare(CompareOp op, const View& out, const View& a, const View& b, int device);
void compare_scalar(CompareOp op, const View& out, const View& a, double s, int device);
void where(const View& out, const View& cond, const View& a, const View& b, int device);

}  // namespace ember::kernels::cuda

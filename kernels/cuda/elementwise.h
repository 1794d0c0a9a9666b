// CUDA elementwise kernels on Views (kernels/cuda/elementwise.cu): the same
// entry points as kernels/cpu/elementwise.h, plus the stream they are queued
// on. The front has checked the arguments, cast inputs to the compute dtype
// and broadcast them. Plain C++: every build sees these declarations.
#pragma once

#include "../../core/cuda_context.h"
#include "../math.h"
#include "../view.h"

namespace ember::kernels::cuda {

void unary(UnaryOp op, const View& out, const View& in, StreamRef stream);
void clamp(const View& out, const View& in, double lo, double hi, StreamRef stream);
void binary(BinaryOp op, const View& out, const View& a, const View& b, StreamRef stream);
void binary_scalar(BinaryOp op, const View& out, const View& a, double s, StreamRef stream);
void compare(CompareOp op, const View& out, const View& a, const View& b, StreamRef stream);
void compare_scalar(CompareOp op, const View& out, const View& a, double s, StreamRef stream);
void where(const View& out, const View& cond, const View& a, const View& b, StreamRef stream);

}  // namespace ember::kernels::cuda

// CPU elementwise kernels on Views (kernels/cpu/elementwise.cpp). The front
// (kernels/elementwise.cpp) has already checked the arguments, cast the inputs
// to the compute dtype and broadcast them to the output's shape.
#pragma once

#include "../math.h"
#include "../view.h"

namespace ember::kernels::cpu {

/// out = op(in); out and in share a dtype (floating for exp, log, ...; not bool).
void unary(UnaryOp op, const View& out, const View& in);
/// out = clamp(in, lo, hi); ±inf for an absent bound. Integer dtypes round
/// the bounds inward (lo up, hi down) and saturate them to the type's range.
void clamp(const View& out, const View& in, double lo, double hi);
/// out = op(a, b); all three share a dtype.
void binary(BinaryOp op, const View& out, const View& a, const View& b);
/// out = op(a, s), s converted to the accumulation type; a floating dtype.
void binary_scalar(BinaryOp op, const View& out, const View& a, double s);
/// out (bool) = op(a, b); a and b share a dtype.
void compare(CompareOp op, const View& out, const View& a, const View& b);
/// out (bool) = op(a, s); a floating dtype.
void compare_scalar(CompareOp op, const View& out, const View& a, double s);
/// out = cond ? a : b; cond is bool, out, a and b share a dtype.
void where(const View& out, const View& cond, const View& a, const View& b);

}  // namespace ember::kernels::cpu

// CPU cat kernel on Views (declaration for kernels/shape_ops.cpp and the tests).
#pragma once

#include <span>

#include "../view.h"

namespace ember::kernels::cpu {

/// Copies inputs back to back along `dim` into out, converting to out's dtype.
/// Each input has out's shape except along dim; those sizes sum to out's.
void cat(const View& out, std::span<const View> inputs, int dim);

}  // namespace ember::kernels::cpu

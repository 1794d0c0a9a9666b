// CUDA reductions (kernels/cuda/reduce.cu): the entry points of
// kernels/cpu/reduce.h on the same dense [outer, size, inner] Views, plus the
// stream they are queued on. The front (kernels/reduce.cpp) has checked the
// arguments, handled empty inputs and outputs, and planned the layout.
// Plain C++: every build sees these declarations.
#pragma once

#include "../../core/cuda_context.h"
#include "../reduce_args.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// out = sum over `size`; integer and bool inputs give an i64 out.
void sum(const View& out, const View& in, ReduceShape s, StreamRef stream);
/// out = sum / size (floating only).
void mean(const View& out, const View& in, ReduceShape s, StreamRef stream);
/// p = 1, 2 or inf (floating only).
void norm(const View& out, const View& in, ReduceShape s, double p, StreamRef stream);
/// Two-pass variance / standard deviation (floating only).
void var(const View& out, const View& in, ReduceShape s, double correction, StreamRef stream);
void std(const View& out, const View& in, ReduceShape s, double correction, StreamRef stream);
/// Largest / smallest value (any dtype); a NaN wins.
void amax(const View& out, const View& in, ReduceShape s, StreamRef stream);
void amin(const View& out, const View& in, ReduceShape s, StreamRef stream);
/// Values (skipped when values.data is null) and i64 indices of the first
/// max / min along `size`; the first NaN wins. size must be > 0.
void max(const View& values, const View& indices, const View& in, ReduceShape s,
         StreamRef stream);
void min(const View& values, const View& indices, const View& in, ReduceShape s,
         StreamRef stream);

}  // namespace ember::kernels::cuda

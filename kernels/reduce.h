// Reductions: sum, mean, norm, var, std, amax, amin over any set of dims, and
// max / min / argmax / argmin along one dim. Each returns a new contiguous
// tensor on the input's device. Semantics follow PyTorch (docs/reductions.md).
#pragma once

#include <cstdint>
#include <optional>

#include "../core/tensor.h"
#include "reduce_args.h"
#include "op_types.h"

namespace ember::kernels {

// `dims` below: the dims to reduce, negative counting from the end; a dim may
// not repeat; empty reduces every dim. A 0-d tensor accepts dims {0} and {-1}.
// With `keepdim` the reduced dims stay as size 1.

/// Sum. Integer and bool inputs give i64; floating inputs keep their dtype
/// (f16/bf16 accumulate in f32, f32 sums are pairwise). Empty sums are 0.
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// Arithmetic mean (floating only); an empty mean is NaN.
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
/// Vector p-norm over dims for p = 1, 2 (default) or INFINITY (max |x|);
/// floating only; the norm of an empty set is 0.
Tensor norm(const Tensor& x, double p = 2, const Shape& dims = {}, bool keepdim = false);
/// Variance sum (x - mean)^2 / max(0, n - correction) (floating only).
/// correction = 1 is Bessel's (unbiased); correction >= n divides by 0 and
/// gives inf, or NaN when all values are equal or n <= 1 (as PyTorch).
Tensor var(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
/// Standard deviation: sqrt(var(x, dims, correction)).
Tensor std(const Tensor& x, const Shape& dims = {}, double correction = 1, bool keepdim = false);
/// Largest / smallest value over dims (any dtype, kept); NaN propagates.
/// Reducing an empty dim into a non-empty result is an error.
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);

// max / min return ValuesIndices (kernels/op_types.h).

/// Largest value along `dim` and the index of its first occurrence; a NaN is
/// the largest (its first index is returned). Empty dim: error.
ValuesIndices max(const Tensor& x, int64_t dim, bool keepdim = false);
/// Smallest value along `dim` and its first index; a NaN is the smallest.
ValuesIndices min(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index (i64) of the first max along `dim`, or into the flattened tensor when
/// no dim is given (keepdim then gives all-ones dims).
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);

}  // namespace ember::kernels

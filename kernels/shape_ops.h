// Joining and splitting tensors: cat, stack, split and chunk. cat and stack
// copy into a new tensor; split and chunk return views (narrow) of their input.
// See docs/indexing.md for the choices made where PyTorch has options.
#pragma once

#include <vector>

#include "../core/tensor.h"

namespace ember::kernels {

/// Joins tensors along an existing dim. Shapes must match except along dim;
/// the result's dtype is the promotion of the inputs' (promote_types), and all
/// must be on one device. 1-d empty tensors (shape [0]) are skipped, as in
/// PyTorch, and take no part in the checks or the dtype. An empty list is an error.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim);

/// Joins equally shaped tensors along a new dim `dim` (in [-ndim-1, ndim]).
/// Dtypes promote as in cat.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim);

/// Views of `t` along dim of split_size elements each (split_size > 0); the
/// last may be smaller. A dim of size 0 gives one empty view.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);

/// Views of `t` along dim with the given sizes, which must sum to t.size(dim).
/// (Write a one-element list as std::vector<int64_t>{n}: a braced {n} picks
/// the split_size overload.)
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim = 0);

/// `chunks` views of ceil(size / chunks) elements along dim (torch.chunk): the
/// last may be smaller and there may be fewer than `chunks` of them; a dim of
/// size 0 gives `chunks` empty views.
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);

}  // namespace ember::kernels

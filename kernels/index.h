// Indexing ops: index_select, gather, scatter_add, index_add and embedding.
// Indices are i64 or i32 tensors of any strides; every index is checked, and
// an out-of-range one (negative included) is an ember::Error naming the op,
// the index value and the size of the dim. See docs/indexing.md.
#pragma once

#include "../core/tensor.h"

namespace ember::kernels {

/// Entries `index` (1-d, or 0-d for one entry) of `input` along `dim`: the
/// result has input's shape with size(dim) = index.numel(). Negative indices
/// are errors, as in PyTorch.
Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index);

/// torch.gather: out[i][j][k] = input[index[i][j][k]][j][k] for dim 0 (and so
/// on). index has input's number of dims and index.size(d) <= input.size(d)
/// for d != dim; the result has index's shape and input's dtype.
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);

/// In place: self[index[i][j][k]][j][k] += src[i][j][k] for dim 0 (and so on),
/// accumulating over repeated indices. index, src and self have the same
/// number of dims; index.size(d) <= src.size(d) for all d and <= self.size(d)
/// for d != dim; src has self's dtype. Deterministic (run-to-run bit-identical).
/// On an out-of-range index it throws and leaves self unchanged. Returns self.
Tensor scatter_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
/// Out of place: a copy of self with src scattered and added into it.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);

/// In place: self.select(dim, index[i]) += source.select(dim, i) for each i,
/// accumulating over repeated indices. index is 1-d (or 0-d) with
/// index.numel() == source.size(dim); source matches self's shape except along
/// dim, and self's dtype. Deterministic; self unchanged on error. Returns self.
Tensor index_add_(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
/// Out of place: a copy of self with source added at `index` along dim.
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);

/// Rows of `weight` [V, D] picked by `indices` (any shape, i64 or i32): the
/// result has shape indices.shape + [D] and weight's dtype.
Tensor embedding(const Tensor& weight, const Tensor& indices);

}  // namespace ember::kernels

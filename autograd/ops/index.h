// Differentiable indexing: semantics as kernels/index.h and kernels/shape_ops.h.
#pragma once

#include <vector>

#include "../../core/tensor.h"

namespace ember {

/// Entries `index` of input along dim; the gradient is added back at those entries.
Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index);
/// torch.gather; the gradient is scattered (added) back.
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);
/// self with src added at index along dim (out of place); gradients for self and src.
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
/// self with source added at entries `index` along dim (out of place).
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
/// Rows of weight [V, D] picked by indices; the gradient adds into the picked rows.
Tensor embedding(const Tensor& weight, const Tensor& indices);

/// Joins along an existing dim; each input gets its slice of the gradient.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Joins along a new dim.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
/// Pieces of split_size (the last may be smaller), as views; recorded as one
/// node whose backward concatenates the pieces' gradients (zeros for unused ones).
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim = 0);
/// `chunks` nearly equal pieces, as torch.chunk.
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);

}  // namespace ember

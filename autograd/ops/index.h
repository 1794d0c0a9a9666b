// Differentiable indexing: semantics as kernels/index.h and kernels/shape_ops.h.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace ember {

Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_add(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source);
/// Rows of weight [V, D] picked by indices; the gradient adds into the picked rows.
Tensor embedding(const Tensor& weight, const Tensor& indices);

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& t, int64_t chunks, int64_t dim = 0);

}  // namespace ember

// Tensor factories: filled, ranged and random tensors on any device.
#pragma once

#include <vector>

#include "../core/generator.h"
#include "../core/tensor.h"

namespace ember {

Tensor zeros(const Shape& shape, TensorOptions options = {});
Tensor ones(const Shape& shape, TensorOptions options = {});
Tensor full(const Shape& shape, double value, TensorOptions options = {});
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);

/// [start, end) in steps of `step` (like torch.arange); 1-d.
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor arange(double end, TensorOptions options = {});
/// `steps` evenly spaced values from start to end inclusive.
Tensor linspace(double start, double end, int64_t steps, TensorOptions options = {});

/// Uniform [0, 1) (floating dtypes). Uses `gen`, or the default generator.
Tensor rand(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
/// Standard normal (floating dtypes).
Tensor randn(const Shape& shape, TensorOptions options = {}, Generator* gen = nullptr);
/// Integers in [low, high) (default dtype i64 when options.dtype is floating... see docs).
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions options = {DType::i64},
               Generator* gen = nullptr);

/// A tensor holding a copy of `values` with the given shape (1-d when shape is
/// empty and there is more than one value); dtype from T.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape = {},
                   Device device = Device::cpu());

}  // namespace ember

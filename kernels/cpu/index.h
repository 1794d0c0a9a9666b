// CPU index kernels on Views (declarations for kernels/index.cpp, the tests
// and the benchmarks). Out-of-range indices are never dereferenced: each
// kernel returns the first one it met and the front turns it into an Error.
#pragma once

#include <cstdint>
#include <optional>

#include "../view.h"

namespace ember::kernels::cpu {

/// out[p] = in[p + index[p] * dim_stride] for every position p of out's shape.
/// `in` and `index` are seen through out's shape: `in` has stride 0 along the
/// gathered dim (dim_stride, in elements, steps along it instead) and `index`
/// has stride 0 where it does not vary (index_select, embedding). Any element
/// size; index i32 or i64. Returns the first index outside [0, dim_size) in
/// loop order (its element of out is left unwritten), or nullopt.
std::optional<int64_t> gather(const View& out, const View& in, const View& index,
                              int64_t dim_stride, int64_t dim_size);

/// The first value of `index` (i32 or i64) outside [0, size) in loop order, or nullopt.
std::optional<int64_t> find_bad_index(const View& index, int64_t size);

/// self[q with q[dim] replaced by index[q]] += src[q] for every position q of
/// index's shape; src has index's shape, and index.shape[d] <= self.shape[d]
/// for d != dim. Accumulates (+=) into self in Acc<T>, one rounding per add.
/// Deterministic: whole lines along `dim` go to one thread and are added in
/// order, so the result does not depend on the thread count. Returns the first
/// out-of-range index (skipped), or nullopt.
std::optional<int64_t> scatter_add(const View& self, const View& index, const View& src, int dim);

}  // namespace ember::kernels::cpu

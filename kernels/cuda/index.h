// CUDA index kernels on Views (kernels/cuda/index.cu): the entry points of
// kernels/cpu/index.h, plus the op name the device error flag reports and the
// stream they are queued on. Where the CPU returns the first bad index, these
// raise the flag (Note [Device error flag]) and skip it: the Error, naming
// `op`, comes at the next synchronization. Plain C++: every build sees these.
#pragma once

#include <cstdint>

#include "../../core/cuda_context.h"
#include "index_plan.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// out[p] = in[p + index[p] * dim_stride], as cpu::gather; an index outside
/// [0, dim_size) raises the flag and leaves its element of out unwritten.
void gather(const View& out, const View& in, const View& index, int64_t dim_stride,
            int64_t dim_size, const char* op, StreamRef stream);

/// Raises the flag on a value of `index` outside [0, size) (an empty gather's check).
void find_bad_index(const View& index, int64_t size, const char* op, StreamRef stream);

/// self[q with q[dim] := index[q]] += src[q], as cpu::scatter_add, in the same
/// order (bit-identical). Bad indices raise the flag and are skipped: self then
/// holds every valid contribution (the CPU leaves self untouched instead).
void scatter_add(const View& self, const View& index, const View& src, int dim, const char* op,
                 StreamRef stream);

/// scatter_add's path for an index every line reads alike, taken by
/// scatter_add where use_sorted_scatter(lines, self.shape[dim]) holds
/// (`lines`: scatter_lines of the same operands; Note [Sorted scatter_add]):
/// same results, bits and error reports. kernels/cuda/index_sorted.cu.
void scatter_add_sorted(const View& self, const View& index, const View& src, int dim,
                        const ScatterLines& lines, const char* op, StreamRef stream);

}  // namespace ember::kernels::cuda

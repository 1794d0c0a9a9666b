// What every backend checks before a collective, and the backend factories
// (internal to dist/).
#pragma once

#include <memory>

#include "../core/tensor.h"
#include "communicator.h"

namespace ember::dist {

/// A defined, contiguous CPU tensor of a dtype the collectives carry (f32,
/// f64, f16, bf16, i32, i64); else an Error naming `op`.
void check_collective_tensor(const Tensor& t, const char* op);

/// An average needs floating values; else an Error naming `op`.
void check_reduce_op(const Tensor& t, ReduceOp r, const char* op);

/// 0 <= root < size; else an Error naming `op`.
void check_root(int root, int size, const char* op);

/// `whole` holds `size` blocks of `part`'s elements, of part's dtype (all_gather's
/// out and in; reduce_scatter's in and out).
void check_gather_pair(const Tensor& whole, const Tensor& part, int size, const char* op);

/// The MPI communicator (dist/mpi.cpp; dist/no_mpi.cpp throws).
std::shared_ptr<Communicator> make_mpi_communicator(CommunicatorOptions options);

}  // namespace ember::dist

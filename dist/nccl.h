// The NCCL backend's factories: collectives over CUDA tensors between the
// GPUs of a job, one communicator per process and device. A plain C++ header
// (no NCCL or CUDA types), declared in every build; without NCCL the
// factories are an Error (dist/no_nccl.cpp). The backend: dist/nccl.cpp.
// Guide: docs/dist.md ("NCCL").
#pragma once

#include <memory>

#include "../core/device.h"
#include "communicator.h"

namespace ember::dist {

/// Whether this build has the NCCL backend (EMBER_WITH_NCCL).
bool nccl_built();

/// A communicator of one rank on `device` (a CUDA device) that runs every
/// collective through NCCL, from a unique id made in this process: what the
/// CUDA tests and a plain `--ddp` run on one GPU use. CPU tensors go to
/// `host` (dist::single_process() makes them identities); without one, a
/// CPU tensor is an Error.
std::shared_ptr<Communicator> nccl_single_process(Device device,
                                                  CommunicatorOptions options = {},
                                                  std::shared_ptr<Communicator> host = nullptr);

/// The NCCL communicator of the job `launch` describes (dist::init calls
/// it): with more than one rank, MPI starts (make_mpi_communicator), rank 0's
/// NCCL unique id is broadcast over it, and it carries the CPU tensors; the
/// GPU is local_cuda_device(launch.local_rank, ...). With one rank, an
/// nccl_single_process on options.device (cuda:0 when that is the CPU).
std::shared_ptr<Communicator> make_nccl_communicator(CommunicatorOptions options,
                                                     const LaunchInfo& launch);

}  // namespace ember::dist

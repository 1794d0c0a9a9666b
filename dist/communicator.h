// Collectives between the processes of a job: the ranks a launcher started
// (`mpirun`, Slurm's `srun`), or the one process of a plain run. The backend
// is MPI for CPU tensors (OpenMPI or any MPI-3 library) and NCCL for CUDA
// tensors (dist/nccl.h, bootstrapped over MPI); a single process gets a
// communicator whose collectives are identities, so every code path runs
// without a launcher. Guide: docs/dist.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "../core/tensor.h"

namespace ember::dist {

/// How all_reduce and reduce_scatter combine the ranks' values.
enum class ReduceOp { sum, average, max };
const char* reduce_op_name(ReduceOp op);

/// Where this process stands in the job, as the launcher says: OpenMPI's
/// OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK}, MPICH's PMI_{RANK,SIZE} (with
/// MPI_LOCALRANKID), or Slurm's SLURM_{PROCID,NTASKS,LOCALID}; without any of
/// them, rank 0 of 1. Values that do not parse or disagree (rank >= size) are
/// an Error naming the variable.
struct LaunchInfo {
    int rank = 0;
    int size = 1;
    int local_rank = 0;  ///< the rank among this machine's processes: picks the GPU
    std::string launcher = "none";  ///< "openmpi", "mpich", "slurm" or "none"
};
LaunchInfo launch_info_from_env();

/// A collective in flight. wait() blocks until it completed on this rank (its
/// result is then in the tensor it was given) or the communicator's timeout
/// passed, which is an Error naming the collective, its label, the rank and
/// the world size. A Work must be waited for before its tensor is read or
/// freed; destroying one unwaited waits for it (errors then are dropped).
/// On CUDA tensors (NCCL) wait() does not block the host: it makes this
/// thread's current stream wait for the collective, so work queued after it
/// sees the result; a timeout is found by a watchdog and raised by the next
/// call on the communicator (Note [NCCL timeouts] in dist/nccl.cpp).
class Work {
  public:
    virtual ~Work() = default;
    virtual void wait() = 0;
    /// True once it completed (never blocks; progresses it where needed).
    virtual bool done() = 0;
};

struct CommunicatorOptions {
    /// How long a collective may take before wait() gives up (--dist-timeout).
    std::chrono::milliseconds timeout = std::chrono::minutes(5);
    /// Where the tensors to exchange live: a CUDA device makes init("auto")
    /// choose NCCL (whose device is then the one local_cuda_device picks for
    /// this rank; in a single process this one).
    Device device = Device::cpu();
};

/// Collectives over CPU tensors (MPI), and CUDA tensors (NCCL). Every rank
/// must call the same collectives in the same order with tensors of the same
/// shape and dtype. Tensors must be contiguous; each collective works in
/// place or into the output given. Supported dtypes: f32, f64, i32, i64
/// natively; f16 and bf16 are reduced in f32 over MPI (the result rounded
/// once) and natively by NCCL, which also carries u8.
class Communicator {
  public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual int local_rank() const = 0;
    /// "single", "mpi" or "nccl".
    virtual std::string backend() const = 0;
    /// The device whose tensors it carries natively: the CPU, or the GPU of
    /// an NCCL communicator (put the model there).
    virtual Device device() const { return Device::cpu(); }

    /// Combines `t` across ranks, in place. `label` names it in errors
    /// (e.g. "bucket 3").
    virtual std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp op,
                                                   const std::string& label = "") = 0;
    /// Rank `root`'s `t` into every rank's `t`.
    virtual std::unique_ptr<Work> broadcast_async(Tensor t, int root,
                                                  const std::string& label = "") = 0;
    /// Every rank's `in` into `out`, which has size() × in.numel() elements
    /// (rank r's at [r × n, (r + 1) × n)), of in's dtype.
    virtual std::unique_ptr<Work> all_gather_async(Tensor out, Tensor in,
                                                   const std::string& label = "") = 0;
    /// Combines `in` (size() × out.numel() elements) across ranks and leaves
    /// block `rank()` of the result in `out`.
    virtual std::unique_ptr<Work> reduce_scatter_async(Tensor out, Tensor in, ReduceOp op,
                                                       const std::string& label = "") = 0;
    virtual std::unique_ptr<Work> barrier_async(const std::string& label = "") = 0;

    // Blocking forms: the async call, then wait().
    void all_reduce(Tensor t, ReduceOp op = ReduceOp::sum, const std::string& label = "");
    void broadcast(Tensor t, int root = 0, const std::string& label = "");
    void all_gather(Tensor out, Tensor in, const std::string& label = "");
    void reduce_scatter(Tensor out, Tensor in, ReduceOp op = ReduceOp::sum,
                        const std::string& label = "");
    void barrier(const std::string& label = "");

    std::chrono::milliseconds timeout() const { return options_.timeout; }
    /// For collectives started from now on.
    virtual void set_timeout(std::chrono::milliseconds t) { options_.timeout = t; }

  protected:
    explicit Communicator(CommunicatorOptions options) : options_(options) {}
    CommunicatorOptions options_;
};

/// The communicator of this process. `backend`: "auto", "mpi", "nccl" or
/// "single". "auto" is NCCL when options.device is a CUDA device (also in a
/// single process: a one-rank NCCL communicator), else MPI when a launcher
/// started more than one rank, else a single-process one. An NCCL
/// communicator carries CPU tensors too, over MPI (or as identities in a
/// single process). MPI is initialized once per process and finalized when
/// the last communicator is gone; asking for a backend this build lacks is
/// an Error.
std::shared_ptr<Communicator> init(const std::string& backend = "auto",
                                   CommunicatorOptions options = {});

/// A communicator of one rank: every collective completes at once (an
/// average or a sum of one rank is the tensor itself).
std::shared_ptr<Communicator> single_process(CommunicatorOptions options = {});

/// Whether this build has the MPI backend.
bool mpi_built();

/// The GPU of the rank with local rank `local_rank` on a machine where
/// `visible` CUDA devices are visible to it: cuda:local_rank, or cuda:0 when
/// each rank sees one device of its own (Slurm's --gpus-per-task, or
/// CUDA_VISIBLE_DEVICES set per rank). An Error when no device is visible,
/// or when local_rank >= visible > 1.
Device local_cuda_device(int local_rank, int visible);

}  // namespace ember::dist

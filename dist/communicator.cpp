// The launcher's environment, the blocking forms of the collectives, the
// single-process communicator and init(). The MPI backend: dist/mpi.cpp; the
// NCCL backend: dist/nccl.cpp.
#include "dist/communicator.h"

#include <cstdlib>

#include "core/error.h"
#include "dist/check.h"
#include "dist/nccl.h"

namespace ember::dist {

const char* reduce_op_name(ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: return "sum";
        case ReduceOp::average: return "average";
        case ReduceOp::max: return "max";
    }
    return "?";
}

namespace {

// The integer in environment variable `name`, or -1 when it is not set.
int env_int(const char* name) {
    const char* v = std::getenv(name);
    if (v == nullptr) return -1;
    char* end = nullptr;
    const long x = std::strtol(v, &end, 10);
    EMBER_CHECK(end != v && *end == '\0' && x >= 0 && x < (1L << 24), "environment variable ",
                name, "='", v, "' is not a rank or a size");
    return int(x);
}

}  // namespace

LaunchInfo launch_info_from_env() {
    struct Scheme {
        const char* launcher;
        const char* rank;
        const char* size;
        const char* local_rank;
    };
    // OpenMPI first: under `srun --mpi=pmix` both it and Slurm's are set.
    static constexpr Scheme kSchemes[] = {
        {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
        {"mpich", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
        {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
    };
    for (const Scheme& s : kSchemes) {
        const int rank = env_int(s.rank), size = env_int(s.size);
        if (rank < 0 && size < 0) continue;
        EMBER_CHECK(rank >= 0 && size >= 1 && rank < size, "the launcher's environment is "
                    "inconsistent: ", s.rank, "=", rank, ", ", s.size, "=", size);
        const int local = env_int(s.local_rank);
        return {rank, size, local < 0 ? 0 : local, s.launcher};
    }
    return {};
}

void Communicator::all_reduce(Tensor t, ReduceOp op, const std::string& label) {
    all_reduce_async(std::move(t), op, label)->wait();
}
void Communicator::broadcast(Tensor t, int root, const std::string& label) {
    broadcast_async(std::move(t), root, label)->wait();
}
void Communicator::all_gather(Tensor out, Tensor in, const std::string& label) {
    all_gather_async(std::move(out), std::move(in), label)->wait();
}
void Communicator::reduce_scatter(Tensor out, Tensor in, ReduceOp op, const std::string& label) {
    reduce_scatter_async(std::move(out), std::move(in), op, label)->wait();
}
void Communicator::barrier(const std::string& label) { barrier_async(label)->wait(); }

namespace {

class DoneWork final : public Work {
  public:
    void wait() override {}
    bool done() override { return true; }
};

// One rank: the checks every backend makes, then nothing to exchange
// (all_gather and reduce_scatter copy, since out and in differ).
class SingleCommunicator final : public Communicator {
  public:
    explicit SingleCommunicator(CommunicatorOptions o) : Communicator(o) {}
    int rank() const override { return 0; }
    int size() const override { return 1; }
    int local_rank() const override { return 0; }
    std::string backend() const override { return "single"; }

    std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp op, const std::string&) override {
        check_collective_tensor(t, "all_reduce");
        check_reduce_op(t, op, "all_reduce");
        return std::make_unique<DoneWork>();
    }
    std::unique_ptr<Work> broadcast_async(Tensor t, int root, const std::string&) override {
        check_collective_tensor(t, "broadcast");
        check_root(root, 1, "broadcast");
        return std::make_unique<DoneWork>();
    }
    std::unique_ptr<Work> all_gather_async(Tensor out, Tensor in, const std::string&) override {
        check_gather_pair(out, in, 1, "all_gather");
        out.copy_(in.reshape(out.shape()));
        return std::make_unique<DoneWork>();
    }
    std::unique_ptr<Work> reduce_scatter_async(Tensor out, Tensor in, ReduceOp op,
                                               const std::string&) override {
        check_gather_pair(in, out, 1, "reduce_scatter");
        check_reduce_op(in, op, "reduce_scatter");
        out.copy_(in.reshape(out.shape()));
        return std::make_unique<DoneWork>();
    }
    std::unique_ptr<Work> barrier_async(const std::string&) override {
        return std::make_unique<DoneWork>();
    }
};

}  // namespace

std::shared_ptr<Communicator> single_process(CommunicatorOptions options) {
    return std::make_shared<SingleCommunicator>(options);
}

Device local_cuda_device(int local_rank, int visible) {
    EMBER_CHECK(visible > 0, "dist: no CUDA device is visible to this process (local rank ",
                local_rank, "); NCCL needs one GPU per rank");
    if (visible == 1) return Device::cuda(0);
    EMBER_CHECK(local_rank >= 0 && local_rank < visible, "dist: local rank ", local_rank,
                " has no GPU of its own: ", visible, " CUDA devices are visible; start at most ",
                visible, " ranks per machine (or give each rank one device)");
    return Device::cuda(local_rank);
}

std::shared_ptr<Communicator> init(const std::string& backend, CommunicatorOptions options) {
    EMBER_CHECK(backend == "auto" || backend == "mpi" || backend == "nccl" || backend == "single",
                "dist::init: backend '", backend, "' is not one of auto, mpi, nccl, single");
    EMBER_CHECK(options.timeout.count() > 0, "dist::init: the timeout must be positive");
    if (backend == "single") return single_process(options);
    const LaunchInfo launch = launch_info_from_env();
    if (backend == "nccl" || (backend == "auto" && options.device.is_cuda())) {
        EMBER_CHECK(nccl_built(), "dist::init: ",
                    backend == "nccl" ? str("the NCCL backend was asked for")
                                      : str("tensors on ", options.device, " need NCCL"),
                    " but ember was built without it (CUDA and NCCL's headers and library are "
                    "needed; set NCCL_ROOT and configure again)");
        return make_nccl_communicator(options, launch);
    }
    if (backend == "auto" && launch.size == 1) return single_process(options);
    EMBER_CHECK(mpi_built(), "dist::init: ",
                backend == "mpi" ? str("the MPI backend was asked for")
                                 : str("the job has ", launch.size, " ranks (", launch.launcher, ")"),
                " but ember was built without MPI");
    return make_mpi_communicator(options);
}

}  // namespace ember::dist

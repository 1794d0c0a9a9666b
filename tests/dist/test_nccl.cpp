// The NCCL backend as test_dist sees it: the factory's choices and errors in
// every build, and, where NCCL is built and each rank has a GPU, the
// collectives over the job's GPUs against values every rank can compute
// (`mpirun -np 2 test_dist "[nccl]"` on a machine with two GPUs; one process
// on one GPU is a one-rank NCCL communicator). tests/cuda/test_cuda_nccl.cpp
// checks the streams, the errors and DDP on one GPU.
#include "support/dist_comm.h"
#include "dist/nccl.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                             DType::i32, DType::i64, DType::u8};

// Rank r's data: a seeded random tensor each rank can make for every other.
Tensor contribution(int rank, int64_t n, DType d, uint64_t salt) {
    return random_tensor({n}, d, 5000 * salt + uint64_t(rank), -50, 50);
}

// One rounding of the (f32-accumulated or exact) result at most, for 2 ranks.
double tol(DType d) { return d == DType::f16 ? 2e-3 : d == DType::bf16 ? 1e-2 : 1e-6; }

// Whether NCCL can run here with a GPU of its own for every rank (the same
// answer on every rank of one machine; ranks bound to one device each, as
// Slurm does, are skipped rather than taken for ranks sharing one).
bool nccl_runs(int world_size) {
    return dist::nccl_built() && cuda_device_count() >= world_size;
}

}  // namespace

TEST_CASE("local_cuda_device picks a rank's GPU", "[dist][nccl]") {
    CHECK(dist::local_cuda_device(0, 1) == Device::cuda(0));
    CHECK(dist::local_cuda_device(3, 1) == Device::cuda(0));  // one device per rank, bound
    CHECK(dist::local_cuda_device(0, 4) == Device::cuda(0));
    CHECK(dist::local_cuda_device(3, 4) == Device::cuda(3));
    REQUIRE_THROWS_WITH_MSG(dist::local_cuda_device(4, 4), "local rank 4 has no GPU of its own");
    REQUIRE_THROWS_WITH_MSG(dist::local_cuda_device(0, 0), "no CUDA device is visible");
}

TEST_CASE("init names the backends and refuses the ones this build lacks", "[dist][nccl]") {
    REQUIRE_THROWS_WITH_MSG(dist::init("gloo"), "is not one of auto, mpi, nccl, single");
    // A CPU device keeps the CPU backends (the default).
    CHECK(dist::init("single")->device() == Device::cpu());
    if (!dist::nccl_built()) {
        REQUIRE_THROWS_WITH_MSG(dist::init("nccl"), "NCCL backend was asked for but ember was "
                                                    "built without it");
        REQUIRE_THROWS_WITH_MSG(dist::init("auto", {.device = Device::cuda(0)}),
                                "tensors on cuda:0 need NCCL");
        REQUIRE_THROWS_WITH_MSG(dist::nccl_single_process(Device::cuda(0)),
                                "built without NCCL");
    } else if (cuda_device_count() == 0) {
        REQUIRE_THROWS_WITH_MSG(dist::init("nccl"), "no CUDA device is visible");
    }
}

TEST_CASE("NCCL collectives over the job's GPUs", "[dist][nccl]") {
    dist::Communicator& w = world();
    if (!nccl_runs(w.size())) return;  // (every rank alike)
    auto comm = dist::init("nccl", {.timeout = std::chrono::seconds(60)});
    REQUIRE(comm->backend() == "nccl");
    REQUIRE(comm->size() == w.size());
    REQUIRE(comm->rank() == w.rank());
    const Device dev = comm->device();
    REQUIRE(dev.is_cuda());
    uint64_t salt = 1;
    for (DType d : kDTypes)
        for (int64_t n : {0, 1, 7, 4099})
            for (dist::ReduceOp op :
                 {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max}) {
                if (op == dist::ReduceOp::average && !is_floating(d)) continue;
                ++salt;
                INFO(dtype_name(d) << " n=" << n << " " << dist::reduce_op_name(op));
                std::vector<double> want(size_t(n), op == dist::ReduceOp::max ? -1e300 : 0.0);
                for (int r = 0; r < w.size(); ++r) {
                    const std::vector<double> v = values(contribution(r, n, d, salt));
                    for (int64_t i = 0; i < n; ++i)
                        want[size_t(i)] = op == dist::ReduceOp::max
                                              ? std::max(want[size_t(i)], v[size_t(i)])
                                              : want[size_t(i)] + v[size_t(i)];
                }
                if (op == dist::ReduceOp::average)
                    for (double& x : want) x /= w.size();
                Tensor t = contribution(w.rank(), n, d, salt).to(dev);
                comm->all_reduce(t, op, "test");
                check_close(t.to(Device::cpu()), want, tol(d), tol(d));
            }
    const int root = w.size() - 1;
    for (DType d : kDTypes) {
        ++salt;
        INFO(dtype_name(d));
        Tensor b = contribution(w.rank(), 33, d, salt).to(dev);
        comm->broadcast(b, root);
        check_close(b.to(Device::cpu()), values(contribution(root, 33, d, salt)), 0, 0);

        Tensor out = full({w.size() * 5}, 7, {.dtype = d, .device = dev});
        comm->all_gather(out, contribution(w.rank(), 5, d, salt).to(dev));
        std::vector<double> gathered;
        for (int r = 0; r < w.size(); ++r)
            for (double x : values(contribution(r, 5, d, salt))) gathered.push_back(x);
        check_close(out.to(Device::cpu()), gathered, 0, 0);

        Tensor mine = full({6}, 7, {.dtype = d, .device = dev});
        comm->reduce_scatter(mine, contribution(w.rank(), 6 * w.size(), d, salt + 7).to(dev));
        std::vector<double> want(6, 0.0);
        for (int r = 0; r < w.size(); ++r) {
            const std::vector<double> v = values(contribution(r, 6 * w.size(), d, salt + 7));
            for (int i = 0; i < 6; ++i) want[size_t(i)] += v[size_t(w.rank() * 6 + i)];
        }
        check_close(mine.to(Device::cpu()), want, tol(d), tol(d));
    }
    // CPU tensors go over the host communicator (MPI, or identities).
    Tensor host = full({3}, double(w.rank() + 1));
    comm->all_reduce(host, dist::ReduceOp::sum, "host");
    const double n = w.size();
    check_close(host, std::vector<double>(3, n * (n + 1) / 2), 0, 0);
    comm->barrier("end of the NCCL test");
}

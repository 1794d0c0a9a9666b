// The NCCL backend on one GPU: a one-rank NCCL communicator (a unique id made
// in this process) still runs every collective through NCCL, so the dtype and
// reduction mapping, the ordering between the caller's stream and the
// communication stream, the argument checks and DDP over CUDA buckets are
// checked where one GPU is all there is. Results are exact: one rank's sum,
// average, maximum or copy is the input itself. Several ranks:
// tests/dist/test_nccl.cpp under mpirun (docs/dist.md, "NCCL").
#include "support/support.h"

#if EMBER_WITH_NCCL

#include <cmath>

#include "dist/nccl.h"

using namespace ember;
using namespace ember::test;

namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16,
                             DType::i32, DType::i64, DType::u8};
constexpr Device kGpu = Device::cuda(0);

std::shared_ptr<dist::Communicator> one_rank(std::shared_ptr<dist::Communicator> host = nullptr) {
    return dist::nccl_single_process(kGpu, {.timeout = std::chrono::seconds(60)}, std::move(host));
}

Tensor on_cpu(const Tensor& t) { return t.to(Device::cpu()); }

}  // namespace

TEST_CASE("cuda: nccl all_reduce of one rank leaves every dtype as it was", "[cuda][nccl]") {
    auto comm = one_rank();
    CHECK(comm->backend() == "nccl");
    CHECK(comm->size() == 1);
    CHECK(comm->rank() == 0);
    CHECK(comm->device() == kGpu);
    uint64_t seed = 1;
    for (DType d : kDTypes)
        for (int64_t n : {0, 1, 7, 1000, 4099})
            for (dist::ReduceOp op :
                 {dist::ReduceOp::sum, dist::ReduceOp::average, dist::ReduceOp::max}) {
                if (op == dist::ReduceOp::average && !is_floating(d)) continue;
                INFO(dtype_name(d) << " n=" << n << " " << dist::reduce_op_name(op));
                const Tensor host = random_tensor({n}, d, ++seed, -50, 50);
                Tensor t = host.to(kGpu);
                comm->all_reduce(t, op, "test");
                CHECK(t.dtype() == d);
                check_close(on_cpu(t), host, 0, 0);
            }
}

TEST_CASE("cuda: nccl broadcast, all_gather and reduce_scatter of one rank", "[cuda][nccl]") {
    auto comm = one_rank();
    uint64_t seed = 100;
    for (DType d : kDTypes)
        for (int64_t n : {0, 1, 33, 4099}) {
            INFO(dtype_name(d) << " n=" << n);
            const Tensor host = random_tensor({n}, d, ++seed, -50, 50);
            Tensor b = host.to(kGpu);
            comm->broadcast(b, 0);
            check_close(on_cpu(b), host, 0, 0);

            // Outputs poisoned first; any shape of the right element count.
            Tensor gathered = full({1, n}, 3, {.dtype = d, .device = kGpu});
            comm->all_gather(gathered, host.to(kGpu));
            check_close(on_cpu(gathered).reshape({n}), host, 0, 0);

            for (dist::ReduceOp op : {dist::ReduceOp::sum, dist::ReduceOp::average}) {
                if (op == dist::ReduceOp::average && !is_floating(d)) continue;
                Tensor mine = full({n}, 3, {.dtype = d, .device = kGpu});
                comm->reduce_scatter(mine, host.to(kGpu), op);
                check_close(on_cpu(mine), host, 0, 0);
            }
        }
    comm->barrier("end");
}

TEST_CASE("cuda: nccl work is ordered after the caller's stream and before what follows wait()",
          "[cuda][nccl]") {
    auto comm = one_rank();
    // `in` is the last of a chain of kernels on the current stream: the
    // communication stream must wait for it. `out` is read by a kernel queued
    // after wait() without any host synchronization: the current stream must
    // wait for the collective.
    for (int rep = 0; rep < 3; ++rep) {
        Tensor busy = randn({1 << 24}, {.device = kGpu});
        for (int i = 0; i < 8; ++i) busy = exp(mul(busy, -0.5));  // bounded after the first
        Tensor in = mul(busy, 2.0);
        Tensor out = full({1 << 24}, std::nan(""), {.device = kGpu});
        auto work = comm->all_gather_async(out, in, "ordering");
        work->wait();
        Tensor after = add(out, 1.0);
        Tensor want = add(in, 1.0);
        check_close(on_cpu(after), on_cpu(want), 0, 0);
        synchronize(kGpu);
        CHECK(work->done());
    }
    // Several in flight, waited for in reverse order.
    Tensor a = random_tensor({1000}, DType::f32, 7).to(kGpu);
    Tensor b = random_tensor({3}, DType::f64, 8).to(kGpu);
    const Tensor a0 = on_cpu(a), b0 = on_cpu(b);
    auto wa = comm->all_reduce_async(a, dist::ReduceOp::sum, "a");
    auto wb = comm->all_reduce_async(b, dist::ReduceOp::max, "b");
    wb->wait();
    wa->wait();
    check_close(on_cpu(a), a0, 0, 0);
    check_close(on_cpu(b), b0, 0, 0);
}

TEST_CASE("cuda: nccl argument errors name the collective and leave it usable",
          "[cuda][nccl]") {
    auto comm = one_rank();  // no host communicator: CPU tensors are refused
    REQUIRE_THROWS_WITH_MSG(comm->all_reduce(ones({3})),
                            "all_reduce: the tensor is on cpu, but this NCCL communicator "
                            "carries tensors of cuda:0 only");
    REQUIRE_THROWS_WITH_MSG(comm->broadcast(ones({3})), "broadcast: the tensor is on cpu");
    REQUIRE_THROWS_WITH_MSG(comm->all_gather(ones({3}, {.device = kGpu}), ones({3})),
                            "all_gather: the tensors are on cuda:0 and cpu");
    REQUIRE_THROWS_WITH_MSG(
        comm->all_gather(ones({3}, {.device = kGpu}), ones({3}, {DType::f64, kGpu})),
        "all_gather: dtypes differ (f32 and f64)");
    REQUIRE_THROWS_WITH_MSG(comm->all_gather(ones({4}, {.device = kGpu}), ones({3}, {.device = kGpu})),
                            "all_gather: 4 elements (shape [4]) are not 1 blocks of 3");
    REQUIRE_THROWS_WITH_MSG(
        comm->reduce_scatter(ones({2}, {.device = kGpu}), ones({3}, {.device = kGpu})),
        "reduce_scatter: 3 elements (shape [3]) are not 1 blocks of 2");
    REQUIRE_THROWS_WITH_MSG(comm->all_reduce(zeros({4, 4}, {.device = kGpu}).transpose(0, 1)),
                            "all_reduce: the tensor of shape [4, 4] is not contiguous");
    REQUIRE_THROWS_WITH_MSG(comm->all_reduce(zeros({3}, {DType::boolean, kGpu})),
                            "dtype bool is not carried");
    REQUIRE_THROWS_WITH_MSG(
        comm->all_reduce(zeros({3}, {DType::i32, kGpu}), dist::ReduceOp::average),
        "average of i32");
    REQUIRE_THROWS_WITH_MSG(comm->broadcast(ones({3}, {.device = kGpu}), 1),
                            "root 1 is not a rank of 1");
    REQUIRE_THROWS_WITH_MSG(comm->all_reduce(Tensor()), "all_reduce: the tensor is undefined");
    Tensor t = full({2}, 5.0, {.device = kGpu});
    comm->all_reduce(t);
    check_close(on_cpu(t), std::vector<double>(2, 5.0), 0, 0);
    REQUIRE_THROWS_WITH_MSG(dist::nccl_single_process(Device::cpu()), "expected a CUDA device");
}

TEST_CASE("cuda: nccl with a host communicator carries CPU tensors too", "[cuda][nccl]") {
    auto comm = one_rank(dist::single_process());
    Tensor cpu = full({3}, 2.0);
    comm->all_reduce(cpu, dist::ReduceOp::average);
    check_close(cpu, std::vector<double>(3, 2.0), 0, 0);
    // dist::init picks NCCL for a CUDA device, in a plain process too.
    auto init = dist::init("auto", {.timeout = std::chrono::seconds(60), .device = kGpu});
    CHECK(init->backend() == "nccl");
    CHECK(init->device() == kGpu);
    Tensor g = full({5}, 4.0, {.device = kGpu});
    init->all_reduce(g, dist::ReduceOp::sum);
    Tensor i64 = full({1}, 9.0, {.dtype = DType::i64});  // e.g. the trainer's flags
    init->broadcast(i64, 0);
    check_close(on_cpu(g), std::vector<double>(5, 4.0), 0, 0);
    check_close(i64, std::vector<double>{9.0}, 0, 0);
}

TEST_CASE("cuda: DDP over an NCCL communicator of one rank keeps backward's gradients",
          "[cuda][nccl][ddp]") {
    auto make = [] {
        manual_seed(3);
        auto m = std::make_shared<nn::Sequential>(nn::Linear(10, 32), nn::ReLU(),
                                                  nn::Linear(32, 16), nn::ReLU(),
                                                  nn::Linear(16, 4));
        m->to(kGpu);
        return m;
    };
    auto model = make(), reference = make();
    // The bucket order broadcast after the first backward is a CPU tensor:
    // the host communicator carries it.
    dist::DistributedDataParallel ddp(model, one_rank(dist::single_process()),
                                      {.bucket_bytes = 256});
    CHECK(ddp.buckets().size() > 2);
    for (uint64_t step = 0; step < 3; ++step) {
        const Tensor x = random_tensor({12, 10}, DType::f32, 40 + step).to(kGpu);
        const Tensor y = random_tensor({12}, DType::i64, 60 + step, 0, 4).to(kGpu);
        cross_entropy(ddp(x), y).backward();
        cross_entropy((*reference)(x), y).backward();
        const auto pa = model->named_parameters(), pb = reference->named_parameters();
        REQUIRE(pa.size() == pb.size());
        for (size_t i = 0; i < pa.size(); ++i) {
            INFO("step " << step << ", gradient of " << pa[i].first);
            REQUIRE(pa[i].second.grad().defined());
            REQUIRE(pa[i].second.grad().device() == kGpu);
            check_close(on_cpu(pa[i].second.grad()), on_cpu(pb[i].second.grad()), 1e-6, 1e-7);
        }
        model->zero_grad();
        reference->zero_grad();
    }
    CHECK(ddp.syncs() == 3);
}

#endif  // EMBER_WITH_NCCL

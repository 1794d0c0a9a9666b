// `ember bench allreduce`: the communicator's all-reduce and DDP's cost in
// backward. Run it under the launcher, `mpirun -np N ember bench allreduce`;
// in a plain process the communicator has one rank and there is nothing to
// measure (one row says so).
//
// all_reduce (f32, sum, in place), 1 MB … 256 MB: each timed run starts
// after a barrier, and its time is the slowest rank's. Bus bandwidth as
// nccl-tests defines it: algbw = bytes / time, busbw = algbw × 2(n − 1)/n
// (what each rank's link carries in a ring all-reduce). The limit is the
// host's memory-copy bandwidth measured in the same run: on one machine
// MPI's shared-memory transport moves the bytes with copies.
//
// ddp: forward + backward of mlp (batch 128 per rank) with and without
// DistributedDataParallel; fraction = plain / DDP time (1.0: the all-reduce
// is hidden entirely or free).
#include <chrono>

#include "bench/bench.h"
#include "core/error.h"
#include "dist/ddp.h"
#include "ember/ember.h"

namespace ember::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Median over `repeats` of the slowest rank's time in ms for f().
double collective_ms(dist::Communicator& comm, const std::function<void()>& f, const Options& o) {
    std::vector<double> times;
    for (int i = 0; i < o.warmup + o.repeats; ++i) {
        comm.barrier("bench");
        const auto t0 = Clock::now();
        f();
        Tensor ms = full({1}, std::chrono::duration<double, std::milli>(Clock::now() - t0).count(),
                         {.dtype = DType::f64});
        comm.all_reduce(ms, dist::ReduceOp::max, "bench time");
        if (i >= o.warmup) times.push_back(ms.data<double>()[0]);
    }
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

}  // namespace

void run_allreduce(const Options& o, Report& report) {
    auto comm = dist::init();
    const int n = comm->size();
    const bool lead = comm->rank() == 0;
    if (n == 1) {
        report.add({"allreduce", "all_reduce", "1 rank", 0, -1, -1, -1, "",
                    "a single process: run `mpirun -np N ember bench allreduce`"});
        return;
    }
    const double copy = measure_copy_gbps(o);
    const std::vector<int64_t> sizes_mb =
        o.quick ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 4, 16, 64, 256};
    for (int64_t mb : sizes_mb) {
        Tensor t = full({mb << 18}, 1.0);  // mb MiB of f32
        const double ms = collective_ms(
            *comm, [&] { comm->all_reduce(t, dist::ReduceOp::sum, "bench"); }, o);
        const double bytes = double(t.numel()) * 4;
        const double algbw = bytes / (ms * 1e6);
        const double busbw = algbw * 2.0 * (n - 1) / n;
        if (lead)
            report.add({"allreduce", "all_reduce f32 sum", str(mb, " MiB x ", n, " ranks"), ms,
                        busbw, -1, busbw / copy, limit_label("copy", copy, "GB/s"),
                        limit_label("algbw", algbw, "GB/s") + " (" + comm->backend() + ")"});
    }

    // DDP in backward: the same step with and without it.
    const int64_t batch = o.quick ? 32 : 128;
    manual_seed(1);
    auto plain = nn::make_model("mlp");
    manual_seed(1);
    auto wrapped = nn::make_model("mlp");
    dist::DistributedDataParallel ddp(wrapped, comm);
    Generator g(7 + uint64_t(comm->rank()));
    const Tensor x = rand({batch, 784}, {}, &g);
    const Tensor y = randint(0, 10, {batch}, {.dtype = DType::i64}, &g);
    const double plain_ms = collective_ms(
        *comm, [&] { cross_entropy((*plain)(x), y).backward(); }, o);
    const double ddp_ms = collective_ms(
        *comm, [&] { cross_entropy(ddp(x), y).backward(); }, o);
    if (lead) {
        const std::string shape = str("mlp, batch ", batch, " x ", n, " ranks");
        report.add({"allreduce", "forward+backward", shape, plain_ms, -1, -1, -1, "", "no DDP"});
        report.add({"allreduce", "forward+backward DDP", shape, ddp_ms, -1, -1,
                    plain_ms / ddp_ms, "the same without DDP",
                    limit_label(str(ddp.buckets().size(), " bucket(s) of").c_str(),
                                double(nn::parameter_count(*wrapped)) * 4 / 1e6, "MB")});
    }
}

}  // namespace ember::bench

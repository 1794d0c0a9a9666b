// `ember bench allreduce`: the communicator's all-reduce and DDP's cost in
// backward. Run it under the launcher, `mpirun -np N ember bench allreduce`;
// in a plain process the MPI communicator has one rank and there is nothing
// to measure (one row says so). `--device cuda` runs the same rows over NCCL
// with CUDA tensors, one GPU per rank (a single process: a one-rank NCCL
// communicator, whose bus bandwidth is 0 by definition).
//
// all_reduce (f32, sum, in place), 1 MB … 256 MB: each timed run starts
// after a barrier, and its time is the slowest rank's. Bus bandwidth as
// nccl-tests defines it: algbw = bytes / time, busbw = algbw × 2(n − 1)/n
// (what each rank's link carries in a ring all-reduce). The limit is the
// copy bandwidth of the tensors' memory measured in the same run: on one
// machine MPI's shared-memory transport moves the bytes with copies.
//
// backward: the forward runs outside the timed region, so the rows time
// only the backward in which DDP's buckets are all-reduced while the rest of
// the gradients are computed. Each model runs without DDP and with it, at a
// bucket size that gives several buckets (and mlp also at the default 25 MB:
// one bucket, which cannot start before the last gradient, so nothing can
// overlap). fraction = plain / DDP time (1.0: the all-reduce is hidden
// entirely or free); the note gives the bucket count and the time of one
// all-reduce of all the gradients alone, the cost with no overlap at all.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include "bench/bench.h"
#include "core/cuda_context.h"
#include "core/error.h"
#include "dist/ddp.h"
#include "dist/nccl.h"
#include "ember/ember.h"

namespace ember::bench {

namespace {

using Clock = std::chrono::steady_clock;

// Waits for the work queued on `dev` (NCCL's wait() does not block the host).
void settle(Device dev) {
    if (dev.is_cuda()) synchronize(dev);
}

// The slowest rank's time in ms since t0.
double slowest_ms(dist::Communicator& comm, Clock::time_point t0) {
    Tensor ms = full({1}, std::chrono::duration<double, std::milli>(Clock::now() - t0).count(),
                     {.dtype = DType::f64});
    comm.all_reduce(ms, dist::ReduceOp::max, "bench time");
    return ms.data<double>()[0];
}

// x with `decimals` digits after the point, for the notes.
std::string fixed(double x, int decimals) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
    return buf;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Median over `repeats` of the slowest rank's time in ms for f().
double collective_ms(dist::Communicator& comm, Device dev, const std::function<void()>& f,
                     const Options& o) {
    std::vector<double> times;
    for (int i = 0; i < o.warmup + o.repeats; ++i) {
        comm.barrier("bench");
        const auto t0 = Clock::now();
        f();
        settle(dev);
        const double ms = slowest_ms(comm, t0);
        if (i >= o.warmup) times.push_back(ms);
    }
    return median(times);
}

// Median backward time in ms (the slowest rank's) of each loss in turn, its
// forward untimed: forward, barrier, then backward alone on the clock. One
// untimed round first, so DDP's one-off re-layout after its first backward
// is not timed either. Interleaved, so a change in load hits all alike.
std::vector<double> backward_ms(dist::Communicator& comm, Device dev,
                                const std::vector<std::function<Tensor()>>& losses,
                                const Options& o) {
    std::vector<std::vector<double>> times(losses.size());
    for (int i = 0; i < 1 + o.warmup + o.repeats; ++i)
        for (size_t j = 0; j < losses.size(); ++j) {
            Tensor loss = losses[j]();
            settle(dev);
            comm.barrier("bench");
            const auto t0 = Clock::now();
            loss.backward();
            settle(dev);
            const double ms = slowest_ms(comm, t0);
            if (i > o.warmup) times[j].push_back(ms);
        }
    std::vector<double> med;
    for (auto& t : times) med.push_back(median(t));
    return med;
}

// One model without DDP and with it, at each of `bucket_bytes`.
void ddp_rows(const std::shared_ptr<dist::Communicator>& comm, const std::string& name,
              int64_t batch, const std::vector<int64_t>& bucket_bytes, const Options& o,
              Report& report) {
    const Device dev = comm->device();
    const int n = comm->size();
    auto make = [&] {
        manual_seed(1);
        auto m = nn::make_model(name);
        m->to(dev);
        return m;
    };
    auto plain = make();
    std::vector<std::shared_ptr<nn::Module>> models;
    std::vector<std::unique_ptr<dist::DistributedDataParallel>> ddps;
    for (int64_t bytes : bucket_bytes) {
        models.push_back(make());
        ddps.push_back(std::make_unique<dist::DistributedDataParallel>(
            models.back(), comm, dist::DdpOptions{.bucket_bytes = bytes}));
    }
    Generator g(7 + uint64_t(comm->rank()));
    const Tensor x = rand({batch, 1, 28, 28}, {}, &g).to(dev);
    const Tensor y = randint(0, 10, {batch}, {.dtype = DType::i64}, &g).to(dev);
    std::vector<std::function<Tensor()>> losses = {[&] {
        plain->zero_grad();
        return cross_entropy((*plain)(x), y);
    }};
    for (size_t k = 0; k < ddps.size(); ++k)
        losses.push_back([&, k] {
            models[k]->zero_grad();
            return cross_entropy((*ddps[k])(x), y);
        });
    const std::vector<double> ms = backward_ms(*comm, dev, losses, o);

    // The cost with no overlap: every gradient in one all-reduce, alone.
    const int64_t params = nn::parameter_count(*plain);
    Tensor grads = full({params}, 1.0, {.device = dev});
    const double alone_ms = collective_ms(
        *comm, dev, [&] { comm->all_reduce(grads, dist::ReduceOp::average, "bench"); }, o);
    if (comm->rank() != 0) return;
    const std::string shape = str(name, ", batch ", batch, " x ", n, " ranks");
    report.add({"allreduce", "backward", shape, ms[0], -1, -1, -1, "", "no DDP", dev.str()});
    for (size_t k = 0; k < ddps.size(); ++k) {
        const size_t count = ddps[k]->buckets().size();
        const std::string buckets =
            str(count, count == 1 ? " bucket" : " buckets", " (bucket_bytes ",
                bucket_bytes[k] >= (1 << 20) ? str(bucket_bytes[k] >> 20, " MiB")
                                             : str(bucket_bytes[k] >> 10, " KiB"),
                ")");
        Row r{"allreduce", "backward DDP", shape, ms[k + 1], -1, -1, ms[0] / ms[k + 1],
              "the same without DDP",
              str(buckets, "; all-reduce of all ", fixed(double(params) * 4 / 1e6, 1),
                  " MB alone ", fixed(alone_ms, 3), " ms"),
              dev.str()};
        report.add(r);
    }
}

}  // namespace

void run_allreduce(const Options& o, Report& report) {
    const bool cuda = o.device == "cuda";
    if (cuda && (!dist::nccl_built() || cuda_device_count() == 0)) {
        report.add({"allreduce", "all_reduce", "-", 0, -1, -1, -1, "",
                    !dist::nccl_built() ? "--device cuda: this build has no NCCL (docs/dist.md)"
                                        : "--device cuda: no CUDA device is visible",
                    "cuda"});
        return;
    }
    auto comm = cuda ? dist::init("auto", {.device = Device::cuda(0)}) : dist::init();
    const int n = comm->size();
    const Device dev = comm->device();
    if (n == 1 && !cuda) {
        report.add({"allreduce", "all_reduce", "1 rank", 0, -1, -1, -1, "",
                    "a single process: run `mpirun -np N ember bench allreduce`"});
        return;
    }
    const double copy = cuda ? measure_gpu_copy_gbps(dev, o) : measure_copy_gbps(o);
    const std::vector<int64_t> sizes_mb =
        o.quick ? std::vector<int64_t>{1, 4} : std::vector<int64_t>{1, 4, 16, 64, 256};
    for (int64_t mb : sizes_mb) {
        Tensor t = full({mb << 18}, 1.0, {.device = dev});  // mb MiB of f32
        const double ms = collective_ms(
            *comm, dev, [&] { comm->all_reduce(t, dist::ReduceOp::sum, "bench"); }, o);
        const double bytes = double(t.numel()) * 4;
        const double algbw = bytes / (ms * 1e6);
        const double busbw = algbw * 2.0 * (n - 1) / n;
        if (comm->rank() == 0)
            report.add({"allreduce", "all_reduce f32 sum", str(mb, " MiB x ", n, " ranks"), ms,
                        busbw, -1, busbw / copy, limit_label("copy", copy, "GB/s"),
                        limit_label("algbw", algbw, "GB/s") + " (" + comm->backend() + ")",
                        dev.str()});
    }

    // mlp's 2.1 MB of gradients: one default bucket, or a few of at least
    // 256 KiB (its first layer's weight alone is 1.6 MB, and a slot is never
    // split); resnet8's 0.3 MB in buckets of 32 KiB (its largest weight is
    // 147 KB). The rows print the counts.
    ddp_rows(comm, "mlp", o.quick ? 32 : 128, {int64_t(25) << 20, int64_t(256) << 10}, o, report);
    ddp_rows(comm, "resnet8", o.quick ? 8 : 32, {int64_t(32) << 10}, o, report);
}

}  // namespace ember::bench

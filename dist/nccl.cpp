// The NCCL backend: collectives over CUDA tensors, one NCCL communicator per
// process and device (rank 0's unique id broadcast over MPI; made here for a
// single process). Library calls per collective: ncclAllReduce (averages as
// ncclAvg), ncclBroadcast, ncclAllGather, ncclReduceScatter; a barrier is a
// one-element ncclAllReduce whose wait() blocks the host. Each is queued on
// the communicator's own stream after that stream waited (an event) for the
// caller's current stream, and its Work's wait() makes the caller's current
// stream wait for it in turn: nothing blocks the host. The tensors are marked
// as used on the communication stream (record_stream) so the caching
// allocator does not reuse them before NCCL is done with them. Bytes moved:
// NCCL's ring or tree, about 2(n-1)/n of the tensor per rank for an
// all-reduce, (n-1)/n for the others. Dtypes f32, f64, f16, bf16, i32, i64,
// u8, all carried natively; NCCL's reductions are deterministic for a fixed
// job shape and NCCL version. A watchdog aborts past the timeout (Note [NCCL
// timeouts]). CPU tensors go to the host communicator (MPI).
// Test: tests/cuda/test_cuda_nccl.cpp.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "core/cuda_context.h"
#include "core/error.h"
#include "dist/check.h"
#include "dist/nccl.h"
#include "dist/nccl_state.h"
#include "kernels/factories.h"

namespace ember::dist {

namespace {

ncclDataType_t nccl_type(DType d) {
    switch (d) {
        case DType::f32: return ncclFloat32;
        case DType::f64: return ncclFloat64;
        case DType::f16: return ncclFloat16;
        case DType::bf16: return ncclBfloat16;
        case DType::i32: return ncclInt32;
        case DType::i64: return ncclInt64;
        case DType::u8: return ncclUint8;
        case DType::boolean: break;
    }
    EMBER_FAIL("dist: dtype ", d, " is not carried by NCCL (f32, f64, f16, bf16, i32, i64, u8)");
}

ncclRedOp_t nccl_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::sum: return ncclSum;
        case ReduceOp::average: return ncclAvg;
        case ReduceOp::max: return ncclMax;
    }
    EMBER_FAIL("internal error (please report): reduce op ", int(op));
}

// Waits for one collective. On NCCL the host does not block (but for a
// barrier, whose point is the host): the caller's current stream waits.
class NcclWork final : public Work {
  public:
    NcclWork(std::shared_ptr<NcclState> state, std::shared_ptr<CudaEvent> done, bool blocking)
        : state_(std::move(state)), done_(std::move(done)), blocking_(blocking) {}
    ~NcclWork() override {
        if (!waited_ && !state_->is_broken()) try {
                wait();
            } catch (...) {
            }
    }

    bool done() override {
        state_->raise_if_broken();
        return done_->query();
    }

    void wait() override {
        state_->raise_if_broken();
        // The watchdog aborts a collective past its timeout, which ends this loop.
        if (blocking_)
            while (!done_->query()) {
                state_->raise_if_broken();
                std::this_thread::sleep_for(std::chrono::microseconds(50));
            }
        done_->wait(current_stream(state_->device));
        waited_ = true;
    }

  private:
    std::shared_ptr<NcclState> state_;
    std::shared_ptr<CudaEvent> done_;
    bool blocking_;
    bool waited_ = false;
};

class NcclCommunicator final : public Communicator {
  public:
    NcclCommunicator(CommunicatorOptions o, std::shared_ptr<NcclState> state)
        : Communicator(o), state_(std::move(state)) {}

    int rank() const override { return state_->rank; }
    int size() const override { return state_->size; }
    int local_rank() const override { return state_->local_rank; }
    std::string backend() const override { return "nccl"; }
    Device device() const override { return state_->device; }

    std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp op,
                                           const std::string& label) override {
        if (on_host(t, "all_reduce")) return state_->host->all_reduce_async(t, op, label);
        check_tensor(t, "all_reduce");
        check_reduce_op(t, op, "all_reduce");
        void* p = t.data_ptr();
        const size_t n = size_t(t.numel());
        const ncclDataType_t type = nccl_type(t.dtype());
        const ncclRedOp_t r = nccl_op(op);
        return enqueue(describe("all_reduce", op, t, label), {t}, n, "ncclAllReduce",
                       [=](ncclComm_t c, cudaStream_t s) {
                           return ncclAllReduce(p, p, n, type, r, c, s);
                       });
    }

    std::unique_ptr<Work> broadcast_async(Tensor t, int root, const std::string& label) override {
        if (on_host(t, "broadcast")) return state_->host->broadcast_async(t, root, label);
        check_tensor(t, "broadcast");
        check_root(root, size(), "broadcast");
        void* p = t.data_ptr();
        const size_t n = size_t(t.numel());
        const ncclDataType_t type = nccl_type(t.dtype());
        return enqueue(describe("broadcast", std::nullopt, t, label), {t}, n, "ncclBroadcast",
                       [=](ncclComm_t c, cudaStream_t s) {
                           return ncclBroadcast(p, p, n, type, root, c, s);
                       });
    }

    std::unique_ptr<Work> all_gather_async(Tensor out, Tensor in,
                                           const std::string& label) override {
        if (on_host(out, in, "all_gather"))
            return state_->host->all_gather_async(out, in, label);
        check_pair(out, in, "all_gather");
        const void* src = in.data_ptr();
        void* dst = out.data_ptr();
        const size_t n = size_t(in.numel());
        const ncclDataType_t type = nccl_type(in.dtype());
        return enqueue(describe("all_gather", std::nullopt, in, label), {out, in}, n,
                       "ncclAllGather", [=](ncclComm_t c, cudaStream_t s) {
                           return ncclAllGather(src, dst, n, type, c, s);
                       });
    }

    std::unique_ptr<Work> reduce_scatter_async(Tensor out, Tensor in, ReduceOp op,
                                               const std::string& label) override {
        if (on_host(out, in, "reduce_scatter"))
            return state_->host->reduce_scatter_async(out, in, op, label);
        check_pair(in, out, "reduce_scatter");
        check_reduce_op(in, op, "reduce_scatter");
        const void* src = in.data_ptr();
        void* dst = out.data_ptr();
        const size_t n = size_t(out.numel());
        const ncclDataType_t type = nccl_type(in.dtype());
        const ncclRedOp_t r = nccl_op(op);
        return enqueue(describe("reduce_scatter", op, in, label), {out, in}, n,
                       "ncclReduceScatter", [=](ncclComm_t c, cudaStream_t s) {
                           return ncclReduceScatter(src, dst, n, type, r, c, s);
                       });
    }

    std::unique_ptr<Work> barrier_async(const std::string& label) override {
        void* p = state_->scratch.data_ptr();
        return enqueue(label.empty() ? std::string("barrier") : str("barrier (", label, ")"),
                       {state_->scratch}, 1, "ncclAllReduce",
                       [=](ncclComm_t c, cudaStream_t s) {
                           return ncclAllReduce(p, p, 1, ncclFloat32, ncclSum, c, s);
                       },
                       /*blocking=*/true);
    }

  private:
    // A CPU tensor goes to the host communicator, when there is one.
    bool on_host(const Tensor& t, const char* op) const {
        if (!t.defined() || !t.device().is_cpu()) return false;
        EMBER_CHECK(state_->host != nullptr, op, ": the tensor is on cpu, but this NCCL "
                    "communicator carries tensors of ", state_->device, " only (it has no host "
                    "communicator for CPU tensors); move the tensor there with .to(",
                    state_->device, ")");
        return true;
    }
    bool on_host(const Tensor& a, const Tensor& b, const char* op) const {
        EMBER_CHECK(!a.defined() || !b.defined() || a.device() == b.device(), op,
                    ": the tensors are on ", a.device(), " and ", b.device(),
                    "; both must be on one device");
        return on_host(a, op);
    }

    void check_tensor(const Tensor& t, const char* op) const {
        const Device d = state_->device;
        EMBER_CHECK(t.defined(), op, ": the tensor is undefined");
        EMBER_CHECK(t.device() == d, op, ": the tensor is on ", t.device(), " but the NCCL "
                    "communicator of rank ", rank(), " on ", d,
                    " (one communicator per process and device)");
        EMBER_CHECK(t.is_contiguous(), op, ": the tensor of shape ", shape_str(t.shape()),
                    " is not contiguous");
        EMBER_CHECK(t.dtype() != DType::boolean, op, ": dtype ", t.dtype(),
                    " is not carried (f32, f64, f16, bf16, i32, i64, u8)");
    }

    // `whole` holds size() blocks of `part`'s elements, of part's dtype.
    void check_pair(const Tensor& whole, const Tensor& part, const char* op) const {
        check_tensor(whole, op);
        check_tensor(part, op);
        EMBER_CHECK(whole.dtype() == part.dtype(), op, ": dtypes differ (", whole.dtype(),
                    " and ", part.dtype(), ")");
        EMBER_CHECK(whole.numel() == part.numel() * size(), op, ": ", whole.numel(),
                    " elements (shape ", shape_str(whole.shape()), ") are not ", size(),
                    " blocks of ", part.numel(), " (shape ", shape_str(part.shape()), ")");
    }

    static std::string describe(const char* op, std::optional<ReduceOp> r, const Tensor& t,
                                const std::string& label) {
        return str(op, r ? str(" ", reduce_op_name(*r)) : std::string(), " (",
                   label.empty() ? std::string() : label + ", ", t.numel(), " ", t.dtype(),
                   " elements)");
    }

    // Queues `call` on the communication stream, ordered after the caller's
    // current stream, and hands the collective to the watchdog. A collective
    // of no elements still counts (every rank counts alike) but calls nothing.
    template <class Call>
    std::unique_ptr<Work> enqueue(std::string what, std::initializer_list<Tensor> tensors,
                                  size_t count, const char* call_name, Call call,
                                  bool blocking = false) {
        NcclState& s = *state_;
        s.raise_if_broken();
        const StreamRef comm_stream = s.stream->ref();
        auto done = std::make_shared<CudaEvent>(s.device);
        {
            std::unique_lock<std::mutex> lock(s.comm_mu);
            if (s.comm == nullptr) {  // aborted since the check above
                lock.unlock();
                s.raise_if_broken();
                EMBER_FAIL("internal error (please report): ", what, ": no NCCL communicator");
            }
            s.ready->record(current_stream(s.device));
            s.ready->wait(comm_stream);
            CudaContext& ctx = CudaContext::of(s.device);
            for (const Tensor& t : tensors) {
                if (t.numel() == 0) continue;
                try {
                    ctx.record_stream(t.storage()->data(), comm_stream);
                } catch (const Error&) {
                    // Not the allocator's memory (from_blob): nothing of it to hold back.
                }
            }
            if (count > 0) {
                ncclResult_t r;
                {
                    const NcclState::Busy busy(s, call_name);
                    const DeviceGuard guard(s.device);
                    r = call(s.comm, static_cast<cudaStream_t>(comm_stream.handle));
                }
                if (r != ncclSuccess)
                    EMBER_FAIL(what, ": ", call_name, " failed on rank ", s.rank, " of ", s.size,
                               ": ", nccl_text(r));
            }
            done->record(comm_stream);
            s.track(done, std::move(what), timeout());
        }
        return std::make_unique<NcclWork>(state_, std::move(done), blocking);
    }

    std::shared_ptr<NcclState> state_;
};

std::shared_ptr<Communicator> open(CommunicatorOptions o, Device device, int rank, int size,
                                   int local_rank, const ncclUniqueId& id,
                                   std::shared_ptr<Communicator> host,
                                   std::shared_ptr<Communicator> census) {
    auto state = std::make_shared<NcclState>(device, rank, size, local_rank, o.timeout,
                                             std::move(host), std::move(census));
    state->open(id);
    return std::make_shared<NcclCommunicator>(o, std::move(state));
}

}  // namespace

bool nccl_built() { return true; }

std::shared_ptr<Communicator> nccl_single_process(Device device, CommunicatorOptions options,
                                                  std::shared_ptr<Communicator> host) {
    EMBER_CHECK(device.is_cuda(), "nccl_single_process: expected a CUDA device, got ", device);
    EMBER_CHECK(options.timeout.count() > 0, "nccl_single_process: the timeout must be positive");
    CudaContext::of(device);  // an Error when there is no such device
    ncclUniqueId id;
    const ncclResult_t r = ncclGetUniqueId(&id);
    EMBER_CHECK(r == ncclSuccess, "dist: ncclGetUniqueId failed: ", nccl_text(r));
    return open(options, device, 0, 1, 0, id, std::move(host), nullptr);
}

std::shared_ptr<Communicator> make_nccl_communicator(CommunicatorOptions options,
                                                     const LaunchInfo& launch) {
    const int visible = cuda_device_count();
    if (launch.size == 1) {
        const Device d = options.device.is_cuda() ? options.device : local_cuda_device(0, visible);
        return nccl_single_process(d, options, single_process(options));
    }
    const Device device = local_cuda_device(launch.local_rank, visible);
    std::shared_ptr<Communicator> host = make_mpi_communicator(options);
    CommunicatorOptions quick = options;
    quick.timeout = std::min<std::chrono::milliseconds>(options.timeout, kCensusGrace);
    std::shared_ptr<Communicator> census = make_mpi_communicator(quick);
    // Rank 0's unique id after a flag that says it could make one, so that a
    // failure there is an Error on every rank, not a wait for the broadcast.
    constexpr int64_t kWords = int64_t((sizeof(ncclUniqueId) + 7) / 8);
    Tensor msg = zeros({1 + kWords}, {.dtype = DType::i64});
    std::string failure;
    if (host->rank() == 0) {
        ncclUniqueId id;
        const ncclResult_t r = ncclGetUniqueId(&id);
        if (r == ncclSuccess) {
            msg.data<int64_t>()[0] = 1;
            std::memcpy(msg.data<int64_t>() + 1, &id, sizeof id);
        } else {
            failure = nccl_text(r);
        }
    }
    host->broadcast(msg, 0, "NCCL unique id");
    EMBER_CHECK(msg.data<int64_t>()[0] == 1, "dist: rank 0 could not make the NCCL unique id",
                failure.empty() ? std::string(" (see rank 0's error)") : ": " + failure);
    ncclUniqueId id;
    std::memcpy(&id, msg.data<int64_t>() + 1, sizeof id);
    const int rank = host->rank(), size = host->size(), local_rank = host->local_rank();
    return open(options, device, rank, size, local_rank, id, std::move(host), std::move(census));
}

}  // namespace ember::dist

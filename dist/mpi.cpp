// The MPI backend: CPU tensors through MPI-3's non-blocking collectives on a
// duplicate of MPI_COMM_WORLD, polled until done or until the timeout; f16
// and bf16 travel as f32. A timeout asks every rank where it is (a second
// duplicate communicator, answered from inside every rank's wait loop), names
// the ranks that did not answer or are behind, and leaves the job to be
// aborted (Note [Ending a job after a timeout]).
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/error.h"
#include "dist/check.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"

namespace ember::dist {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kProbeTag = 1, kAnswerTag = 2;

void check_mpi(int rc, const char* call) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    EMBER_FAIL(call, " failed: ", std::string(text, size_t(len)));
}

MPI_Datatype mpi_type(DType d) {
    switch (d) {
        case DType::f32:
        case DType::f16:  // carried as f32
        case DType::bf16: return MPI_FLOAT;
        case DType::f64: return MPI_DOUBLE;
        case DType::i32: return MPI_INT32_T;
        case DType::i64: return MPI_INT64_T;
        default: EMBER_FAIL("dist: dtype ", d, " has no MPI type");
    }
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::max ? MPI_MAX : MPI_SUM; }

bool is_half(DType d) { return d == DType::f16 || d == DType::bf16; }

// Note [Ending a job after a timeout]
// MPI cannot cancel a collective that one rank never joined, and
// MPI_Finalize would wait for it forever. So after a timeout the communicator
// is broken: the Error propagates (and is printed by wait() at once, since
// what follows may end the process), and when the communicator is destroyed
// it calls MPI_Abort instead of MPI_Finalize, which makes the launcher end
// every rank with a non-zero status. A rank that dies is the launcher's to
// notice: mpirun ends the job and says which rank died.

// The process's MPI: initialized by the first communicator, finalized (or
// aborted) by the last. MPI allows one initialization per process, so this
// is the one piece of process-wide state in dist/.
struct MpiProcess {
    std::mutex mu;
    int users = 0;
    bool finalized = false;
};
MpiProcess& mpi_process() {
    static MpiProcess p;
    return p;
}

class MpiCommunicator;

// What the works of a communicator share with it.
struct MpiState {
    MPI_Comm comm = MPI_COMM_NULL;   // the collectives
    MPI_Comm probe = MPI_COMM_NULL;  // "where are you?" after a timeout
    int rank = 0, size = 1, local_rank = 0;
    int64_t seq = 0;      // collectives started on this rank
    bool broken = false;  // a collective timed out: abort at the end
    std::chrono::milliseconds timeout{};

    // Answers other ranks' probes with this rank's sequence number.
    void answer_probes() {
        for (;;) {
            int flag = 0;
            MPI_Status st;
            MPI_Iprobe(MPI_ANY_SOURCE, kProbeTag, probe, &flag, &st);
            if (!flag) return;
            int64_t theirs = 0;
            MPI_Recv(&theirs, 1, MPI_INT64_T, st.MPI_SOURCE, kProbeTag, probe, MPI_STATUS_IGNORE);
            MPI_Request r;
            MPI_Isend(&seq, 1, MPI_INT64_T, st.MPI_SOURCE, kAnswerTag, probe, &r);
            MPI_Request_free(&r);
        }
    }

    // After a timeout of collective number `mine`: asks every other rank for
    // its sequence number for up to `grace`; describes who is missing.
    std::string census(int64_t mine, std::chrono::milliseconds grace) {
        std::vector<int64_t> answers(size_t(size), -1);
        std::vector<MPI_Request> recvs;
        std::vector<int> from;
        for (int r = 0; r < size; ++r) {
            if (r == rank) continue;
            MPI_Request s;
            MPI_Isend(&mine, 1, MPI_INT64_T, r, kProbeTag, probe, &s);
            MPI_Request_free(&s);
            recvs.emplace_back();
            from.push_back(r);
            MPI_Irecv(&answers[size_t(r)], 1, MPI_INT64_T, r, kAnswerTag, probe, &recvs.back());
        }
        const auto until = Clock::now() + grace;
        for (;;) {
            answer_probes();
            int all = 0;
            MPI_Testall(int(recvs.size()), recvs.data(), &all, MPI_STATUSES_IGNORE);
            if (all || Clock::now() > until) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        std::string silent, behind;
        for (size_t i = 0; i < from.size(); ++i) {
            int got = 0;
            MPI_Test(&recvs[i], &got, MPI_STATUS_IGNORE);
            if (!got) {
                MPI_Cancel(&recvs[i]);
                MPI_Request_free(&recvs[i]);
            }
            const int64_t a = answers[size_t(from[i])];
            if (!got || a < 0)
                silent += (silent.empty() ? "" : ", ") + std::to_string(from[i]);
            else if (a < mine)
                behind += (behind.empty() ? "" : ", ") + str(from[i], " (at collective ", a, ")");
        }
        if (silent.empty() && behind.empty())
            return "every rank answered and reached this collective: a rank called another "
                   "collective, or with other sizes";
        std::string out;
        if (!silent.empty()) out += "rank(s) " + silent + " did not arrive (stalled or dead)";
        if (!behind.empty())
            out += (out.empty() ? "" : "; ") + str("rank(s) ", behind, " are behind");
        return out;
    }
};

class MpiWork final : public Work {
  public:
    MpiWork(std::shared_ptr<MpiState> state, MPI_Request request, std::string what, int64_t seq,
            std::function<void()> finish)
        : state_(std::move(state)), request_(request), what_(std::move(what)), seq_(seq),
          finish_(std::move(finish)) {}
    ~MpiWork() override {
        if (!completed_ && !state_->broken) try {
                wait();
            } catch (...) {
            }
    }

    bool done() override {
        if (completed_) return true;
        int flag = 0;
        check_mpi(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
        if (!flag) return false;
        completed_ = true;
        if (finish_) finish_();
        return true;
    }

    void wait() override {
        EMBER_CHECK(!state_->broken || completed_, what_,
                    ": the communicator is broken by an earlier timeout");
        const auto deadline = Clock::now() + state_->timeout;
        for (int spins = 0; !done(); ++spins) {
            state_->answer_probes();
            if (Clock::now() > deadline) fail();
            // Ranks usually share cores with others: poll gently once a
            // collective is clearly not about to finish.
            if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    }

  private:
    [[noreturn]] void fail() {
        state_->broken = true;
        const auto grace = std::min<std::chrono::milliseconds>(state_->timeout,
                                                               std::chrono::seconds(2));
        const std::string who = state_->census(seq_, grace);
        const std::string msg =
            str(what_, " did not complete within ", double(state_->timeout.count()) / 1000,
                " s on rank ", state_->rank, " of ", state_->size, ": ", who);
        std::fprintf(stderr, "ember: error: rank %d: %s\n", state_->rank, msg.c_str());
        std::fflush(stderr);
        EMBER_FAIL(msg);
    }

    std::shared_ptr<MpiState> state_;
    MPI_Request request_;
    std::string what_;
    int64_t seq_;
    std::function<void()> finish_;
    bool completed_ = false;
};

class MpiCommunicator final : public Communicator {
  public:
    explicit MpiCommunicator(CommunicatorOptions o) : Communicator(o) {
        MpiProcess& p = mpi_process();
        std::lock_guard<std::mutex> lock(p.mu);
        EMBER_CHECK(!p.finalized, "dist::init: MPI was finalized in this process and cannot "
                    "start again; keep one communicator for the whole run");
        if (p.users == 0) {
            int inited = 0;
            MPI_Initialized(&inited);
            if (!inited) {
                int provided = 0;
                check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                          "MPI_Init_thread");
            }
        }
        ++p.users;
        state_ = std::make_shared<MpiState>();
        check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &state_->comm), "MPI_Comm_dup");
        check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &state_->probe), "MPI_Comm_dup");
        MPI_Comm_rank(state_->comm, &state_->rank);
        MPI_Comm_size(state_->comm, &state_->size);
        state_->local_rank = launch_info_from_env().local_rank;
        state_->timeout = o.timeout;
    }

    void set_timeout(std::chrono::milliseconds t) override {
        Communicator::set_timeout(t);
        state_->timeout = t;  // what the works started from now on wait for
    }

    ~MpiCommunicator() override {
        MpiProcess& p = mpi_process();
        std::lock_guard<std::mutex> lock(p.mu);
        if (state_->broken) MPI_Abort(MPI_COMM_WORLD, 1);  // Note [Ending a job after a timeout]
        MPI_Comm_free(&state_->probe);
        MPI_Comm_free(&state_->comm);
        if (--p.users == 0) {
            MPI_Finalize();
            p.finalized = true;
        }
    }

    int rank() const override { return state_->rank; }
    int size() const override { return state_->size; }
    int local_rank() const override { return state_->local_rank; }
    std::string backend() const override { return "mpi"; }

    std::unique_ptr<Work> all_reduce_async(Tensor t, ReduceOp op,
                                           const std::string& label) override {
        check_collective_tensor(t, "all_reduce");
        usable("all_reduce");
        check_reduce_op(t, op, "all_reduce");
        Tensor buf = is_half(t.dtype()) ? t.to(DType::f32) : t;
        MPI_Request req;
        check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.data_ptr(), int_count(buf), mpi_type(t.dtype()),
                                 mpi_op(op), state_->comm, &req),
                  "MPI_Iallreduce");
        const int n = state_->size;
        auto finish = [t, buf, op, n]() mutable {
            if (op == ReduceOp::average) kernels::mul_(buf, 1.0 / n);
            if (!buf.is_same(t)) t.copy_(buf);
        };
        return start(req, describe("all_reduce", op, t, label), finish);
    }

    std::unique_ptr<Work> broadcast_async(Tensor t, int root, const std::string& label) override {
        check_collective_tensor(t, "broadcast");
        usable("broadcast");
        check_root(root, state_->size, "broadcast");
        Tensor buf = is_half(t.dtype()) ? t.to(DType::f32) : t;
        MPI_Request req;
        check_mpi(MPI_Ibcast(buf.data_ptr(), int_count(buf), mpi_type(t.dtype()), root,
                             state_->comm, &req),
                  "MPI_Ibcast");
        auto finish = [t, buf]() mutable {
            if (!buf.is_same(t)) t.copy_(buf);
        };
        return start(req, describe("broadcast", std::nullopt, t, label), finish);
    }

    std::unique_ptr<Work> all_gather_async(Tensor out, Tensor in,
                                           const std::string& label) override {
        check_gather_pair(out, in, state_->size, "all_gather");
        usable("all_gather");
        Tensor src = is_half(in.dtype()) ? in.to(DType::f32) : in;
        Tensor dst = is_half(out.dtype()) ? empty(out.shape()) : out;
        MPI_Request req;
        check_mpi(MPI_Iallgather(src.data_ptr(), int_count(src), mpi_type(in.dtype()),
                                 dst.data_ptr(), int_count(src), mpi_type(in.dtype()),
                                 state_->comm, &req),
                  "MPI_Iallgather");
        auto finish = [out, dst, src]() mutable {  // src: alive until done
            if (!dst.is_same(out)) out.copy_(dst);
        };
        return start(req, describe("all_gather", std::nullopt, in, label), finish);
    }

    std::unique_ptr<Work> reduce_scatter_async(Tensor out, Tensor in, ReduceOp op,
                                               const std::string& label) override {
        check_gather_pair(in, out, state_->size, "reduce_scatter");
        usable("reduce_scatter");
        check_reduce_op(in, op, "reduce_scatter");
        Tensor src = is_half(in.dtype()) ? in.to(DType::f32) : in;
        Tensor dst = is_half(out.dtype()) ? empty(out.shape()) : out;
        MPI_Request req;
        check_mpi(MPI_Ireduce_scatter_block(src.data_ptr(), dst.data_ptr(), int_count(dst),
                                            mpi_type(in.dtype()), mpi_op(op), state_->comm, &req),
                  "MPI_Ireduce_scatter_block");
        const int n = state_->size;
        auto finish = [out, dst, src, op, n]() mutable {
            if (op == ReduceOp::average) kernels::mul_(dst, 1.0 / n);
            if (!dst.is_same(out)) out.copy_(dst);
        };
        return start(req, describe("reduce_scatter", op, in, label), finish);
    }

    std::unique_ptr<Work> barrier_async(const std::string& label) override {
        usable("barrier");
        MPI_Request req;
        check_mpi(MPI_Ibarrier(state_->comm, &req), "MPI_Ibarrier");
        return start(req, label.empty() ? std::string("barrier") : str("barrier (", label, ")"),
                     nullptr);
    }

  private:
    // MPI counts are int: larger tensors are refused rather than truncated.
    static int int_count(const Tensor& t) {
        EMBER_CHECK(t.numel() <= INT32_MAX, "dist: ", t.numel(),
                    " elements in one collective (at most 2^31 - 1); split the tensor");
        return int(t.numel());
    }

    static std::string describe(const char* op, std::optional<ReduceOp> r, const Tensor& t,
                                const std::string& label) {
        return str(op, r ? str(" ", reduce_op_name(*r)) : std::string(), " (",
                   label.empty() ? std::string() : label + ", ", t.numel(), " ", t.dtype(),
                   " elements)");
    }

    void usable(const char* op) const {
        EMBER_CHECK(!state_->broken, op, ": the communicator is broken by an earlier timeout");
    }

    std::unique_ptr<Work> start(MPI_Request req, std::string what, std::function<void()> finish) {
        return std::make_unique<MpiWork>(state_, req, std::move(what), ++state_->seq,
                                         std::move(finish));
    }

    std::shared_ptr<MpiState> state_;
};

}  // namespace

bool mpi_built() { return true; }

std::shared_ptr<Communicator> make_mpi_communicator(CommunicatorOptions options) {
    return std::make_shared<MpiCommunicator>(options);
}

}  // namespace ember::dist

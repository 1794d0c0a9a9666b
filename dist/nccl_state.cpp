// The NCCL communicator's lifetime and its watchdog: joining and leaving the
// NCCL communicator, the collectives in flight, the timeout and NCCL's
// asynchronous errors, and the census that names the ranks that did not
// arrive. Test: tests/cuda/test_cuda_nccl.cpp.
#include "dist/nccl_state.h"

#include <cstdio>
#include <cstdlib>

#include "core/cuda_context.h"
#include "core/error.h"
#include "kernels/factories.h"

namespace ember::dist {

// Note [NCCL timeouts]
// NCCL's collectives are asynchronous: when a rank never joins one, the
// others' kernels spin on the GPU, and their hosts find out only when they
// synchronize, which then never returns. So every communicator has a
// watchdog thread that polls, every 10 ms, the done events of its
// collectives in flight and NCCL's asynchronous errors
// (ncclCommGetAsyncError). Past a collective's timeout, or on an
// asynchronous error, it calls ncclCommAbort (which ends the spinning
// kernels, so a host blocked in a synchronize goes on), prints the error at
// once (the host may be busy elsewhere for a while) and marks the
// communicator broken. The next call on it (a collective, a Work's wait() or
// done()) raises the Error, the first time after a census: every rank's
// count of collectives started is gathered over MPI with a short timeout
// (kCensusGrace). A rank that does not answer is named by the MPI backend as
// not arrived, and leaves that MPI communicator broken, which ends the job
// with MPI_Abort when it is destroyed (Note [Ending a job after a timeout] in
// dist/mpi.cpp); ranks that answer with a lower count are named as behind.
// The watchdog cannot abort from under an NCCL call that has not returned
// (ncclCommInitRank waits for every rank; the first collective of a kind
// connects to the peers), so when the host has been inside one for longer
// than the timeout, it prints which call and ends the process with status
// 1: the launcher then ends the job. Nothing hangs silently.

namespace {
constexpr auto kPoll = std::chrono::milliseconds(10);

double seconds(std::chrono::milliseconds t) { return double(t.count()) / 1000; }

// An Error's message without its "file:line: " prefix.
std::string without_location(const std::string& what) {
    const size_t colon = what.find(": ");
    return colon == std::string::npos ? what : what.substr(colon + 2);
}
}  // namespace

std::string nccl_text(ncclResult_t r) {
    std::string s = ncclGetErrorString(r);
    const char* last = ncclGetLastError(nullptr);
    if (last != nullptr && *last != '\0') s += str(" (", last, ")");
    return s;
}

NcclState::NcclState(Device device, int rank, int size, int local_rank,
                     std::chrono::milliseconds timeout, std::shared_ptr<Communicator> host,
                     std::shared_ptr<Communicator> census)
    : device(device), rank(rank), size(size), local_rank(local_rank), host(std::move(host)),
      census(std::move(census)), timeout_(timeout) {
    stream = std::make_unique<CudaStream>(device);
    ready = std::make_unique<CudaEvent>(device);
}

void NcclState::open(const ncclUniqueId& id) {
    watchdog = std::thread([this] { watch(); });
    std::lock_guard<std::mutex> lock(comm_mu);
    ncclComm_t made = nullptr;
    ncclResult_t r;
    {
        const Busy busy(*this, "ncclCommInitRank");
        const DeviceGuard guard(device);
        r = ncclCommInitRank(&made, size, id, rank);
    }
    EMBER_CHECK(r == ncclSuccess, "dist: ncclCommInitRank (rank ", rank, " of ", size, " on ",
                device, ") failed: ", nccl_text(r));
    comm = made;
    scratch = zeros({1}, {.dtype = DType::f32, .device = device});
}

NcclState::~NcclState() {
    if (watchdog.joinable()) {
        // The collectives queued finish first (a normal end), within the timeout.
        bool idle = false;
        try {
            const auto until = Clock::now() + timeout_;
            while (!(idle = stream->query()) && Clock::now() < until && !is_broken())
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        } catch (...) {
        }
        {
            std::lock_guard<std::mutex> lock(comm_mu);
            if (comm != nullptr) {
                // (the watchdog still runs: a destroy that never returns ends the process)
                const Busy busy(*this, idle ? "ncclCommDestroy" : "ncclCommAbort");
                const ncclResult_t r = idle ? ncclCommDestroy(comm) : ncclCommAbort(comm);
                if (!idle)
                    std::fprintf(stderr, "ember: warning: rank %d: NCCL collectives on %s were "
                                 "still running at the end; the communicator was aborted\n",
                                 rank, device.str().c_str());
                else if (r != ncclSuccess)
                    std::fprintf(stderr, "ember: warning: rank %d: ncclCommDestroy: %s\n", rank,
                                 nccl_text(r).c_str());
                comm = nullptr;
            }
        }
        {
            std::lock_guard<std::mutex> lock(mu);
            stop = true;
        }
        wake.notify_all();
        watchdog.join();
    }
    // A timeout nobody raised: the census still runs, so a missing rank ends the job.
    bool ask = false;
    {
        std::lock_guard<std::mutex> lock(mu);
        ask = !why.empty() && !asked;
    }
    if (ask) try {
            raise_if_broken();
        } catch (...) {
        }
}

NcclState::Busy::Busy(NcclState& s, const char* call) : s(s) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.busy = call;
    s.busy_since = Clock::now();
}

NcclState::Busy::~Busy() {
    std::lock_guard<std::mutex> lock(s.mu);
    s.busy.clear();
}

void NcclState::track(std::shared_ptr<CudaEvent> done, std::string what,
                      std::chrono::milliseconds timeout) {
    std::lock_guard<std::mutex> lock(mu);
    timeout_ = timeout;
    pending.push_back({std::move(done), Clock::now() + timeout, timeout, std::move(what),
                       ++started});
}

bool NcclState::is_broken() {
    std::lock_guard<std::mutex> lock(mu);
    return !why.empty();
}

void NcclState::raise_if_broken() {
    std::unique_lock<std::mutex> lock(mu);
    if (why.empty()) return;
    if (!asked) {
        asked = true;
        const int64_t seq = failed_seq;
        lock.unlock();
        std::string found = ask_ranks(seq);
        lock.lock();
        who = std::move(found);
    }
    const std::string msg = str(why, who.empty() ? "" : ": ", who, "; the NCCL communicator on ",
                                device, " was aborted");
    lock.unlock();
    EMBER_FAIL(msg);
}

// Every rank's count of collectives started, against `seq`, the one that
// failed here.
std::string NcclState::ask_ranks(int64_t seq) {
    if (census == nullptr || census->size() == 1) return "";
    int64_t mine = 0;
    {
        std::lock_guard<std::mutex> lock(mu);
        mine = started;
    }
    Tensor in = full({1}, double(mine), {.dtype = DType::i64});
    Tensor all = zeros({int64_t(census->size())}, {.dtype = DType::i64});
    try {
        census->all_gather(all, in, "NCCL census");
    } catch (const Error& e) {
        return str("asking every rank over MPI: ", without_location(e.what()));
    }
    std::string behind;
    for (int r = 0; r < census->size(); ++r) {
        const int64_t theirs = all.data<int64_t>()[r];
        if (r != rank && theirs < seq)
            behind += str(behind.empty() ? "" : ", ", r, " (at collective ", theirs, ")");
    }
    if (behind.empty())
        return "every rank started this collective: a rank called another one, or with other "
               "sizes, or a GPU or a link failed (NCCL_DEBUG=WARN says more)";
    return str("rank(s) ", behind, " are behind this one (collective ", seq, ")");
}

void NcclState::watch() {
    try {
        const DeviceGuard guard(device);
        std::unique_lock<std::mutex> lock(mu);
        while (!stop) {
            wake.wait_for(lock, kPoll);
            if (stop) break;
            if (!busy.empty() && Clock::now() - busy_since > timeout_) stuck(busy, timeout_);
            lock.unlock();
            poll();
            lock.lock();
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ember: error: rank %d: the NCCL watchdog stopped: %s\n", rank,
                     e.what());
    }
}

// One look at the collectives in flight and at NCCL's asynchronous error.
void NcclState::poll() {
    std::unique_lock<std::mutex> comm_lock(comm_mu, std::try_to_lock);
    if (!comm_lock.owns_lock() || comm == nullptr) return;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(comm, &async);
    if (r != ncclSuccess) async = r;
    std::string reason;
    int64_t seq = 0;
    {
        std::lock_guard<std::mutex> lock(mu);
        try {
            while (!pending.empty() && pending.front().done->query()) pending.pop_front();
        } catch (const Error& e) {  // a CUDA error: the device is lost
            reason = without_location(e.what());
        }
        seq = pending.empty() ? started : pending.front().seq;
        if (reason.empty() && async != ncclSuccess && async != ncclInProgress)
            reason = str("NCCL reported an asynchronous error on rank ", rank, " of ", size, ": ",
                         nccl_text(async));
        if (reason.empty() && !pending.empty() && Clock::now() > pending.front().deadline) {
            const Pending& p = pending.front();
            reason = str(p.what, " did not complete within ", seconds(p.timeout), " s on rank ",
                         rank, " of ", size);
        }
        if (reason.empty()) return;
    }
    abort_comm(reason, seq);
}

void NcclState::abort_comm(const std::string& reason, int64_t seq) {
    const ncclResult_t r = ncclCommAbort(comm);
    comm = nullptr;
    std::string msg = str(reason, "; the NCCL communicator on ", device, " was aborted");
    if (r != ncclSuccess) msg += str(" (ncclCommAbort: ", nccl_text(r), ")");
    std::fprintf(stderr, "ember: error: rank %d: %s\n", rank, msg.c_str());
    std::fflush(stderr);
    std::lock_guard<std::mutex> lock(mu);
    why = reason;
    failed_seq = seq;
    pending.clear();
}

void NcclState::stuck(const std::string& call, std::chrono::milliseconds timeout) {
    std::fprintf(stderr, "ember: error: rank %d of %d: %s on %s has not returned after %g s (a "
                 "rank did not arrive?); NCCL cannot be aborted under a call in progress, so "
                 "this process ends (Note [NCCL timeouts])\n",
                 rank, size, call.c_str(), device.str().c_str(), seconds(timeout));
    std::fflush(stderr);
    std::_Exit(1);
}

}  // namespace ember::dist

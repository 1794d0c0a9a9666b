// What an NCCL communicator and its works share (internal to dist/, built
// only with NCCL): the NCCL communicator and its stream, the collectives in
// flight, and the watchdog thread that polls them, aborts past the timeout
// and leaves the Error for the next call (Note [NCCL timeouts] in
// dist/nccl_state.cpp).
#pragma once

#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "../core/cuda_stream.h"
#include "../core/tensor.h"
#include "communicator.h"

namespace ember::dist {

/// How long the ranks are asked where they are after a timeout, at most.
inline constexpr std::chrono::milliseconds kCensusGrace{5000};

/// NCCL's name for `r` and its last error message.
std::string nccl_text(ncclResult_t r);

struct NcclState {
    using Clock = std::chrono::steady_clock;

    NcclState(Device device, int rank, int size, int local_rank,
              std::chrono::milliseconds timeout, std::shared_ptr<Communicator> host,
              std::shared_ptr<Communicator> census);
    /// Waits (up to the timeout) for the collectives queued, then destroys the
    /// NCCL communicator (aborts it when they did not finish), stops the watchdog.
    ~NcclState();
    NcclState(const NcclState&) = delete;
    NcclState& operator=(const NcclState&) = delete;

    /// Starts the watchdog and joins the NCCL communicator `id` names
    /// (ncclCommInitRank: blocks until every rank has joined).
    void open(const ncclUniqueId& id);

    /// Hands a queued collective to the watchdog (comm_mu held).
    void track(std::shared_ptr<CudaEvent> done, std::string what,
               std::chrono::milliseconds timeout);
    bool is_broken();
    /// The Error of an aborted communicator, if it is one: the first time
    /// after asking the other ranks where they are.
    void raise_if_broken();

    /// Marks the host as inside an NCCL call that may block (for the watchdog).
    struct Busy {
        Busy(NcclState& s, const char* call);
        ~Busy();
        NcclState& s;
    };

    const Device device;
    const int rank, size, local_rank;
    std::shared_ptr<Communicator> host;    // CPU tensors; null: none
    std::shared_ptr<Communicator> census;  // the census after a timeout; null: one rank
    std::unique_ptr<CudaStream> stream;    // where the collectives run
    std::unique_ptr<CudaEvent> ready;      // the caller's stream up to a collective
    Tensor scratch;                        // a barrier's one element

    // The host holds comm_mu across each NCCL call; the watchdog only
    // try-locks it, so it never waits behind a call that may block.
    std::mutex comm_mu;
    ncclComm_t comm = nullptr;  // null once aborted

  private:
    struct Pending {
        std::shared_ptr<CudaEvent> done;
        Clock::time_point deadline;
        std::chrono::milliseconds timeout;
        std::string what;
        int64_t seq;
    };

    void watch();
    void poll();
    void abort_comm(const std::string& why, int64_t seq);  // comm_mu held
    [[noreturn]] void stuck(const std::string& call, std::chrono::milliseconds timeout);
    std::string ask_ranks(int64_t seq);

    std::mutex mu;  // everything below; held briefly
    std::condition_variable wake;
    std::deque<Pending> pending;  // in queue order (one stream: they finish in order)
    int64_t started = 0;          // collectives queued on this rank
    std::chrono::milliseconds timeout_;
    std::string why;              // non-empty once aborted
    std::string who;              // what the census found
    int64_t failed_seq = 0;
    bool asked = false;
    std::string busy;             // the NCCL call the host is inside
    Clock::time_point busy_since;
    bool stop = false;
    std::thread watchdog;
};

}  // namespace ember::dist

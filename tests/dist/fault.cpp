// A two-rank job that goes wrong on purpose (tests/dist/fault.sh):
//   stall: rank 1 sleeps through an all-reduce; rank 0, with a 2 s timeout,
//          must fail naming the collective and rank 1.
//   kill:  rank 1 dies before the all-reduce; the launcher must end the job.
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "dist/communicator.h"
#include "kernels/factories.h"

int main(int argc, char** argv) {
    using namespace ember;
    const std::string mode = argc > 1 ? argv[1] : "";
    try {
        auto comm = dist::init("mpi", {.timeout = std::chrono::seconds(2)});
        Tensor t = ones({1000});
        comm->all_reduce(t, dist::ReduceOp::sum, "warm-up");  // both ranks alive and talking
        if (comm->rank() == 1) {
            if (mode == "stall") std::this_thread::sleep_for(std::chrono::seconds(60));
            if (mode == "kill") std::raise(SIGKILL);
        }
        comm->all_reduce(t, dist::ReduceOp::sum, "bucket 0");
        std::printf("rank %d: all-reduce completed\n", comm->rank());
    } catch (const Error& e) {
        std::fprintf(stderr, "ember: error: %s\n", e.what());
        return 1;
    }
    return 0;
}

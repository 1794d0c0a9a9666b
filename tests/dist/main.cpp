// The runner of test_dist: one communicator for the whole process (MPI is
// initialized once), made before the tests and kept until they end. Run
// plainly it is a single-process communicator; under
// `mpirun -np N test_dist` every rank runs every test, in the same order.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "support/dist_comm.h"

namespace ember::test {

std::shared_ptr<dist::Communicator>& world_slot() {
    static std::shared_ptr<dist::Communicator> comm;
    return comm;
}

dist::Communicator& world() { return *world_slot(); }

}  // namespace ember::test

int main(int argc, char** argv) {
    // Seconds, not minutes: a test that makes the ranks disagree fails fast.
    ember::test::world_slot() = ember::dist::init("auto", {.timeout = std::chrono::seconds(60)});
    const int rank = ember::test::world().rank();
    Catch::Session session;
    if (const int rc = session.applyCommandLine(argc, argv)) return rc;
    const int failed = session.run();
    ember::test::world_slot().reset();  // MPI_Finalize
    if (failed && rank != 0) std::fprintf(stderr, "test_dist: rank %d had failures\n", rank);
    return failed;
}

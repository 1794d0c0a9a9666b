// A build without MPI: only the single-process communicator.
#include "core/error.h"
#include "dist/check.h"

namespace ember::dist {

bool mpi_built() { return false; }

std::shared_ptr<Communicator> make_mpi_communicator(CommunicatorOptions) {
    EMBER_FAIL("dist: ember was built without MPI (install OpenMPI's development files and "
               "configure again)");
}

}  // namespace ember::dist

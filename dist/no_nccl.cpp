// A build without NCCL (or without CUDA): CUDA tensors have no communicator.
#include "core/error.h"
#include "dist/nccl.h"

namespace ember::dist {

namespace {
[[noreturn]] void no_nccl() {
    EMBER_FAIL("dist: ember was built without NCCL, which collectives over CUDA tensors need "
               "(configure with CUDA and NCCL's headers and library; NCCL_ROOT points to them)");
}
}  // namespace

bool nccl_built() { return false; }

std::shared_ptr<Communicator> nccl_single_process(Device, CommunicatorOptions,
                                                  std::shared_ptr<Communicator>) {
    no_nccl();
}

std::shared_ptr<Communicator> make_nccl_communicator(CommunicatorOptions, const LaunchInfo&) {
    no_nccl();
}

}  // namespace ember::dist

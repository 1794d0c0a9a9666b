// The host-sync counter (docs/tips.md #8): every implicit device→host
// synchronization ember performs — item(), at(), to_vector(), a blocking
// to(cpu) of a CUDA tensor — is counted per thread under the name of the
// call that made it, so a training loop can see the syncs it pays for and
// where they come from. CPU tensors never count: nothing waits.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ember {

/// Counts one synchronization by `op` on this thread.
void count_host_sync(const char* op);

/// This thread's counts since the last call, by op name, and resets them.
std::map<std::string, int64_t> host_syncs();

/// The sum of this thread's counts, without resetting them.
int64_t host_sync_total();

}  // namespace ember

// The kernel-launch counter: a per-thread map from kernel name to count, kept
// like the host-sync counter (core/named_counts.h).
#include "core/launch_count.h"

#include "core/named_counts.h"

namespace ember {

namespace {

NamedCounts& counts() {
    thread_local NamedCounts c;
    return c;
}

}  // namespace

void count_launch(const char* kernel) { counts().add(kernel); }

std::map<std::string, int64_t> kernel_launches() { return counts().take(); }

int64_t kernel_launch_total() { return counts().total(); }

}  // namespace ember

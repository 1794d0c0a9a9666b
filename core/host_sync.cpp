// The host-sync counter: a per-thread map from op name to count.
#include "core/host_sync.h"

#include "core/named_counts.h"

namespace ember {

namespace {

NamedCounts& counts() {
    thread_local NamedCounts c;
    return c;
}

}  // namespace

void count_host_sync(const char* op) { counts().add(op); }

std::map<std::string, int64_t> host_syncs() { return counts().take(); }

int64_t host_sync_total() { return counts().total(); }

}  // namespace ember

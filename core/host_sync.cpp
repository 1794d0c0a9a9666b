// The host-sync counter: a per-thread map from op name to count.
#include "core/host_sync.h"

namespace ember {

namespace {

std::map<std::string, int64_t>& counts() {
    thread_local std::map<std::string, int64_t> c;
    return c;
}

}  // namespace

void count_host_sync(const char* op) { ++counts()[op]; }

std::map<std::string, int64_t> host_syncs() {
    std::map<std::string, int64_t> out;
    out.swap(counts());
    return out;
}

int64_t host_sync_total() {
    int64_t n = 0;
    for (const auto& [op, c] : counts()) n += c;
    return n;
}

}  // namespace ember

// The kernel-launch counter: a per-thread map from kernel name to count, like
// the host-sync counter (core/host_sync.cpp).
#include "core/launch_count.h"

namespace ember {

namespace {

std::map<std::string, int64_t>& counts() {
    thread_local std::map<std::string, int64_t> c;
    return c;
}

}  // namespace

void count_launch(const char* kernel) { ++counts()[kernel]; }

std::map<std::string, int64_t> kernel_launches() {
    std::map<std::string, int64_t> out;
    out.swap(counts());
    return out;
}

int64_t kernel_launch_total() {
    int64_t n = 0;
    for (const auto& [kernel, c] : counts()) n += c;
    return n;
}

}  // namespace ember

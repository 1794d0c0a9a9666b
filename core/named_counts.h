// A map from name to count with take-and-reset: what the per-thread
// host-sync counter (core/host_sync.h) and kernel-launch counter
// (core/launch_count.h) each keep, one thread_local instance apiece.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace ember {

class NamedCounts {
public:
    void add(const char* name) { ++counts_[name]; }
    /// The counts so far, leaving this empty.
    std::map<std::string, int64_t> take() {
        std::map<std::string, int64_t> out;
        out.swap(counts_);
        return out;
    }
    /// The sum of the counts, without resetting them.
    int64_t total() const {
        int64_t n = 0;
        for (const auto& [name, c] : counts_) n += c;
        return n;
    }

private:
    std::map<std::string, int64_t> counts_;
};

}  // namespace ember

// Device parsing and printing, and the sync-debug switch (core/cuda_context.h).
#include "core/device.h"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "core/cuda_context.h"

#include "core/error.h"

namespace ember {

Device Device::parse(const std::string& s) {
    if (s == "cpu") return cpu();
    if (s == "cuda") return cuda(0);
    if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() <= 8) {
        int n = 0;
        for (size_t i = 5; i < s.size(); ++i) {
            if (!std::isdigit(static_cast<unsigned char>(s[i]))) goto bad;
            n = n * 10 + (s[i] - '0');
        }
        return cuda(n);
    }
bad:
    EMBER_FAIL("invalid device '", s, "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
    return is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

namespace {
// The one process-wide switch of sync-debug mode, read by every CUDA op.
std::atomic<bool>& sync_debug_flag() {
    static std::atomic<bool> on{[] {
        const char* v = std::getenv("EMBER_SYNC_DEBUG");
        if (v == nullptr) return false;
        for (const char* off : {"", "0", "false", "off", "no"})
            if (strcasecmp(v, off) == 0) return false;
        return true;
    }()};
    return on;
}
}  // namespace

void set_sync_debug(bool on) { sync_debug_flag().store(on, std::memory_order_relaxed); }
bool sync_debug() { return sync_debug_flag().load(std::memory_order_relaxed); }

}  // namespace ember

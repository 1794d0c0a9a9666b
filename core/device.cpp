// Device parsing and printing.
#include "core/device.h"

#include <cctype>
#include <cstdlib>
#include <cstring>

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

}  // namespace ember

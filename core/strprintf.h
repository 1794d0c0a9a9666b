// printf formatting into a std::string of the length it needs (no fixed
// buffer to cut a long path or table line short): the one helper the
// command line's reports and the profiler's summary format their text with.
#pragma once

#include <cstdio>
#include <string>

namespace ember {

/// std::snprintf(fmt, args...) as a string; "" if the format is invalid.
template <class... Args>
std::string strprintf(const char* fmt, Args... args) {
    const int n = std::snprintf(nullptr, 0, fmt, args...);
    if (n <= 0) return {};
    std::string s(static_cast<size_t>(n), '\0');
    std::snprintf(s.data(), s.size() + 1, fmt, args...);
    return s;
}

}  // namespace ember

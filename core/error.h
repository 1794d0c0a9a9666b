// ember::Error and the check macros used for every user-facing argument check.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ember {

/// The one exception type ember throws for anything a user can cause. The
/// message starts with the source location and names the op and its arguments.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& first, const Rest&... rest) {
    os << first;
    append(os, rest...);
}
template <class... Args>
[[noreturn]] void throw_error(const char* file, int line, const Args&... args) {
    std::ostringstream os;
    os << file << ":" << line << ": ";
    append(os, args...);
    throw Error(os.str());
}
}  // namespace detail

/// Builds a message from stream-able pieces: ember::str("got ", shape).
template <class... Args>
std::string str(const Args&... args) {
    std::ostringstream os;
    detail::append(os, args...);
    return os.str();
}

}  // namespace ember

/// Throws ember::Error with file:line and the streamed message when cond is false.
#define EMBER_CHECK(cond, ...)                                                \
    do {                                                                      \
        if (!(cond)) ::ember::detail::throw_error(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

/// Throws unconditionally.
#define EMBER_FAIL(...) ::ember::detail::throw_error(__FILE__, __LINE__, __VA_ARGS__)

/// An internal invariant: failing it is a bug in ember, not a user error.
#define EMBER_INTERNAL_ASSERT(cond)                                                   \
    do {                                                                              \
        if (!(cond))                                                                  \
            ::ember::detail::throw_error(__FILE__, __LINE__,                          \
                                         "internal error (please report): " #cond);   \
    } while (0)

/// An internal invariant with a message (the streamed arguments) for context.
#define EMBER_INTERNAL_CHECK(cond, ...)                                               \
    do {                                                                              \
        if (!(cond))                                                                  \
            ::ember::detail::throw_error(__FILE__, __LINE__,                          \
                                         "internal error (please report): ", __VA_ARGS__); \
    } while (0)

// Checks of the numeric flags, with messages a user can act on: CLI11's own
// say "Value five not in range 1 to 100000" for a word and print DBL_MAX in
// all its 309 digits, and let NaN through (every comparison with it is
// false). Each returns "" for a good value and the reason otherwise, which
// CLI11 prints after the flag's name.
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ember::cli {

namespace detail {

inline std::string shown(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

// The whole string as a finite number, or the reason it is not one.
inline std::string parse_number(const std::string& s, double& v) {
    const char* begin = s.c_str();
    char* end = nullptr;
    errno = 0;
    v = std::strtod(begin, &end);
    if (s.empty() || end != begin + s.size()) return "'" + s + "' is not a number";
    if (!std::isfinite(v) || errno == ERANGE) return "'" + s + "' is not a finite number";
    return "";
}

}  // namespace detail

/// A whole number in [lo, hi].
inline CLI::Validator whole(int64_t lo, int64_t hi) {
    return CLI::Validator(
        [lo, hi](std::string& s) -> std::string {
            const char* begin = s.c_str();
            char* end = nullptr;
            errno = 0;
            const long long v = std::strtoll(begin, &end, 10);
            if (s.empty() || end != begin + s.size() || errno == ERANGE)
                return "'" + s + "' is not a whole number";
            if (v < lo || v > hi)
                return s + " is not between " + std::to_string(lo) + " and " + std::to_string(hi);
            return "";
        },
        "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

/// A finite number in [lo, hi].
inline CLI::Validator number(double lo, double hi) {
    return CLI::Validator(
        [lo, hi](std::string& s) -> std::string {
            double v = 0;
            if (std::string why = detail::parse_number(s, v); !why.empty()) return why;
            if (v < lo || v > hi)
                return s + " is not between " + detail::shown(lo) + " and " + detail::shown(hi);
            return "";
        },
        "NUMBER in [" + detail::shown(lo) + ", " + detail::shown(hi) + "]");
}

/// A finite number >= lo.
inline CLI::Validator at_least(double lo) {
    return CLI::Validator(
        [lo](std::string& s) -> std::string {
            double v = 0;
            if (std::string why = detail::parse_number(s, v); !why.empty()) return why;
            return v >= lo ? "" : s + " is below " + detail::shown(lo);
        },
        "NUMBER >= " + detail::shown(lo));
}

/// A finite number > 0.
inline CLI::Validator positive() {
    return CLI::Validator(
        [](std::string& s) -> std::string {
            double v = 0;
            if (std::string why = detail::parse_number(s, v); !why.empty()) return why;
            return v > 0 ? "" : s + " is not positive";
        },
        "NUMBER > 0");
}

}  // namespace ember::cli

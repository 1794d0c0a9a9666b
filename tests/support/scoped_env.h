// Environment variables set or removed for one scope and restored afterwards,
// for tests of code that reads the environment (the data folder, the
// launcher's ranks).
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

namespace ember::test {

/// Sets `name` to `value` (or removes it: std::nullopt) until the end of the
/// scope, then puts back what was there.
struct ScopedEnv {
    std::string name;
    std::unique_ptr<std::string> saved;
    ScopedEnv(std::string n, const std::optional<std::string>& value) : name(std::move(n)) {
        if (const char* old = std::getenv(name.c_str())) saved = std::make_unique<std::string>(old);
        if (value)
            setenv(name.c_str(), value->c_str(), 1);
        else
            unsetenv(name.c_str());
    }
    ~ScopedEnv() {
        if (saved)
            setenv(name.c_str(), saved->c_str(), 1);
        else
            unsetenv(name.c_str());
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
};

}  // namespace ember::test

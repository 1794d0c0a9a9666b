// Odd files for the readers' tests: a named pipe that a reader must refuse
// without blocking on it (checked with a watchdog, so a regression fails the
// test instead of hanging it), and a /proc file that claims to be empty.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>

#include "support.h"

namespace ember::test {

/// A file under /proc that reports a size of 0 bytes but reads as text.
inline const char* kProcFile = "/proc/self/status";

/// Makes a named pipe at `path`.
inline void make_fifo(const std::string& path) { REQUIRE(::mkfifo(path.c_str(), 0600) == 0); }

/// Runs `read` on another thread and requires that it throws ember::Error
/// containing `message` within 10 seconds. If it blocks instead (opening a
/// FIFO for reading waits for a writer), a writer opens and closes `fifo` to
/// release it, and the test fails.
inline void require_refused_without_blocking(const std::string& fifo,
                                             const std::function<void()>& read,
                                             const std::string& message) {
    auto outcome = std::async(std::launch::async, [&]() -> std::string {
        try {
            read();
            return "no error";
        } catch (const Error& e) {
            return e.what();
        } catch (const std::exception& e) {
            return std::string("not an ember::Error: ") + e.what();
        }
    });
    if (outcome.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
        do {  // until the reader has seen the writer come and go
            const int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
            if (w >= 0) ::close(w);
        } while (outcome.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);
        FAIL("the reader blocked on the named pipe " << fifo << " (released after 10 s)");
    }
    CHECK_THAT(outcome.get(), Catch::Matchers::Contains(message));
}

}  // namespace ember::test

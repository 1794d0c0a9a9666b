// The CPU load of other processes (core/cpu_load.h): the threads it leaves,
// and a measurement that sees a spinning child process.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/cpu_load.h"

using namespace ember;

TEST_CASE("cpu load: one thread per core that other processes leave free", "[cpu_load]") {
    CHECK(threads_for_load({.cores = 2, .busy = 1.0}) == 1);
    CHECK(threads_for_load({.cores = 2, .busy = 0.4}) == 2);
    CHECK(threads_for_load({.cores = 2, .busy = 0.5}) == 1);
    CHECK(threads_for_load({.cores = 2, .busy = 2.0}) == 1);  // never none
    CHECK(threads_for_load({.cores = 16, .busy = 3.6}) == 12);
    CHECK(threads_for_load({.cores = 1, .busy = 1.0}) == 1);
    CHECK(load_str({.cores = 2, .busy = 1.04}) == "1.0 of 2 cores busy with other processes");
}

TEST_CASE("cpu load: another process spinning is a busy core; our own threads are not",
          "[cpu_load]") {
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {  // the other process: spins until killed
        volatile uint64_t n = 0;
        for (;;) n = n + 1;
    }
    std::atomic<bool> stop{false};
    std::thread own([&] {  // this process's: subtracted
        volatile uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
    const CpuLoad load = measure_cpu_load(0.4);
    stop = true;
    own.join();
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    CHECK(load.cores >= 1);
    CHECK(load.cores <= int(std::thread::hardware_concurrency()));
    CHECK(load.window_s == 0.4);
    if (load.cores >= 2) CHECK(load.busy >= 0.5);  // the child's core, at least
    CHECK(load.busy <= load.cores);
}

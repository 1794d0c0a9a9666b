// The CPU load of other processes (core/cpu_load.h): the threads it leaves,
// and a measurement that sees a spinning thread.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

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

TEST_CASE("cpu load: a spinning thread is seen as a busy core", "[cpu_load]") {
    std::atomic<bool> stop{false};
    std::thread spinner([&] {
        volatile uint64_t n = 0;
        while (!stop.load(std::memory_order_relaxed)) n = n + 1;
    });
    const CpuLoad load = measure_cpu_load(0.4);
    stop = true;
    spinner.join();
    CHECK(load.cores >= 1);
    CHECK(load.cores <= int(std::thread::hardware_concurrency()));
    CHECK(load.window_s == 0.4);
    CHECK(load.busy >= 0.5);  // the spinner's core, at least (others only add)
    CHECK(load.busy <= load.cores);
}

// The kernel error-flag protocol (Note [Device error flag]) on host memory:
// tickets name the op that raised, the first raise wins among many threads,
// check() clears the flag, and an old ticket still becomes an error.
#include <omp.h>

#include <string>

#include "core/error_flag.h"
#include "support/support.h"

using namespace ember;

namespace {

// What a kernel does: visit every value, raise on the ones outside [0, bound).
void checking_loop(ErrorFlagRef flag, const std::vector<int64_t>& values, int64_t bound) {
#pragma omp parallel for
    for (int64_t i = 0; i < int64_t(values.size()); ++i)
        if (values[size_t(i)] < 0 || values[size_t(i)] >= bound) raise_error(flag, i, values[size_t(i)]);
}

std::string error_of(ErrorFlag& flag) {
    try {
        flag.check();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("error flag: nothing raised, check passes and keeps passing", "[error_flag]") {
    ErrorFlagState state{};
    ErrorFlag flag(&state, "cpu");
    checking_loop(flag.arm("gather", "index", 10), {0, 3, 9, 5}, 10);
    CHECK_NOTHROW(flag.check());
    CHECK_NOTHROW(flag.check());
    CHECK(state.ticket == 0);
}

TEST_CASE("error flag: the raising launch's op, value and position are reported", "[error_flag]") {
    ErrorFlagState state{};
    ErrorFlag flag(&state, "cuda:3");
    // Three launches before the host looks: only the second has a bad value.
    checking_loop(flag.arm("embedding", "index", 100), {1, 2, 3}, 100);
    checking_loop(flag.arm("cross_entropy_forward", "target", 10), {4, 7, 12, 1}, 10);
    checking_loop(flag.arm("gather", "index", 5), {0, 4}, 5);
    const std::string msg = error_of(flag);
    INFO(msg);
    CHECK(msg.find("cross_entropy_forward: target 12 at position 2 is out of range [0, 10)") !=
          std::string::npos);
    CHECK(msg.find("cuda:3") != std::string::npos);
    // Cleared: the next check passes, and a later raise is reported afresh.
    CHECK_NOTHROW(flag.check());
    checking_loop(flag.arm("gather", "index", 5), {0, -1}, 5);
    CHECK(error_of(flag).find("gather: index -1 at position 1 is out of range [0, 5)") !=
          std::string::npos);
}

TEST_CASE("error flag: the first raise wins among many threads", "[error_flag]") {
    ErrorFlagState state{};
    ErrorFlag flag(&state, "cpu");
    std::vector<int64_t> values(1 << 16, 1);
    for (size_t i = 0; i < values.size(); i += 7) values[i] = 1000 + int64_t(i);  // many bad
    const ErrorFlagRef ref = flag.arm("index_select", "index", 2);
    checking_loop(ref, values, 2);
    // Whichever thread won, value and position belong to one raise.
    REQUIRE(state.ticket == ref.ticket);
    CHECK(state.value == 1000 + state.index);
    CHECK(state.index % 7 == 0);
    CHECK(error_of(flag).find("index_select: index ") != std::string::npos);
}

TEST_CASE("error flag: a ticket older than the remembered ones still raises", "[error_flag]") {
    ErrorFlagState state{};
    ErrorFlag flag(&state, "cpu");
    const ErrorFlagRef old = flag.arm("max_pool2d_backward", "index", 4);
    for (size_t i = 0; i < ErrorFlag::kRemembered; ++i) flag.arm("gather", "index", 4);
    raise_error(old, 0, 9);
    const std::string msg = error_of(flag);
    INFO(msg);
    CHECK(msg.find("bad value 9 at position 0") != std::string::npos);
    CHECK(msg.find("too long ago to say which op") != std::string::npos);
    CHECK(msg.find("gather") == std::string::npos);  // not blamed on a newer launch
}

TEST_CASE("error flag: a launch still running when a check passes keeps its name", "[error_flag]") {
    ErrorFlagState state{};
    ErrorFlag flag(&state, "cuda:0");
    const ErrorFlagRef running = flag.arm("embedding", "index", 50);
    CHECK_NOTHROW(flag.check());  // e.g. after waiting for another stream
    raise_error(running, 3, 77);   // the launch finishes later, with a bad index
    CHECK(error_of(flag).find("embedding: index 77 at position 3 is out of range [0, 50)") !=
          std::string::npos);
}

TEST_CASE("error flag: a raise still being written is left for the next check", "[error_flag]") {
    ErrorFlagState state{};
    ErrorFlag flag(&state, "cpu");
    const ErrorFlagRef ref = flag.arm("gather", "index", 8);
    state.ticket = ref.ticket;  // claimed, value and position not yet published
    CHECK_NOTHROW(flag.check());
    state.index = 4;
    state.value = 9;
    state.ready = ref.ticket;  // published
    CHECK(error_of(flag).find("gather: index 9 at position 4") != std::string::npos);
    CHECK(state.ticket == 0);  // cleared: a later launch can raise again
    CHECK(state.ready == 0);
}

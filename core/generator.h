// Generator: the (seed, offset) state of one Philox stream. Random ops reserve
// a range of counter blocks from it and compute every element independently.
#pragma once

#include <cstdint>
#include <mutex>

namespace ember {

/// State of a generator, as saved in checkpoints.
struct GeneratorState {
    uint64_t seed = 0;
    uint64_t offset = 0;  // next unused Philox block
    friend bool operator==(const GeneratorState&, const GeneratorState&) = default;
};

/// A Philox4x32-10 stream. Thread-safe: reserve() is atomic.
class Generator {
public:
    explicit Generator(uint64_t seed = kDefaultSeed) : state_{seed, 0} {}
    Generator(const Generator& o) : state_(o.state()) {}
    Generator& operator=(const Generator& o) {
        set_state(o.state());
        return *this;
    }

    /// Restarts the stream: offset back to 0.
    void manual_seed(uint64_t seed);
    uint64_t seed() const;
    /// Reserves `blocks` consecutive Philox blocks; returns the state before
    /// (the seed and the first reserved block), read under one lock.
    GeneratorState reserve(uint64_t blocks);
    GeneratorState state() const;
    void set_state(const GeneratorState& s);

    static constexpr uint64_t kDefaultSeed = 0x5eed;

private:
    mutable std::mutex mutex_;
    GeneratorState state_;
};

/// The process-wide generator random ops use when none is passed.
Generator& default_generator();
/// Seeds the default generator (like torch::manual_seed).
void manual_seed(uint64_t seed);

}  // namespace ember

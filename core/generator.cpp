// Generator state handling.
#include "core/generator.h"

namespace ember {

void Generator::manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> lock(mutex_);
    state_ = {seed, 0};
}

uint64_t Generator::seed() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_.seed;
}

GeneratorState Generator::reserve(uint64_t blocks) {
    std::lock_guard<std::mutex> lock(mutex_);
    const GeneratorState before = state_;
    state_.offset += blocks;
    return before;
}

GeneratorState Generator::state() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return state_;
}

void Generator::set_state(const GeneratorState& s) {
    std::lock_guard<std::mutex> lock(mutex_);
    state_ = s;
}

Generator& default_generator() {
    // The one process-wide generator, like torch's default CPU generator.
    static Generator gen;
    return gen;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace ember

// Fuzz target: the JSON state a training checkpoint carries (optim/): the
// GradScaler's, an LR schedule's (Warmup in front of OneCycle, so the nested
// "inner" state is reached too) and an optimizer's (Adam, with its own state
// tensors). Any text must load or throw ember::Error, and a load that throws
// must change nothing, as each load_state documents.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "support/fuzz_targets.h"
#include "kernels/factories.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/schedule.h"
#include "optim/sgd.h"

namespace ember::fuzz {

namespace {

[[noreturn]] void broken(const char* what) {
    std::fprintf(stderr, "fuzz checkpoint_state: %s\n", what);
    std::abort();
}

// load(json) either succeeds or throws ember::Error leaving state() as it was.
template <class Load, class State>
void load_or_unchanged(const Load& load, const State& state) {
    const std::string before = state();
    try {
        load();
    } catch (const Error&) {
        if (state() != before) broken("a load that failed changed the state");
    }
}

}  // namespace

int checkpoint_state(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string json(reinterpret_cast<const char*>(data) + 1, size - 1);
    switch (data[0] % 3) {
        case 0: {
            amp::GradScaler scaler;
            load_or_unchanged([&] { scaler.load_state(json); }, [&] { return scaler.state_json(); });
            break;
        }
        case 1: {
            Tensor p = zeros({3});
            optim::SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
            optim::Warmup schedule(
                std::make_unique<optim::OneCycle>(sgd, optim::OneCycleOptions{.max_lr = 0.5,
                                                                              .total_steps = 100}),
                {.steps = 10});
            load_or_unchanged([&] { schedule.load_state(json); },
                              [&] { return schedule.state_json() + sgd.state_json(); });
            break;
        }
        default: {
            Tensor a = zeros({2, 2}), b = zeros({3});
            optim::Adam adam({a, b}, {.lr = 1e-3});
            const auto tensors = adam.state_tensors();
            load_or_unchanged([&] { adam.load_state(tensors, json); },
                              [&] { return adam.state_json(); });
            break;
        }
    }
    return 0;
}

}  // namespace ember::fuzz

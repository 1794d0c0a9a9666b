// Seed inputs for the fuzz targets: valid files of each kind the readers
// accept, written by ember's own writer where it has one, and the malformed
// cases of the ordinary tests (tests/support/safetensors_cases.h,
// tests/support/idx_cases.h). libFuzzer starts from these; the regression test
// replays them in every build.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "core/error.h"
#include "support/idx_cases.h"
#include "support/fuzz_targets.h"
#include "kernels/factories.h"
#include "nn/safetensors.h"
#include "support/safetensors_cases.h"
#include "optim/adam.h"
#include "optim/grad_scaler.h"
#include "optim/schedule.h"
#include "optim/sgd.h"
#include "tools/train/options.h"

namespace ember::fuzz {

namespace {

using Bytes = std::vector<uint8_t>;

Bytes read_all(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// A tensor whose bytes are a fixed pattern (bool: 0 and 1).
Tensor patterned(const Shape& shape, DType dtype) {
    Tensor t = empty(shape, {.dtype = dtype});
    auto* p = static_cast<uint8_t*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel() * t.element_size(); ++i)
        p[i] = dtype == DType::boolean ? uint8_t(i & 1) : uint8_t(i * 37 + 11);
    return t;
}

std::vector<Bytes> safetensors_seeds() {
    std::vector<Bytes> out;
    // Valid files from the writer: every dtype, empty and 0-d tensors, metadata.
    const std::vector<std::vector<std::pair<std::string, Tensor>>> files = {
        {},
        {{"w", patterned({2, 3}, DType::f32)}},
        {{"a", patterned({4}, DType::f64)}, {"b", patterned({2, 2}, DType::f16)},
         {"c", patterned({3}, DType::bf16)}},
        {{"i", patterned({2}, DType::i64)}, {"j", patterned({1, 3}, DType::i32)},
         {"u", patterned({5}, DType::u8)}, {"m", patterned({4}, DType::boolean)}},
        {{"empty", patterned({0, 3}, DType::f32)}, {"scalar", patterned({}, DType::f32)}},
    };
    const std::string path = scratch_file("seed.safetensors", nullptr, 0);
    for (size_t i = 0; i < files.size(); ++i) {
        nn::save_safetensors(path, files[i], i % 2 ? std::map<std::string, std::string>{}
                                                   : std::map<std::string, std::string>{
                                                         {"format", "pt"}, {"step", "7"}});
        out.push_back(read_all(path));
    }
    for (const auto& c : test::safetensors_cases::header_cases())
        out.push_back(test::file_bytes(c.header, c.data));
    return out;
}

std::vector<Bytes> idx_seeds() {
    using test::concat;
    using test::idx_header;
    std::vector<Bytes> out;
    // The target's first byte picks raw (even) or gzip-wrapped (odd) input.
    auto both = [&](const Bytes& file) {
        for (uint8_t mode : {0, 1}) out.push_back(concat({mode}, file));
    };
    both(concat(idx_header(0x08, {3, 2, 2}), test::random_bytes(12, 1)));
    both(concat(idx_header(0x08, {4}), test::random_bytes(4, 2)));
    both(concat(idx_header(0x09, {2, 2}), test::random_bytes(4, 3)));
    both(concat(idx_header(0x0B, {3}), test::random_bytes(6, 4)));
    both(concat(idx_header(0x0C, {2}), test::random_bytes(8, 5)));
    both(concat(idx_header(0x0D, {2, 1}), test::random_bytes(8, 6)));
    both(concat(idx_header(0x0E, {1}), test::random_bytes(8, 7)));
    both(idx_header(0x08, {0, 28, 28}));
    for (const test::IdxCase& c : test::idx_bad_header_cases()) both(c.bytes);
    return out;
}

std::vector<Bytes> tensor_args_seeds() {
    // dtype, ndim, sizes, strides, then as_strided's n, sizes, strides,
    // offset, then view ops (op, four values, n, a shape): small values are
    // bytes below 0xE0 decoding to (b % 20) - 2.
    auto v = [](int64_t x) { return uint8_t(x + 2); };
    return {
        {0, 2, v(3), v(4), v(4), v(1), 2, v(3), v(4), v(4), v(1), v(0)},
        {1, 1, v(8), v(1), 1, v(4), v(2), v(1), 0, v(0), v(1), v(4), v(2), 0},
        {6, 3, v(2), v(3), v(4), v(12), v(4), v(1), 0, v(0), 3, v(1), v(0), v(0), v(0), 2,
         v(5), v(6)},
        {2, 2, v(2), v(2), v(0), v(0), 1, v(6), v(1), v(2), 5, v(0), v(0), v(0), v(0), 0},
        {4, 1, 0xFF, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, v(1)},
        {5, 2, 0xE0, 40, v(2), v(1), 0xE1, 62},
    };
}

std::vector<Bytes> checkpoint_state_seeds() {
    // Each reader's own state, fresh and after a few steps, behind its
    // selector byte; then a few broken texts.
    std::vector<Bytes> out;
    auto add = [&](uint8_t which, const std::string& json) {
        Bytes b = {which};
        b.insert(b.end(), json.begin(), json.end());
        out.push_back(b);
    };
    amp::GradScaler scaler;
    add(0, scaler.state_json());
    Tensor p = zeros({3});
    optim::SGD sgd({p}, {.lr = 0.1, .momentum = 0.9});
    optim::Warmup schedule(std::make_unique<optim::OneCycle>(
                               sgd, optim::OneCycleOptions{.max_lr = 0.5, .total_steps = 100}),
                           {.steps = 10});
    add(1, schedule.state_json());
    for (int i = 0; i < 12; ++i) schedule.step();
    add(1, schedule.state_json());
    Tensor a = zeros({2, 2}), b = zeros({3});
    optim::Adam adam({a, b}, {.lr = 1e-3});
    add(2, adam.state_json());
    for (uint8_t which : {0, 1, 2}) {
        add(which, "{}");
        add(which, "[1,2");
        add(which, R"({"scale":-1,"steps":-3,"base_lrs":[1e400]})");
    }
    return out;
}

std::vector<Bytes> train_files_seeds() {
    // Config files as `ember train --dump-config` writes them (selector 0),
    // checkpoint JSON as save_checkpoint writes it (1: no scaler, 3: with).
    std::vector<Bytes> out;
    auto add = [&](uint8_t which, const std::string& text) {
        Bytes b = {which};
        b.insert(b.end(), text.begin(), text.end());
        out.push_back(b);
    };
    train::TrainConfig c;
    CLI::App app{"train"};
    train::add_train_options(app, c);
    add(0, app.config_to_str(true, false));
    add(0, "model = \"resnet8\"\nepochs = 3\nlr = 0.002\namp = \"f16\"\nanomaly = true\n");
    add(0, "[train]\n# a comment\nbatch-size = 0\n");
    add(0, "optimizer = sgd\nmomentum = 2\nnonsense\n");
    const std::string meta =
        R"({"version":1,"model":"mlp","step":120,"epoch":1,"batch":20,"best_accuracy":0.81,)"
        R"("rng_seed":0,"rng_offset":4096,"optimizer":"{}","schedule":"{}")";
    add(1, meta + "}");
    add(3, meta + R"(,"scaler":"{\"scale\":65536}"})");
    add(1, R"({"version":2})");
    add(1, meta + R"(,"step":-1})");
    return out;
}

}  // namespace

std::vector<std::vector<uint8_t>> seeds(const std::string& target) {
    if (target == "safetensors") return safetensors_seeds();
    if (target == "idx") return idx_seeds();
    if (target == "tensor_args") return tensor_args_seeds();
    if (target == "checkpoint_state") return checkpoint_state_seeds();
    if (target == "train_files") return train_files_seeds();
    EMBER_FAIL("fuzz: no target called '", target,
               "' (safetensors, idx, tensor_args, checkpoint_state, train_files)");
}

}  // namespace ember::fuzz

// conv2d on CUDA (cuDNN, kernels/cuda/conv.cpp): what the op table does not
// say. The random-input comparisons with the CPU — forward and backward for
// every dtype over strides, padding, dilation, groups (depthwise too), 1×1,
// 3×3 and rectangular kernels, odd and empty sizes, unbatched inputs, with and
// without bias, contiguous, transposed and channels-last — are the conv2d and
// conv2d_backward entries of the op table (tests/ops/entries_conv.cpp, run by
// tests/cuda/test_cuda_ops.cpp). Here: the error without cuDNN, channels-last
// activations beside an NCHW weight (the formats kept, NHWC cache keys),
// exactly the gradients asked for, f32 without TF32, deterministic mode (the
// same bits twice), benchmark mode on and off, and the algorithm cache saved,
// loaded back and used, including an entry cuDNN rejects (kernels/conv_algos.h).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/cuda_context.h"
#include "kernels/conv_algos.h"
#include "ops/op_table.h"
#include "support/linalg_cases.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

const Device kGpu = Device::cuda(0);
const DType kFloats[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
constexpr int kFmaMath = 3;  // CUDNN_FMA_MATH: f32 without TF32

bool have_cudnn() { return cuda_versions().find("cuDNN not built in") == std::string::npos; }

// The op table's conv2d entry (tests/ops/entries_conv.cpp): its CUDA cases
// and its CUDA tolerance are this file's too.
const OpEntry& conv_entry() {
    for (const OpEntry& e : op_table())
        if (e.name == "conv2d") return e;
    FAIL("the op table has no conv2d entry");
    return op_table().front();
}

// Tolerance relative to the largest |expected| (and per element): the op
// table's (cuDNN sums the products in its own orders, FFT and Winograd
// included; f32 without TF32).
double tol(DType t) { return conv_entry().cuda_tolerance(t, Sample{}, 0); }

void check_gpu(const Tensor& got, const Tensor& want, DType dt) {
    REQUIRE(got.defined());
    REQUIRE(got.device() == kGpu);
    REQUIRE(got.dtype() == dt);
    double scale = 1;
    for (double v : values(want)) scale = std::max(scale, std::abs(v));
    check_close(got.to(Device::cpu()), want, tol(dt), tol(dt) * scale);
}

// The CPU computes f16/bf16 operands in f32: the reference is that f32 result.
DType ref_dtype(DType t) { return t == DType::f16 || t == DType::bf16 ? DType::f32 : t; }

void require_same_bits(const Tensor& a, const Tensor& b) {
    REQUIRE(a.shape() == b.shape());
    const std::vector<double> va = values(a), vb = values(b);
    int64_t differ = 0;
    for (size_t i = 0; i < va.size(); ++i) differ += va[i] != vb[i];
    CHECK(differ == 0);
}

// Restores the cuDNN switches however a test ends.
struct Modes {
    bool benchmark = cudnn_benchmark(), deterministic = cudnn_deterministic();
    ~Modes() {
        set_cudnn_benchmark(benchmark);
        set_cudnn_deterministic(deterministic);
    }
};

// The convolutions of the op table's conv2d entry (its cuda_cases, which the
// table compares with the CPU), batched ones only: one list, in
// tests/ops/entries_conv.cpp.
const std::vector<ConvCase>& table_cases() {
    static const std::vector<ConvCase> cases = [] {
        std::vector<ConvCase> out;
        for (const Case& c : conv_entry().cuda_cases)
            if (c.shapes[0].size() == 4)
                out.push_back({c.shapes[0], c.shapes[1], c.args.stride, c.args.padding,
                               c.args.dilation, c.args.groups, c.shapes.size() == 3});
        return out;
    }();
    return cases;
}
// The first one matching `pred`: the cases below name what they need.
template <class Pred>
const ConvCase& table_case(Pred pred) {
    for (const ConvCase& c : table_cases())
        if (pred(c)) return c;
    FAIL("the op table's conv2d cases have none of the kind this test needs");
    return table_cases().front();
}
// A ResNet block: 64 → 64 channels of 14 × 14, batch 8.
const ConvCase& resnet_block() {
    return table_case([](const ConvCase& c) { return c.weight == Shape{64, 64, 3, 3}; });
}

std::string case_str(const ConvCase& c) {
    return str("input ", shape_str(c.input), " weight ", shape_str(c.weight), " stride ",
               c.stride[0], ",", c.stride[1], " padding ", c.padding[0], ",", c.padding[1],
               " dilation ", c.dilation[0], ",", c.dilation[1], " groups ", c.groups, " bias ",
               c.bias);
}

Shape out_shape(const ConvCase& c) {
    return {c.input[0], c.weight[0],
            out_size(c.input[2], c.weight[2], c.stride[0], c.padding[0], c.dilation[0]),
            out_size(c.input[3], c.weight[3], c.stride[1], c.padding[1], c.dilation[1])};
}

// One case's operands in dtype dt (on the CPU).
struct Operands {
    Tensor x, w, b, dy;
};
Operands operands(const ConvCase& c, DType dt, uint64_t seed) {
    return {random_tensor(c.input, dt, seed), random_tensor(c.weight, dt, seed + 1),
            c.bias ? random_tensor({c.weight[0]}, dt, seed + 2) : Tensor(),
            random_tensor(out_shape(c), dt, seed + 3)};
}

Tensor gpu(const Tensor& t) { return t.defined() ? t.to(kGpu) : t; }
Tensor as(const Tensor& t, DType d) { return t.defined() ? t.to(d) : t; }

Tensor forward(const Operands& o, const ConvCase& c) {
    return kernels::conv2d(o.x, o.w, o.b, c.stride, c.padding, c.dilation, c.groups);
}
kernels::Conv2dGrads backward(const Operands& o, const ConvCase& c, std::array<bool, 3> need) {
    return kernels::conv2d_backward(o.dy, o.x, o.w, c.stride, c.padding, c.dilation, c.groups,
                                    need);
}
Operands on_gpu(const Operands& o) { return {gpu(o.x), gpu(o.w), gpu(o.b), gpu(o.dy)}; }
Operands in_dtype(const Operands& o, DType d) {
    return {as(o.x, d), as(o.w, d), as(o.b, d), as(o.dy, d)};
}

void check_grads(const kernels::Conv2dGrads& got, const kernels::Conv2dGrads& want,
                 std::array<bool, 3> need, DType dt) {
    const Tensor kernels::Conv2dGrads::*member[] = {
        &kernels::Conv2dGrads::input, &kernels::Conv2dGrads::weight, &kernels::Conv2dGrads::bias};
    for (int i = 0; i < 3; ++i) {
        INFO("gradient " << (i == 0 ? "input" : i == 1 ? "weight" : "bias"));
        CHECK((got.*member[i]).defined() == need[size_t(i)]);
        if (need[size_t(i)]) check_gpu(got.*member[i], want.*member[i], dt);
    }
}

}  // namespace

TEST_CASE("cuda conv2d without cuDNN is a clear error", "[cuda][conv]") {
    if (have_cudnn()) return;  // the other tests run instead
    const Tensor x = random_tensor({1, 2, 5, 5}, DType::f32, 1).to(kGpu);
    const Tensor w = random_tensor({3, 2, 3, 3}, DType::f32, 2).to(kGpu);
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w), "conv2d on CUDA needs cuDNN");
    const Tensor dy = random_tensor({1, 3, 3, 3}, DType::f32, 3).to(kGpu);
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d_backward(dy, x, w, {1, 1}, {0, 0}, {1, 1}, 1),
                            "conv2d on CUDA needs cuDNN");
}

TEST_CASE("cuda conv2d on channels-last activations and an NCHW weight", "[cuda][conv][format]") {
    // cuDNN's NHWC tensor and filter formats for f32/f16/bf16 (f64 converts
    // to NCHW); the result and grad_input keep the format, grad_weight is
    // row-major; the NHWC choices are cached under their own keys. The weight
    // stays NCHW (the front copies it to cuDNN's NHWC filter order): the op
    // table's channels_last layout makes every 4-d operand NHWC, the weight too.
    if (!have_cudnn()) return;
    clear_conv_algorithms();
    uint64_t seed = 150;
    for (const ConvCase& c : table_cases())
        for (DType dt : kFloats) {
            INFO(case_str(c) << " " << dtype_name(dt) << " channels_last");
            const Operands o = operands(c, dt, seed += 4);
            const Operands ref = in_dtype(o, ref_dtype(dt));
            Operands last = on_gpu(o);
            last.x = last.x.contiguous(MemoryFormat::channels_last);
            last.dy = last.dy.contiguous(MemoryFormat::channels_last);
            const Tensor y = forward(last, c);
            const kernels::Conv2dGrads g = backward(last, c, {true, true, true});
            // Where NHWC differs from NCHW (more than one channel and pixel), the format is kept.
            const bool distinct = last.x.suggest_memory_format() == MemoryFormat::channels_last &&
                                  c.weight[0] > 1 && y.size(2) * y.size(3) > 1;
            if (distinct) {
                CHECK(y.suggest_memory_format() == MemoryFormat::channels_last);
                CHECK(g.input.suggest_memory_format() == MemoryFormat::channels_last);
            }
            CHECK(g.weight.is_contiguous());
            check_gpu(y, forward(ref, c), dt);
            check_grads(g, backward(ref, c, {true, true, true}), {true, true, true}, dt);
        }
    // cuDNN saw NHWC descriptors: choices under channels-last keys, none for f64.
    int last_keys = 0, last_f64 = 0;
    for (const auto& [key, choice] : kernels::conv_algo_cache(0).entries()) {
        last_keys += key.channels_last;
        last_f64 += key.channels_last && key.dtype == DType::f64;
    }
    CHECK(last_keys > 0);
    CHECK(last_f64 == 0);
}

TEST_CASE("cuda conv2d_backward computes exactly the gradients asked for", "[cuda][conv]") {
    if (!have_cudnn()) return;
    // Stride 2, groups 2, no output channels, no input channels.
    const ConvCase& strided = table_case([](const ConvCase& c) { return c.stride == Int2{2, 2}; });
    const ConvCase& grouped = table_case([](const ConvCase& c) { return c.groups == 2; });
    const ConvCase& no_out = table_case([](const ConvCase& c) { return c.weight[0] == 0; });
    const ConvCase& no_in = table_case([](const ConvCase& c) { return c.input[1] == 0; });
    for (const ConvCase& c : {strided, grouped, no_out, no_in})
        for (DType dt : {DType::f32, DType::bf16})
            for (int mask = 1; mask < 8; ++mask) {
                const std::array<bool, 3> need = {(mask & 1) != 0, (mask & 2) != 0,
                                                  (mask & 4) != 0};
                INFO(case_str(c) << " " << dtype_name(dt) << " need " << need[0] << need[1]
                                 << need[2]);
                const Operands o = operands(c, dt, 300 + uint64_t(mask));
                check_grads(backward(on_gpu(o), c, need),
                            backward(in_dtype(o, ref_dtype(dt)), c, {true, true, true}), need, dt);
            }
}

TEST_CASE("cuda conv2d in f32 runs without TF32", "[cuda][conv]") {
    if (!have_cudnn()) return;
    const ConvCase c = resnet_block();
    const Operands o = operands(c, DType::f32, 500);
    check_gpu(forward(on_gpu(o), c), forward(o, c), DType::f32);
    (void)backward(on_gpu(o), c, {true, true, true});
    int f32_entries = 0;
    for (const auto& [key, choice] : kernels::conv_algo_cache(0).entries())
        if (key.dtype == DType::f32) {
            ++f32_entries;
            INFO(kernels::conv_direction_name(key.direction) << " algo " << choice.algo);
            CHECK(choice.math == kFmaMath);
        }
    CHECK(f32_entries >= 3);
}

TEST_CASE("cuda conv2d in deterministic mode gives the same bits twice", "[cuda][conv]") {
    if (!have_cudnn()) return;
    const Modes restore;
    set_cudnn_deterministic(true);
    for (bool bench : {true, false}) {
        set_cudnn_benchmark(bench);
        // A large batch: where backward filter and data would split sums with atomics.
        const ConvCase c{{32, 16, 28, 28}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true};
        for (DType dt : {DType::f32, DType::f16}) {
            INFO("benchmark " << bench << " " << dtype_name(dt));
            const Operands g = on_gpu(operands(c, dt, 600));
            const Tensor y1 = forward(g, c), y2 = forward(g, c);
            const kernels::Conv2dGrads g1 = backward(g, c, {true, true, true});
            const kernels::Conv2dGrads g2 = backward(g, c, {true, true, true});
            require_same_bits(y1, y2);
            require_same_bits(g1.input, g2.input);
            require_same_bits(g1.weight, g2.weight);
            require_same_bits(g1.bias, g2.bias);
            check_gpu(
                g1.weight,
                backward(in_dtype(operands(c, dt, 600), ref_dtype(dt)), c, {false, true, false})
                    .weight,
                dt);
        }
    }
    int deterministic = 0;  // the keys carry the mode: 3 directions x 2 dtypes x 2 modes
    for (const auto& [key, choice] : kernels::conv_algo_cache(0).entries())
        deterministic += key.deterministic && key.n == 32;
    CHECK(deterministic == 12);
}

TEST_CASE("cuda conv2d with benchmark mode on and off agree", "[cuda][conv]") {
    if (!have_cudnn()) return;
    const Modes restore;
    // The GEMM-sized one: 32 → 48 channels of 17 × 19.
    const ConvCase c = table_case([](const ConvCase& k) { return k.weight[0] == 48; });
    for (DType dt : kFloats) {
        INFO(dtype_name(dt));
        const Operands o = operands(c, dt, 700);
        const Operands ref = in_dtype(o, ref_dtype(dt));
        set_cudnn_benchmark(true);
        const Tensor timed = forward(on_gpu(o), c);
        const kernels::Conv2dGrads timed_g = backward(on_gpu(o), c, {true, true, true});
        set_cudnn_benchmark(false);
        const Tensor heuristic = forward(on_gpu(o), c);
        const kernels::Conv2dGrads heuristic_g = backward(on_gpu(o), c, {true, true, true});
        for (const Tensor& y : {timed, heuristic}) check_gpu(y, forward(ref, c), dt);
        const kernels::Conv2dGrads want = backward(ref, c, {true, true, true});
        check_grads(timed_g, want, {true, true, true}, dt);
        check_grads(heuristic_g, want, {true, true, true}, dt);
    }
    // Both modes left their choices, apart.
    int timed = 0, heuristic = 0;
    for (const auto& [key, choice] : kernels::conv_algo_cache(0).entries())
        if (key.n == 4 && key.c == 32 && key.h == 17 && !key.channels_last)
            (key.benchmark ? timed : heuristic) += 1;
    CHECK(timed == 12);  // 3 directions x 4 dtypes
    CHECK(heuristic == 12);
}

TEST_CASE("cuda conv2d algorithm cache: saved, loaded back and used", "[cuda][conv]") {
    if (!have_cudnn()) return;
    const Modes restore;
    set_cudnn_benchmark(true);
    set_cudnn_deterministic(false);
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("ember-cuda-conv-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "algos.txt").string();
    const ConvCase c = resnet_block();
    const Operands g = on_gpu(operands(c, DType::f32, 800));

    clear_conv_algorithms();
    const Tensor y = forward(g, c);
    (void)backward(g, c, {true, true, false});
    const auto tuned = kernels::conv_algo_cache(0).entries();
    REQUIRE(tuned.size() == 3);  // forward, backward data, backward filter
    CHECK(save_conv_algorithms(path) == 3);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const auto records = kernels::parse_conv_algorithms(text.str(), path);
    REQUIRE(records.size() == 3);
    for (const kernels::ConvAlgoRecord& r : records)
        CHECK(r.device == cuda_device_properties(0).name);

    clear_conv_algorithms();
    CHECK(kernels::conv_algo_cache(0).size() == 0);
    size_t same_model = 0;  // every device of this model loads the entries
    for (int i = 0; i < cuda_device_count(); ++i)
        same_model += cuda_device_properties(i).name == cuda_device_properties(0).name;
    CHECK(load_conv_algorithms(path) == 3 * same_model);
    for (const auto& [key, choice] : kernels::conv_algo_cache(0).entries())
        CHECK(choice.workspace == kernels::kWorkspaceUnknown);  // until first used
    require_same_bits(forward(g, c), y);  // the same algorithm: the same bits, no new timing
    (void)backward(g, c, {true, true, false});
    const auto used = kernels::conv_algo_cache(0).entries();
    REQUIRE(used.size() == tuned.size());
    for (size_t i = 0; i < used.size(); ++i) {
        CHECK(used[i].first == tuned[i].first);
        CHECK(used[i].second == tuned[i].second);  // algo, math and workspace as tuned
    }

    // An entry this cuDNN does not take (no algorithm 63) is dropped and chosen again.
    std::string bad = text.str();
    const size_t at = bad.find("algo=", bad.find("\nforward "));
    REQUIRE(at != std::string::npos);
    bad.replace(at, bad.find(' ', at) - at, "algo=63");
    std::ofstream(path) << bad;
    clear_conv_algorithms();
    REQUIRE(load_conv_algorithms(path) >= 3);
    check_gpu(forward(g, c), forward(operands(c, DType::f32, 800), c), DType::f32);
    for (const auto& [key, choice] : kernels::conv_algo_cache(0).entries())
        CHECK(choice.algo != 63);

    // A corrupt file loads nothing.
    std::ofstream(path) << text.str() << "forward f32 x=1\n";
    clear_conv_algorithms();
    REQUIRE_THROWS_WITH_MSG(load_conv_algorithms(path), "field 'x' needs 4");
    CHECK(kernels::conv_algo_cache(0).size() == 0);
    std::filesystem::remove_all(dir);
}

// conv2d against a naive 7-loop f64 reference: stride, padding, dilation,
// groups (depthwise included), bias, 1×1 kernels, size-0/1 dims, every
// floating dtype, non-contiguous operands, both threading paths, a poisoned
// output, and every argument error.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "kernels/conv.h"
#include "kernels/conv_algos.h"
#include "kernels/cpu/conv.h"
#include "support/linalg_cases.h"
#include "support/support.h"

using namespace ember;
using namespace ember::test;

namespace {

// The convolution by its definition, in f64, one output element at a time.
std::vector<double> reference_conv2d(const Tensor& x, const Tensor& w, const Tensor& b,
                                     const ConvCase& c, Shape* shape) {
    const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
    const int64_t O = w.size(0), CG = w.size(1), KH = w.size(2), KW = w.size(3);
    const int64_t OG = O / c.groups;
    const int64_t OH = out_size(H, KH, c.stride[0], c.padding[0], c.dilation[0]);
    const int64_t OW = out_size(W, KW, c.stride[1], c.padding[1], c.dilation[1]);
    const std::vector<double> vx = values(x), vw = values(w);
    const std::vector<double> vb = b.defined() ? values(b) : std::vector<double>(size_t(O), 0.0);
    std::vector<double> out;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t oy = 0; oy < OH; ++oy)
                for (int64_t ox = 0; ox < OW; ++ox) {
                    double s = vb[size_t(o)];
                    for (int64_t ci = 0; ci < CG; ++ci)
                        for (int64_t i = 0; i < KH; ++i)
                            for (int64_t j = 0; j < KW; ++j) {
                                const int64_t y =
                                    oy * c.stride[0] - c.padding[0] + i * c.dilation[0];
                                const int64_t xx =
                                    ox * c.stride[1] - c.padding[1] + j * c.dilation[1];
                                if (y < 0 || y >= H || xx < 0 || xx >= W) continue;
                                const int64_t ch = (o / OG) * CG + ci;
                                s += vw[size_t(((o * CG + ci) * KH + i) * KW + j)] *
                                     vx[size_t(((n * C + ch) * H + y) * W + xx)];
                            }
                    out.push_back(s);
                }
    *shape = {N, O, OH, OW};
    (void)C;
    return out;
}

double atol_for(DType t, int64_t k) { return (t == DType::f64 ? 1e-14 : 5e-7) * double(k + 1); }

void check_conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvCase& c) {
    Shape shape;
    const std::vector<double> want = reference_conv2d(x, w, b, c, &shape);
    const Tensor got = kernels::conv2d(x, w, b, c.stride, c.padding, c.dilation, c.groups);
    REQUIRE(got.shape() == shape);
    REQUIRE(got.dtype() == x.dtype());
    check_close(got, want, rtol_for(x.dtype()),
                atol_for(x.dtype(), w.size(1) * w.size(2) * w.size(3)));
}

const ConvCase kCases[] = {
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{2, 3, 7, 7}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // "same" padding
    {{1, 4, 9, 8}, {6, 2, 3, 2}, {2, 3}, {1, 0}, {1, 1}, 2, false},  // groups, rectangular
    {{2, 4, 10, 9}, {4, 4, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, true},  // dilation
    {{2, 6, 8, 8}, {6, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 6, true},   // depthwise
    {{1, 3, 6, 6}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 3, false},  // depthwise, multiplier 2
    {{3, 5, 4, 6}, {7, 5, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},   // 1×1 read in place
    {{2, 5, 5, 6}, {3, 5, 1, 1}, {2, 2}, {0, 0}, {1, 1}, 1, false},  // 1×1 strided
    {{1, 2, 3, 3}, {2, 2, 1, 1}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // 1×1 padded
    {{2, 2, 3, 3}, {2, 2, 5, 5}, {1, 1}, {1, 1}, {1, 1}, 1, true},   // output 1×1
    {{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{1, 2, 9, 9}, {3, 2, 2, 2}, {4, 3}, {1, 1}, {1, 1}, 1, true},    // stride > kernel
    {{1, 2, 4, 4}, {2, 2, 3, 3}, {1, 1}, {3, 2}, {1, 1}, 1, true},    // padding > kernel/2
    {{2, 4, 11, 10}, {8, 2, 3, 3}, {2, 1}, {2, 1}, {2, 3}, 2, true},  // everything at once
    {{0, 3, 5, 5}, {2, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},    // empty batch
    {{2, 3, 5, 5}, {0, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false},   // no output channels
    {{2, 0, 4, 4}, {3, 0, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, true},    // no input channels: bias
    // Several column tiles per image, tiles ending mid-row (the tile width
    // follows from C/G·kH·kW and O/G; see kernels/cpu/conv.cpp).
    {{1, 64, 30, 30}, {8, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},
    {{2, 32, 40, 37}, {4, 32, 3, 3}, {2, 1}, {2, 1}, {2, 1}, 1, true},
    {{1, 512, 20, 20}, {8, 512, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, true},
    {{4, 8, 16, 16}, {8, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true},     // a tile per thread
    {{1, 16, 32, 32}, {16, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true},  // one tile, GEMM threaded
};

}  // namespace

TEST_CASE("conv2d matches the naive reference for every dtype", "[conv]") {
    uint64_t seed = 1000;
    for (const ConvCase& c : kCases) {
        for (DType dt : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
            INFO("input " << shape_str(c.input) << " weight " << shape_str(c.weight) << " stride "
                          << c.stride[0] << "," << c.stride[1] << " padding " << c.padding[0] << ","
                          << c.padding[1] << " dilation " << c.dilation[0] << "," << c.dilation[1]
                          << " groups " << c.groups << " bias " << c.bias << " " << dtype_name(dt));
            const Tensor x = random_tensor(c.input, dt, ++seed);
            const Tensor w = random_tensor(c.weight, dt, ++seed);
            const Tensor b = c.bias ? random_tensor({c.weight[0]}, dt, ++seed) : Tensor();
            check_conv(x, w, b, c);
            check_conv(non_contiguous(x), non_contiguous(w), b, c);
        }
    }
}

TEST_CASE("conv2d takes an unbatched [C, H, W] input", "[conv]") {
    const ConvCase c = kCases[2];
    const Tensor x = random_tensor({4, 9, 8}, DType::f32, 5),
                 w = random_tensor(c.weight, DType::f32, 6);
    const Tensor y = kernels::conv2d(x, w, {}, c.stride, c.padding, c.dilation, c.groups);
    Shape shape;
    const std::vector<double> want = reference_conv2d(x.unsqueeze(0), w, {}, c, &shape);
    REQUIRE(y.shape() == Shape(shape.begin() + 1, shape.end()));
    check_close(y, want, 2e-5, atol_for(DType::f32, 12));
}

TEST_CASE("cpu::conv2d overwrites every element of a poisoned output", "[conv]") {
    for (const ConvCase& c : {kCases[1], kCases[6], kCases[12], kCases[13]}) {
        for (bool with_bias : {false, true}) {
            const Tensor x = random_tensor(c.input, DType::f32, 7),
                         w = random_tensor(c.weight, DType::f32, 8);
            const Tensor b = with_bias ? random_tensor({c.weight[0]}, DType::f32, 9) : Tensor();
            Shape shape;
            const std::vector<double> want = reference_conv2d(x, w, b, c, &shape);
            Tensor out = full(shape, std::numeric_limits<double>::quiet_NaN());
            const kernels::Conv2dShape s{
                shape[0],      c.input[1],  c.input[2],  c.input[3],   c.weight[0],  c.weight[2],
                c.weight[3],   c.stride[0], c.stride[1], c.padding[0], c.padding[1], c.dilation[0],
                c.dilation[1], c.groups,    shape[2],    shape[3]};
            kernels::cpu::conv2d(s, DType::f32, x.data_ptr(), w.data_ptr(),
                                 with_bias ? b.data_ptr() : nullptr, out.data_ptr());
            check_close(out, want, 2e-5, atol_for(DType::f32, 36));
        }
    }
}

TEST_CASE("conv2d errors name the shapes and dtypes", "[conv][errors]") {
    const Tensor x = random_tensor({1, 4, 5, 5}, DType::f32, 11);
    const Tensor w = random_tensor({2, 4, 3, 3}, DType::f32, 12);
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(random_tensor({3, 4}, DType::f32, 13), w),
        "conv2d: expected input [N, C, H, W] or [C, H, W], got f32 [3, 4] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({2, 4, 3}, DType::f32, 14)),
        "conv2d: expected weight [O, C/groups, kH, kW], got f32 [2, 4, 3] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({2, 3, 3, 3}, DType::f32, 15)),
        "conv2d: weight f32 [2, 3, 3, 3] on cpu with groups = 1 expects 3 input "
        "channels, got input f32 [1, 4, 5, 5] on cpu");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({3, 1, 3, 3}, DType::f32, 16), {}, {1, 1}, {0, 0}, {1, 1},
                        3),
        "conv2d: the 4 channels of input f32 [1, 4, 5, 5] on cpu are not divisible by groups = 3");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({3, 2, 3, 3}, DType::f32, 17), {}, {1, 1}, {0, 0}, {1, 1},
                        2),
        "conv2d: the 3 output channels of weight f32 [3, 2, 3, 3] on cpu are not divisible by "
        "groups = 2");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(random_tensor({1, 4, 2, 2}, DType::f32, 18), w),
        "conv2d: padded input size 2x2 of input f32 [1, 4, 2, 2] on cpu is smaller "
        "than the dilated kernel 3x3");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {0, 0}, {2, 3}),
                            "smaller than the dilated kernel 5x7");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, random_tensor({2, 4, 3, 3}, DType::f64, 19)),
        "conv2d: input f32 [1, 4, 5, 5] on cpu, weight f64 [2, 4, 3, 3] on cpu and bias "
        "undefined must have one dtype");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(x, w, random_tensor({3}, DType::f32, 20)),
        "conv2d: expected bias [2] for weight f32 [2, 4, 3, 3] on cpu, got f32 [3] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {0, 1}),
                            "conv2d: expected stride >= 1, padding >= 0, dilation >= 1 "
                            "and groups >= 1, got stride [0, 1]");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {-1, 0}), "padding [-1, 0]");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 0}), "dilation [1, 0]");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, w, {}, {1, 1}, {0, 0}, {1, 1}, 0), "groups 0");
    REQUIRE_THROWS_WITH_MSG(
        kernels::conv2d(random_tensor({1, 4, 5, 5}, DType::i64, 21, -2, 2),
                        random_tensor({2, 4, 3, 3}, DType::i64, 22, -2, 2)),
        "conv2d: expected a floating-point tensor, got i64 [1, 4, 5, 5] on cpu");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, random_tensor({2, 4, 0, 3}, DType::f32, 23)),
                            "conv2d: empty kernel");
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(x, Tensor()), "conv2d: undefined tensor argument");
}

TEST_CASE("conv2d rejects parameters whose products would overflow", "[conv][errors]") {
    REQUIRE_THROWS_WITH_MSG(kernels::conv2d(ones({1, 1, 8, 8}), ones({1, 1, 5, 1}), Tensor(),
                                            {INT64_MAX, 1}, {0, 0}, {(int64_t(1) << 62) + 1, 1}, 1),
                            "exceed 2^30");
}

// ---- The cuDNN algorithm cache and its file (kernels/conv_algos.h): plain
// C++, so the format, its validation and the cache run here; filling the
// cache from cuDNN is tests/cuda/test_cuda_conv.cpp's.

namespace {

using kernels::ConvAlgoChoice;
using kernels::ConvAlgoKey;
using kernels::ConvAlgoRecord;
using kernels::ConvDirection;

ConvAlgoKey sample_key() {
    const kernels::Conv2dShape s{8, 3, 32, 32, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1, 32, 32};
    return kernels::conv_algo_key(ConvDirection::forward, DType::f32, s, false, true);
}

std::string algo_text(const std::string& entry) {
    return "ember-conv-algorithms 1\ndevice NVIDIA H200\n" + entry + "\n";
}

const char* kEntry =
    "forward f32 x=8,3,32,32 w=16,3,3,3 stride=1,1 padding=1,1 dilation=1,1 groups=1 "
    "deterministic=0 benchmark=1 algo=1 math=3";

}  // namespace

TEST_CASE("conv algorithm file: the documented line, and a round trip", "[conv][algos]") {
    const std::string text = kernels::format_conv_algorithms(
        {{"NVIDIA H200", sample_key(), {1, 3, 4096}}});
    CHECK(text == algo_text(kEntry));  // the example of Note [Conv algorithm file]

    // Every direction and dtype, groups, both modes, two devices.
    std::vector<ConvAlgoRecord> records;
    int i = 0;
    for (const char* device : {"NVIDIA H200", "NVIDIA A100-SXM4-80GB"})
        for (ConvDirection d : {ConvDirection::forward, ConvDirection::backward_data,
                                ConvDirection::backward_filter})
            for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
                ++i;
                ConvAlgoKey k;
                k.direction = d, k.dtype = t;
                k.n = i, k.c = 6, k.h = 7 + i, k.w = 5, k.o = 4, k.kh = 3, k.kw = 1;
                k.sh = 2, k.sw = 1, k.ph = i % 3, k.pw = 0, k.dh = 1, k.dw = 2, k.groups = 2;
                k.deterministic = i % 2 == 0, k.benchmark = i % 3 != 0;
                k.channels_last = i % 5 == 0;
                records.push_back({device, k, {i % 8, i % 4, kernels::kWorkspaceUnknown}});
            }
    const std::vector<ConvAlgoRecord> back =
        kernels::parse_conv_algorithms(kernels::format_conv_algorithms(records), "mem");
    REQUIRE(back.size() == records.size());
    for (size_t j = 0; j < back.size(); ++j) {
        INFO("record " << j);
        CHECK(back[j].device == records[j].device);
        CHECK(back[j].key == records[j].key);
        CHECK(back[j].choice == records[j].choice);
    }
    // Comments, blank lines, CRLF and fields in another order are read too.
    const auto loose = kernels::parse_conv_algorithms(
        "# tuned on the big box\r\nember-conv-algorithms 1\r\n\n  device   NVIDIA H200  \r\n"
        "forward f32 math=3 algo=1 benchmark=1 deterministic=0 groups=1 dilation=1,1 "
        "padding=1,1 stride=1,1 w=16,3,3,3 x=8,3,32,32\r\n",
        "mem");
    REQUIRE(loose.size() == 1);
    CHECK(loose[0].device == "NVIDIA H200");
    CHECK(loose[0].key == sample_key());
    CHECK(loose[0].choice == ConvAlgoChoice{1, 3, kernels::kWorkspaceUnknown});

    // A channels-last (NHWC) choice is its own entry: one more field, absent for NCHW.
    ConvAlgoKey last = sample_key();
    last.channels_last = true;
    const std::string text_last =
        kernels::format_conv_algorithms({{"NVIDIA H200", last, {1, 3, 4096}}});
    std::string want = kEntry;
    want.replace(want.find(" algo="), 0, " channels_last=1");
    CHECK(text_last == algo_text(want));
    const auto read_last = kernels::parse_conv_algorithms(text_last, "mem");
    REQUIRE(read_last.size() == 1);
    CHECK(read_last[0].key == last);
    CHECK_FALSE(read_last[0].key == sample_key());
}

TEST_CASE("conv algorithm file: every malformed line is an error naming it", "[conv][algos]") {
    const std::string e = kEntry;
    auto replace = [&](const std::string& from, const std::string& to) {
        std::string t = e;
        t.replace(t.find(from), from.size(), to);
        return algo_text(t);
    };
    const std::pair<std::string, std::string> bad[] = {
        {"", "is empty"},
        {"# only a comment\n", "is empty"},
        {"ember-conv-algorithms 2\n", "line 1: not a conv algorithm file"},
        {"{\"json\": true}\n", "line 1: not a conv algorithm file"},
        {"ember-conv-algorithms 1\n" + e + "\n", "line 2: an entry before any 'device' line"},
        {"ember-conv-algorithms 1\ndevice   \n", "line 2: empty device name"},
        {replace("forward", "sideways"), "line 3: unknown direction 'sideways'"},
        {replace("f32", "i64"), "line 3: unknown dtype 'i64'"},
        {replace(" math=3", ""), "line 3: missing field 'math'"},
        {replace("math=3", "math=3 math=3"), "line 3: field 'math' given twice"},
        {replace("math=3", "color=3"), "line 3: unknown field 'color=3'"},
        {replace("math=3", "math"), "line 3: unknown field 'math'"},
        {replace("x=8,3,32,32", "x=8,3,32"), "field 'x' needs 4 comma-separated values"},
        {replace("x=8,3,32,32", "x=8,3,32,32,1"), "field 'x' needs 4"},
        {replace("x=8,3,32,32", "x=8,3,32,32,"), "field 'x' needs 4"},
        {replace("x=8,3,32,32", "x=8,3,,32"), "field 'x' needs non-negative integers"},
        {replace("x=8,3,32,32", "x=8,-3,32,32"), "field 'x' needs non-negative integers"},
        {replace("x=8,3,32,32", "x=8,3,3e1,32"), "field 'x' needs non-negative integers"},
        {replace("x=8,3,32,32", "x=2147483648,3,32,32"), "holds 2147483648, above 2^31 - 1"},
        {replace("x=8,3,32,32", "x=99999999999,3,32,32"), "needs non-negative integers"},
        {replace("x=8,3,32,32", "x=0,3,32,32"), "sizes must be at least 1"},
        {replace("stride=1,1", "stride=0,1"), "stride, dilation and groups must be at least 1"},
        {replace("groups=1", "groups=2"), "x, w and groups do not fit"},
        {replace("w=16,3,3,3", "w=16,1,3,3"), "x, w and groups do not fit"},
        {algo_text("forward f32 x=8,3,2,32 w=16,3,3,3 stride=1,1 padding=0,0 dilation=1,1 "
                   "groups=1 deterministic=0 benchmark=1 algo=1 math=3"),
         "the padded input is smaller than the dilated kernel"},
        {replace("deterministic=0", "deterministic=2"), "must be 0 or 1"},
        {replace("algo=1", "channels_last=2 algo=1"), "must be 0 or 1"},
        {replace("algo=1", "algo=64"), "is not a cuDNN value"},
        {replace("math=3", "math=4"), "is not a cuDNN value"},
        {algo_text(e) + e + "\n", "line 4: a second entry for one convolution"},
    };
    for (const auto& [text, want] : bad) {
        INFO("text:\n" << text);
        REQUIRE_THROWS_WITH_MSG(kernels::parse_conv_algorithms(text, "algos.txt"), want);
        REQUIRE_THROWS_WITH_MSG(kernels::parse_conv_algorithms(text, "algos.txt"),
                                "conv algorithm file 'algos.txt'");
    }
    // The same entry under two devices is two entries, not a duplicate.
    CHECK(kernels::parse_conv_algorithms(algo_text(e) + "device NVIDIA H100\n" + e + "\n", "m")
              .size() == 2);
}

TEST_CASE("conv algorithm cache: keys that differ anywhere are different entries",
          "[conv][algos]") {
    kernels::ConvAlgoCache cache;
    const ConvAlgoKey base = sample_key();
    CHECK(!cache.find(base));
    cache.put(base, {1, 3, 100});
    REQUIRE(cache.find(base));
    CHECK(*cache.find(base) == ConvAlgoChoice{1, 3, 100});
    // One change at a time, each its own entry.
    std::vector<ConvAlgoKey> others;
    auto vary = [&](auto change) {
        ConvAlgoKey k = base;
        change(k);
        others.push_back(k);
    };
    vary([](ConvAlgoKey& k) { k.direction = ConvDirection::backward_data; });
    vary([](ConvAlgoKey& k) { k.dtype = DType::f16; });
    for (int64_t ConvAlgoKey::*f : {&ConvAlgoKey::n, &ConvAlgoKey::c, &ConvAlgoKey::h,
                                    &ConvAlgoKey::w, &ConvAlgoKey::o, &ConvAlgoKey::kh,
                                    &ConvAlgoKey::kw, &ConvAlgoKey::sh, &ConvAlgoKey::sw,
                                    &ConvAlgoKey::ph, &ConvAlgoKey::pw, &ConvAlgoKey::dh,
                                    &ConvAlgoKey::dw, &ConvAlgoKey::groups})
        vary([f](ConvAlgoKey& k) { k.*f += 1; });
    vary([](ConvAlgoKey& k) { k.deterministic = true; });
    vary([](ConvAlgoKey& k) { k.benchmark = false; });
    for (size_t i = 0; i < others.size(); ++i) {
        INFO("variation " << i);
        CHECK(!(others[i] == base));
        CHECK(!cache.find(others[i]));
        cache.put(others[i], {int(i), 0, 0});
    }
    CHECK(cache.size() == others.size() + 1);
    CHECK(*cache.find(base) == ConvAlgoChoice{1, 3, 100});  // untouched by the others
    cache.put(base, {2, 0, 8});                              // a new choice replaces the old
    CHECK(*cache.find(base) == ConvAlgoChoice{2, 0, 8});
    cache.erase(base);
    CHECK(!cache.find(base));
    CHECK(cache.entries().size() == others.size());
    cache.clear();
    CHECK(cache.size() == 0);
    // The key takes every field of the shape.
    const kernels::Conv2dShape s{2, 4, 9, 8, 6, 3, 2, 2, 3, 1, 0, 1, 2, 2, 4, 2};
    const ConvAlgoKey k = kernels::conv_algo_key(ConvDirection::backward_filter, DType::bf16, s,
                                                 true, false);
    CHECK((k.n == 2 && k.c == 4 && k.h == 9 && k.w == 8 && k.o == 6 && k.kh == 3 && k.kw == 2));
    CHECK((k.sh == 2 && k.sw == 3 && k.ph == 1 && k.pw == 0 && k.dh == 1 && k.dw == 2));
    CHECK((k.groups == 2 && k.deterministic && !k.benchmark && k.dtype == DType::bf16));
    CHECK(k.direction == ConvDirection::backward_filter);
}

TEST_CASE("cudnn switches, and saving and loading the algorithm file", "[conv][algos]") {
    CHECK(cudnn_benchmark());       // the defaults
    CHECK(!cudnn_deterministic());
    set_cudnn_benchmark(false);
    set_cudnn_deterministic(true);
    CHECK((!cudnn_benchmark() && cudnn_deterministic()));
    set_cudnn_benchmark(true);
    set_cudnn_deterministic(false);

    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("ember-conv-algos-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "algos.txt").string();
    // No conv has run on a GPU in this binary: an empty, valid file.
    CHECK(save_conv_algorithms(path) == 0);
    {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        CHECK(ss.str() == "ember-conv-algorithms 1\n");
        CHECK(kernels::parse_conv_algorithms(ss.str(), path).empty());
    }
    CHECK(load_conv_algorithms(path) == 0);
    // Entries of a GPU this machine does not have are read and skipped.
    {
        std::ofstream out(path);
        out << "ember-conv-algorithms 1\ndevice No Such GPU 9000\n" << kEntry << "\n";
    }
    CHECK(load_conv_algorithms(path) == 0);
    {
        std::ofstream out(path);
        out << "ember-conv-algorithms 1\ndevice X\n" << kEntry << " extra=1\n";
    }
    REQUIRE_THROWS_WITH_MSG(load_conv_algorithms(path), "line 3: unknown field 'extra=1'");
    REQUIRE_THROWS_WITH_MSG(load_conv_algorithms(path), path);
    REQUIRE_THROWS_WITH_MSG(load_conv_algorithms((dir / "missing.txt").string()),
                            "load_conv_algorithms: cannot open");
    std::filesystem::remove_all(dir);
}

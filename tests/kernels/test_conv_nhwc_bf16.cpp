// Channels-last bf16 convolution (kernels/cpu/conv_nhwc_bf16.cpp): forward,
// grad_input and grad_weight against naive f64 loops over the same bf16
// values, within the bound of f32 sums of the accumulation length rounded
// once to bf16; the VDPBF16PS tiles and their f32 emulation bit-identical;
// 1, 2 and 3 threads bit-identical; subnormal operands read as zero; an Inf
// the conv never reads at a tap kept out of that tap; the rule; and the
// fronts running bf16 channels-last operands on these kernels.
#include <omp.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "core/settings.h"
#include "kernels/conv.h"
#include "kernels/cpu/conv_nhwc_bf16.h"
#include "kernels/cpu/policy.h"
#include "support/conv_cases.h"

using namespace ember;
using namespace ember::kernels;
using namespace ember::test;
using Case = ConvCase;
using Bits = std::vector<uint16_t>;
namespace bf = ember::kernels::cpu::nhwc_bf16;

namespace {

Bits random_bf16(int64_t count, uint64_t seed) {
    const std::vector<float> f = random_floats(count, seed);
    Bits b(f.size());
    for (size_t e = 0; e < f.size(); ++e) b[e] = float_to_bf16_bits(f[e]);
    return b;
}
double value(uint16_t b) { return double(bf16_bits_to_float(b)); }

struct Outputs {
    Bits out, dx, dw;
};

// The kernels that fit, on `threads` threads and the given bf16 path, into
// NaN-poisoned buffers ([N, OH, OW, O], [N, H, W, C], [O, C, kH, kW]).
Outputs run(const Conv2dShape& s, const Bits& x, const Bits& w, const uint16_t* bias,
            const Bits& dy, int threads, CpuBf16 path) {
    using bf::Pass;
    const int saved = omp_get_max_threads();
    const CpuBf16 saved_path = cpu_bf16();
    omp_set_num_threads(threads);
    set_cpu_bf16(path);
    constexpr uint16_t nan = 0x7fc1;
    Outputs r{Bits(dy.size(), nan), Bits(x.size(), nan), Bits(w.size(), nan)};
    if (bf::fits(s, Pass::forward)) bf::forward(s, x.data(), w.data(), bias, r.out.data());
    if (bf::fits(s, Pass::grad_input)) bf::grad_input(s, dy.data(), w.data(), r.dx.data());
    if (bf::fits(s, Pass::grad_weight)) bf::grad_weight(s, dy.data(), x.data(), r.dw.data());
    omp_set_num_threads(saved);
    set_cpu_bf16(saved_path);
    return r;
}

// got within the bound of f32 sums of `length` exact products rounded once
// to bf16: 2^-8·|f32 sum| (the rounding: 8 significant bits) on top of (length + 1)·2^-24 of the
// terms' magnitudes (the sums).
void check_bf16(const Bits& got, const Ref& want, int64_t length, const char* what) {
    REQUIRE(got.size() == want.value.size());
    for (size_t e = 0; e < got.size(); ++e) {
        const double sums = double(length + 1) * 0x1p-24 * want.mag[e];
        const double bound = 0x1p-8 * (std::abs(want.value[e]) + sums) + sums + 1e-30;
        const double err = std::abs(value(got[e]) - want.value[e]);
        if (!(err <= bound)) {
            INFO(what << " element " << e << ": got " << value(got[e]) << ", want "
                      << want.value[e] << " (term magnitudes " << want.mag[e] << ")");
            REQUIRE(err <= bound);
        }
    }
}

void check_reference(const Conv2dShape& s, const Bits& x, const Bits& w, const uint16_t* bias,
                     const Bits& dy, const Outputs& got) {
    using bf::Pass;
    const auto [out, dx, dw] = nhwc_reference(s, x, w, bias, dy, [](uint16_t v) { return value(v); });
    const int64_t taps = s.kh * s.kw;
    if (bf::fits(s, Pass::forward)) check_bf16(got.out, out, s.c * taps, "forward");
    if (bf::fits(s, Pass::grad_input)) check_bf16(got.dx, dx, s.o * taps, "grad_input");
    if (bf::fits(s, Pass::grad_weight))
        check_bf16(got.dw, dw, s.n * s.oh * s.ow, "grad_weight");
}

bool same(const Bits& a, const Bits& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 2) == 0;
}

// The paths this CPU can run: the emulation, and VDPBF16PS where it has it.
std::vector<CpuBf16> paths() {
    if (cpu_has_avx512_bf16()) return {CpuBf16::emulated, CpuBf16::native};
    return {CpuBf16::emulated};
}

}  // namespace

TEST_CASE("bf16 channels-last conv2d matches the definition", "[conv][nhwc][bf16]") {
    if (!bf::fits(shape_of({1, 16, 4, 4, 16, 3, 3, 1, 1, 1, 1, 1, 1}), bf::Pass::forward)) {
        WARN("skipped: the bf16 convolutions need AVX-512F");
        return;
    }
    std::vector<Case> cases = channels_last_cases();
    // Odd output channels: grad_input's pairs of output channels.
    cases.push_back({1, 16, 5, 5, 17, 3, 3, 1, 1, 1, 1, 1, 1});
    uint64_t seed = 7100;
    for (const Case& k : cases) {
        const Conv2dShape s = shape_of(k);
        INFO(describe(k));
        REQUIRE(bf::fits(s, bf::Pass::forward) == (k.o % 16 == 0));
        REQUIRE(bf::fits(s, bf::Pass::grad_weight) == (k.o % 16 == 0));
        REQUIRE(bf::fits(s, bf::Pass::grad_input) == (k.c % 16 == 0));
        const Bits x = random_bf16(s.n * s.h * s.w * s.c, ++seed);
        const Bits w = random_bf16(s.o * s.c * s.kh * s.kw, ++seed);
        const Bits b = random_bf16(s.o, ++seed);
        const Bits dy = random_bf16(s.n * s.oh * s.ow * s.o, ++seed);
        for (const uint16_t* bias : {b.data(), static_cast<const uint16_t*>(nullptr)}) {
            INFO((bias ? "bias" : "no bias"));
            const Outputs one = run(s, x, w, bias, dy, 1, CpuBf16::emulated);
            check_reference(s, x, w, bias, dy, one);
            for (CpuBf16 path : paths())
                for (int threads : {1, 2, 3}) {
                    INFO(threads << " threads, " << (path == CpuBf16::native ? "native" : "emulated"));
                    const Outputs many = run(s, x, w, bias, dy, threads, path);
                    REQUIRE(same(many.out, one.out));
                    REQUIRE(same(many.dx, one.dx));
                    REQUIRE(same(many.dw, one.dw));
                }
        }
    }
}

TEST_CASE("bf16 channels-last conv2d reads subnormals as zero and keeps an unread Inf out",
          "[conv][nhwc][bf16]") {
    // 7-pixel rows at stride 2 with a 3-wide kernel: 3 outputs per row, and
    // column 6 is read by tap j = 2 only; one image (paired with zeros).
    const Conv2dShape s = shape_of({1, 16, 3, 7, 16, 1, 3, 1, 2, 0, 0, 1, 1});
    if (!bf::fits(s, bf::Pass::forward)) {
        WARN("skipped: the bf16 convolutions need AVX-512F");
        return;
    }
    REQUIRE(s.ow == 3);
    Bits x = random_bf16(s.h * s.w * s.c, 7201);
    const Bits w = random_bf16(s.o * s.c * s.kw, 7202);
    const Bits dy = random_bf16(s.oh * s.ow * s.o, 7203);
    for (CpuBf16 path : paths()) {
        INFO((path == CpuBf16::native ? "native" : "emulated"));
        // A subnormal operand gives the result of a zero there.
        Bits sub = x, zero = x;
        sub[5] = 0x0003;
        zero[5] = 0x0000;
        REQUIRE(same(run(s, sub, w, nullptr, dy, 1, path).out,
                     run(s, zero, w, nullptr, dy, 1, path).out));
        REQUIRE(same(run(s, sub, w, nullptr, dy, 1, path).dw,
                     run(s, zero, w, nullptr, dy, 1, path).dw));
        // +Inf at column 6, channel 0 of every row: only tap j = 2's gradient sees it.
        Bits inf = x;
        for (int64_t y = 0; y < s.h; ++y) inf[size_t((y * s.w + 6) * s.c)] = 0x7f80;
        const Bits dw = run(s, inf, w, nullptr, dy, 1, path).dw;
        for (int64_t o = 0; o < s.o; ++o)
            for (int64_t j = 0; j < s.kw; ++j) {
                const double g = value(dw[size_t((o * s.c + 0) * s.kw + j)]);
                INFO("o " << o << " j " << j << ": " << g);
                REQUIRE(std::isfinite(g) == (j != 2));
            }
    }
}

TEST_CASE("bf16 channels-last conv2d's rule", "[conv][nhwc][bf16]") {
    using bf::Pass;
    const Conv2dShape base = shape_of({2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1});
    if (!bf::fits(base, Pass::forward)) {
        WARN("skipped: the bf16 convolutions need AVX-512F");
        return;
    }
    for (Pass p : {Pass::forward, Pass::grad_input, Pass::grad_weight}) REQUIRE(bf::fits(base, p));
    Conv2dShape s = base;
    s.o = 24;
    REQUIRE_FALSE(bf::fits(s, Pass::forward));
    REQUIRE_FALSE(bf::fits(s, Pass::grad_weight));
    REQUIRE(bf::fits(s, Pass::grad_input));
    s = base;
    s.groups = 2;
    for (Pass p : {Pass::forward, Pass::grad_input, Pass::grad_weight}) REQUIRE_FALSE(bf::fits(s, p));
    s = base;
    s.c = 80;
    REQUIRE_FALSE(bf::fits(s, Pass::forward));
    // The plan: bf16 on these kernels, from an NCHW input too (converted);
    // a shape they do not take and f16 through f32.
    for (bool last : {true, false}) {
        REQUIRE(cpu::conv2d_plan(base, DType::bf16, last).compute == DType::bf16);
        REQUIRE(cpu::conv2d_plan(base, DType::bf16, last).channels_last);
        REQUIRE(cpu::conv2d_backward_plan(base, DType::bf16, last, true, true).compute ==
                DType::bf16);
    }
    s = base;
    s.o = 24;
    REQUIRE(cpu::conv2d_plan(s, DType::bf16, true).compute == DType::f32);
    REQUIRE_FALSE(cpu::conv2d_plan(s, DType::bf16, true).channels_last);
    REQUIRE(cpu::conv2d_plan(base, DType::f16, true).compute == DType::f32);
}

TEST_CASE("conv2d and conv2d_backward of bf16 operands, channels-last and NCHW", "[conv][nhwc][bf16]") {
    uint64_t seed = 7300;
    for (const ConvFront& f : channels_last_fronts()) {
        INFO(shape_str(f.x) << " * " << shape_str(f.w));
        const Tensor x = test::random_tensor(f.x, DType::bf16, ++seed);
        const Tensor w = test::random_tensor(f.w, DType::bf16, ++seed);
        const Tensor b = test::random_tensor({f.w[0]}, DType::bf16, ++seed);
        const Tensor cl = x.contiguous(MemoryFormat::channels_last);
        // The f32 conv of the same values, rounded once: what bf16 should give.
        const Tensor want = kernels::conv2d(x.to(DType::f32), w.to(DType::f32), b.to(DType::f32),
                                            f.stride, f.padding);
        const Tensor got = kernels::conv2d(cl, w, b, f.stride, f.padding);
        REQUIRE(got.dtype() == DType::bf16);
        REQUIRE(got.is_contiguous(MemoryFormat::channels_last));
        test::check_close(got.to(DType::f32), want, 1e-2, 1e-2);
        // An NCHW input: the same kernels (or f32 where they do not fit), an NCHW result.
        const Tensor nchw = kernels::conv2d(x, w, b, f.stride, f.padding);
        REQUIRE(nchw.dtype() == DType::bf16);
        REQUIRE(nchw.is_contiguous());
        test::check_close(nchw.to(DType::f32), want, 1e-2, 1e-2);

        const Tensor dy = test::random_tensor(want.shape(), DType::bf16, ++seed);
        const Conv2dGrads g32 =
            kernels::conv2d_backward(dy.to(DType::f32), x.to(DType::f32), w.to(DType::f32),
                                     f.stride, f.padding, {1, 1}, 1, {true, true, true});
        const Conv2dGrads g = kernels::conv2d_backward(
            dy.contiguous(MemoryFormat::channels_last), cl, w, f.stride, f.padding, {1, 1}, 1,
            {true, true, true});
        REQUIRE(g.input.dtype() == DType::bf16);
        REQUIRE(g.input.is_contiguous(MemoryFormat::channels_last));
        test::check_close(g.input.to(DType::f32), g32.input, 1e-2, 1e-2);
        test::check_close(g.weight.to(DType::f32), g32.weight, 1e-2, 1e-2);
        test::check_close(g.bias.to(DType::f32), g32.bias, 1e-2, 1e-2);
        const Conv2dGrads gn = kernels::conv2d_backward(dy, x, w, f.stride, f.padding, {1, 1}, 1,
                                                        {true, true, true});
        REQUIRE(gn.input.is_contiguous());
        test::check_close(gn.input.to(DType::f32), g32.input, 1e-2, 1e-2);
        test::check_close(gn.weight.to(DType::f32), g32.weight, 1e-2, 1e-2);
        test::check_close(gn.bias.to(DType::f32), g32.bias, 1e-2, 1e-2);
    }
}

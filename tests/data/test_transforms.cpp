// Transforms against naive references: the crop cut from an explicitly padded
// f64 image at the offsets the documented Philox words give, the flip by its
// word, Normalize per channel, a Compose chain drawing words in order, the
// statistics helper against two-pass f64 sums, and every argument error.
#include <cmath>

#include "core/philox.h"
#include "data/random.h"
#include "data/transforms.h"
#include "support/data_support.h"

using namespace ember;
using namespace ember::test;
using namespace ember::data;

namespace {

// Word k of the augmentation stream of (seed, epoch, pos), as docs/data.md states it.
uint32_t aug_word(uint64_t seed, uint64_t epoch, uint64_t pos, uint64_t k) {
    return philox_block(seed, pos * 256 + k / 4, kAugmentStream | epoch).x[k % 4];
}

int64_t below(uint32_t w, int64_t n) { return int64_t((uint64_t(w) * uint64_t(n)) >> 32); }

// Crop of x [..., H, W] padded by p with `fill` at padded offset (oy, ox).
std::vector<double> ref_crop(const Tensor& x, int64_t p, int64_t h, int64_t w, int64_t oy,
                             int64_t ox, double fill) {
    const int64_t H = x.size(-2), W = x.size(-1), C = x.numel() / (H * W);
    const std::vector<double> v = values(x);
    const int64_t PH = H + 2 * p, PW = W + 2 * p;
    std::vector<double> padded(size_t(C * PH * PW), fill);
    for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < H; ++y)
            for (int64_t xx = 0; xx < W; ++xx)
                padded[size_t((c * PH + y + p) * PW + xx + p)] = v[size_t((c * H + y) * W + xx)];
    std::vector<double> out;
    for (int64_t c = 0; c < C; ++c)
        for (int64_t y = 0; y < h; ++y)
            for (int64_t xx = 0; xx < w; ++xx)
                out.push_back(padded[size_t((c * PH + oy + y) * PW + ox + xx)]);
    return out;
}

std::vector<double> ref_flip(const std::vector<double>& v, int64_t W) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const int64_t r = int64_t(i) / W, x = int64_t(i) % W;
        out[i] = v[size_t(r * W + W - 1 - x)];
    }
    return out;
}

}  // namespace

TEST_CASE("SampleRng: the words of the augmentation stream, 1024 per sample",
          "[data][transforms]") {
    SampleRng rng = augment_rng(7, 3, 11);
    for (uint64_t k = 0; k < 1024; ++k) REQUIRE(rng.next_u32() == aug_word(7, 3, 11, k));
    REQUIRE_THROWS_WITH_MSG(rng.next_u32(), "drew more than 1024 random words");
    SampleRng r2 = augment_rng(7, 3, 12);
    CHECK(r2.below(10) == below(aug_word(7, 3, 12, 0), 10));
    CHECK(r2.uniform() == float(aug_word(7, 3, 12, 1) >> 8) / 16777216.0f);
}

TEST_CASE("RandomCrop: the window at the drawn offsets of the padded image", "[data][transforms]") {
    struct Case {
        Shape in;
        int64_t h, w, pad;
        double fill;
    };
    const Case cases[] = {
        {{1, 28, 28}, 28, 28, 4, 0.0},  // the resnet8 augmentation
        {{3, 5, 7}, 4, 6, 2, -1.5},     // non-square, crop smaller than the image
        {{5, 6}, 5, 6, 0, 0.0},         // [H, W] without a channel dim, no padding
        {{2, 2, 3, 3}, 9, 9, 5, 2.0},   // leading dims as channels, padding past the image
        {{1, 1, 1}, 1, 1, 1, 0.5},      // size-1 image
    };
    for (const Case& c : cases) {
        INFO("input " << shape_str(c.in) << " crop " << c.h << "x" << c.w << " pad " << c.pad);
        const RandomCrop crop({c.h, c.w}, c.pad, c.fill);
        Shape out_shape = c.in;
        out_shape[out_shape.size() - 2] = c.h;
        out_shape.back() = c.w;
        REQUIRE(crop.output_shape(c.in) == out_shape);
        const Tensor x = random_tensor(c.in, DType::f32, 31);
        const int64_t H = c.in[c.in.size() - 2], W = c.in.back();
        for (uint64_t pos = 0; pos < 40; ++pos) {
            Tensor out = full(out_shape, 1e30);  // poisoned: every element must be written
            SampleRng rng = augment_rng(5, 1, pos);
            crop.apply(x.data<float>(), c.in, out.data<float>(), rng);
            const int64_t oy = below(aug_word(5, 1, pos, 0), H + 2 * c.pad - c.h + 1);
            const int64_t ox = below(aug_word(5, 1, pos, 1), W + 2 * c.pad - c.w + 1);
            check_close(out, ref_crop(x, c.pad, c.h, c.w, oy, ox, c.fill), 0, 0);
            CHECK(rng.next_u32() == aug_word(5, 1, pos, 2));  // exactly two words drawn
        }
    }
    REQUIRE_THROWS_WITH_MSG(RandomCrop(30).output_shape({1, 28, 28}),
                            "RandomCrop: a 30x30 window does not fit a 28x28 image padded by 0");
    REQUIRE_THROWS_WITH_MSG(RandomCrop(3).output_shape({5}),
                            "RandomCrop: expects images [..., H, W], got a sample of shape [5]");
    REQUIRE_THROWS_WITH_MSG(RandomCrop(0), "size 0x0 must be in [1, 2^30] and padding 0");
    REQUIRE_THROWS_WITH_MSG(RandomCrop({2, 3}, -1), "padding -1 in [0, 2^30]");
}

TEST_CASE("RandomHorizontalFlip: mirrors when its word says so", "[data][transforms]") {
    const Shape shape{2, 3, 5};
    const Tensor x = random_tensor(shape, DType::f32, 41);
    const std::vector<double> v = values(x);
    for (double p : {0.0, 0.3, 0.5, 1.0}) {
        const RandomHorizontalFlip flip(p);
        int flipped = 0;
        for (uint64_t pos = 0; pos < 64; ++pos) {
            Tensor out = full(shape, 1e30);
            SampleRng rng = augment_rng(2, 0, pos);
            flip.apply(x.data<float>(), shape, out.data<float>(), rng);
            const bool want = double(aug_word(2, 0, pos, 0) >> 8) / 16777216.0 < p;
            flipped += want;
            check_close(out, want ? ref_flip(v, 5) : v, 0, 0);
        }
        if (p == 0) CHECK(flipped == 0);
        if (p == 1) CHECK(flipped == 64);
        if (p == 0.5) CHECK((flipped > 16 && flipped < 48));
    }
    REQUIRE_THROWS_WITH_MSG(RandomHorizontalFlip(1.5), "p must be in [0, 1], got 1.5");
    REQUIRE_THROWS_WITH_MSG(RandomHorizontalFlip().output_shape({4}),
                            "RandomHorizontalFlip: expects images");
}

TEST_CASE("Normalize: per channel and shared statistics", "[data][transforms]") {
    const Shape shape{3, 4, 5};
    const Tensor x = random_tensor(shape, DType::f32, 51);
    const std::vector<double> v = values(x);
    const std::vector<double> mean = {0.1, -0.2, 0.3}, sd = {0.5, 2.0, 0.25};
    SampleRng rng = augment_rng(0, 0, 0);
    Tensor out = full(shape, 1e30);
    Normalize(mean, sd).apply(x.data<float>(), shape, out.data<float>(), rng);
    std::vector<double> want;
    for (size_t i = 0; i < v.size(); ++i) want.push_back((v[i] - mean[i / 20]) / sd[i / 20]);
    check_close(out, want, 1e-6, 1e-6);
    Normalize({0.5}, {0.25}).apply(x.data<float>(), shape, out.data<float>(), rng);
    want.clear();
    for (double e : v) want.push_back((e - 0.5) / 0.25);
    check_close(out, want, 1e-6, 1e-6);
    CHECK(rng.next_u32() == aug_word(0, 0, 0, 0));  // Normalize draws nothing
    REQUIRE_THROWS_WITH_MSG(Normalize({0.1, 0.2}, {1.0}),
                            "Normalize: 2 means and 1 standard deviations");
    REQUIRE_THROWS_WITH_MSG(Normalize({0.1}, {0.0}),
                            "channel 0 has mean 0.1 and std 0 (std must be > 0, both finite)");
    REQUIRE_THROWS_WITH_MSG(Normalize({NAN}, {1.0}), "both finite");
    REQUIRE_THROWS_WITH_MSG(
        Normalize({0, 0}, {1, 1}).output_shape(shape),
        "Normalize: 2 channel statistics for a sample of shape [3, 4, 5] (dim 0 has 3 channels)");
}

TEST_CASE("Compose: transforms in order, words drawn in order", "[data][transforms]") {
    const Compose chain{RandomCrop({6, 6}, 2), RandomHorizontalFlip(), Normalize({0.5}, {0.25})};
    CHECK(chain.size() == 3);
    CHECK(chain.describe() ==
          "RandomCrop(6x6, padding 2) -> RandomHorizontalFlip(p 0.5) -> Normalize(mean 0.5, std "
          "0.25)");
    const Shape shape{2, 8, 7};
    CHECK(chain.output_shape(shape) == Shape{2, 6, 6});
    const std::vector<Shape> plan = chain.plan(shape);
    REQUIRE(plan.size() == 4);
    CHECK(Compose::scratch_numel(plan) == 2 * 8 * 7);
    const Tensor x = random_tensor(shape, DType::f32, 61);
    for (uint64_t pos = 0; pos < 20; ++pos) {
        const Tensor out = chain(x, 9, 4, pos);
        const int64_t oy = below(aug_word(9, 4, pos, 0), 8 + 4 - 6 + 1);
        const int64_t ox = below(aug_word(9, 4, pos, 1), 7 + 4 - 6 + 1);
        std::vector<double> want = ref_crop(x, 2, 6, 6, oy, ox, 0.0);
        if (double(aug_word(9, 4, pos, 2) >> 8) / 16777216.0 < 0.5) want = ref_flip(want, 6);
        for (double& e : want) e = (e - 0.5) / 0.25;
        check_close(out, want, 1e-6, 1e-6);
    }
    // A non-contiguous sample is read through its strides.
    check_close(chain(non_contiguous(x), 9, 4, 3), chain(x, 9, 4, 3), 0, 0);
    // No transforms: a copy.
    check_close(Compose{}(x), x, 0, 0);
    CHECK(Compose{}.describe() == "none");
    Compose grown;
    grown.add(RandomCrop(9)).add(std::make_shared<RandomHorizontalFlip>(1.0));
    REQUIRE_THROWS_WITH_MSG(grown.output_shape(shape),
                            "RandomCrop: a 9x9 window does not fit a 8x7 image");
    REQUIRE_THROWS_WITH_MSG(chain(x.to(DType::f64)), "Compose: expects an f32 host sample");
}

TEST_CASE("compute_mean_std: per channel, accurate with a large offset", "[data][transforms]") {
    const Tensor x = random_tensor({20, 3, 4, 4}, DType::f32, 71, 1000.0, 1000.5);
    TensorDataset ds(x, zeros({20}, {DType::i64}));
    for (int64_t n : {int64_t(-1), int64_t(5)}) {
        const ChannelStats st = compute_mean_std(ds, n);
        const int64_t used = n < 0 ? 20 : n;
        const std::vector<double> v = values(x.narrow(0, 0, used));
        REQUIRE(st.mean.size() == 3);
        for (int64_t c = 0; c < 3; ++c) {
            double s = 0, q = 0, cnt = 0;
            for (size_t i = 0; i < v.size(); ++i)
                if (int64_t(i / 16) % 3 == c) s += v[i], cnt += 1;
            const double m = s / cnt;
            for (size_t i = 0; i < v.size(); ++i)
                if (int64_t(i / 16) % 3 == c) q += (v[i] - m) * (v[i] - m);
            CHECK(st.mean[size_t(c)] == Approx(m).epsilon(1e-12));
            CHECK(st.std[size_t(c)] == Approx(std::sqrt(q / cnt)).epsilon(1e-9));
        }
    }
    TensorDataset none(zeros({0, 2}), zeros({0}, {DType::i64}));
    REQUIRE_THROWS_WITH_MSG(compute_mean_std(none),
                            "compute_mean_std: no values (0 samples of shape [2])");
    // Normalize built from the statistics maps the data to mean 0, std 1.
    const Normalize norm(compute_mean_std(ds));
    CHECK_THAT(norm.describe(), Catch::Matchers::StartsWith("Normalize(mean 1000.2"));
}

TEST_CASE("compute_mean_std: Fashion-MNIST's test images", "[data][transforms][fashion]") {
    const auto ds = fashion_test();
    const ChannelStats st = compute_mean_std(*ds);
    const std::vector<uint8_t> px = ds->inputs().flatten().to_vector<uint8_t>();
    double s = 0, q = 0;
    for (uint8_t p : px) s += p / 255.0;
    const double m = s / double(px.size());
    for (uint8_t p : px) q += (p / 255.0 - m) * (p / 255.0 - m);
    // The dataset hands out f32 pixels (p * float(1/255)): agreement to f32 precision.
    CHECK(st.mean[0] == Approx(m).epsilon(1e-6));
    CHECK(st.std[0] == Approx(std::sqrt(q / double(px.size()))).epsilon(1e-6));
    CHECK(st.mean[0] == Approx(0.286).margin(0.002));  // the published figure, roughly
}

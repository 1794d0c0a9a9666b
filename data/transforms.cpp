// The transforms' loops (plain, per sample: the loader runs one sample per
// worker at a time) and the dataset statistics helper.
#include "data/transforms.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "data/dataset.h"

namespace ember::data {

namespace {

// Channels (product of leading dims), height and width of an image sample.
struct Chw {
    int64_t c, h, w;
};

Chw image_dims(const Shape& in, const char* op) {
    EMBER_CHECK(in.size() >= 2, op, ": expects images [..., H, W], got a sample of shape ",
                shape_str(in));
    const int64_t h = in[in.size() - 2], w = in.back();
    return {h * w == 0 ? 0 : shape_numel(in) / (h * w), h, w};
}

std::string num(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

}  // namespace

// ---- Normalize -----------------------------------------------------------------------

Normalize::Normalize(std::vector<double> mean, std::vector<double> std) {
    EMBER_CHECK(!mean.empty() && mean.size() == std.size(), "Normalize: ", mean.size(),
                " means and ", std.size(), " standard deviations (need one of each per channel)");
    for (size_t c = 0; c < mean.size(); ++c) {
        EMBER_CHECK(std::isfinite(mean[c]) && std::isfinite(std[c]) && std[c] > 0,
                    "Normalize: channel ", c, " has mean ", mean[c], " and std ", std[c],
                    " (std must be > 0, both finite)");
        mean_.push_back(float(mean[c]));
        inv_std_.push_back(float(1.0 / std[c]));
    }
}

Shape Normalize::output_shape(const Shape& in) const {
    const int64_t channels = in.empty() ? 1 : in[0];
    EMBER_CHECK(mean_.size() == 1 || int64_t(mean_.size()) == channels, "Normalize: ", mean_.size(),
                " channel statistics for a sample of shape ", shape_str(in), " (dim 0 has ",
                channels, " channels)");
    return in;
}

void Normalize::apply(const float* in, const Shape& in_shape, float* out, SampleRng&) const {
    const int64_t numel = shape_numel(in_shape);
    const int64_t channels = in_shape.empty() ? 1 : in_shape[0];
    const int64_t plane = channels == 0 ? 0 : numel / channels;
    for (int64_t c = 0; c < channels; ++c) {
        const size_t k = mean_.size() == 1 ? 0 : size_t(c);
        const float m = mean_[k], s = inv_std_[k];
        for (int64_t j = c * plane; j < (c + 1) * plane; ++j) out[j] = (in[j] - m) * s;
    }
}

std::string Normalize::describe() const {
    std::string s = "Normalize(mean";
    for (float m : mean_) s.append(" ").append(num(m));
    s += ", std";
    for (float is : inv_std_) s.append(" ").append(num(1.0 / is));
    return s + ")";
}

// ---- RandomCrop ----------------------------------------------------------------------

RandomCrop::RandomCrop(std::array<int64_t, 2> size, int64_t padding, double fill)
    : height_(size[0]), width_(size[1]), padding_(padding), fill_(float(fill)) {
    EMBER_CHECK(height_ >= 1 && width_ >= 1 && height_ <= (int64_t(1) << 30) &&
                    width_ <= (int64_t(1) << 30) && padding >= 0 && padding <= (int64_t(1) << 30),
                "RandomCrop: size ", height_, "x", width_, " must be in [1, 2^30] and padding ",
                padding, " in [0, 2^30]");
}

Shape RandomCrop::output_shape(const Shape& in) const {
    const Chw d = image_dims(in, "RandomCrop");
    EMBER_CHECK(d.h + 2 * padding_ >= height_ && d.w + 2 * padding_ >= width_, "RandomCrop: a ",
                height_, "x", width_, " window does not fit a ", d.h, "x", d.w, " image padded by ",
                padding_);
    EMBER_CHECK(d.h + 2 * padding_ - height_ < (int64_t(1) << 32) &&
                    d.w + 2 * padding_ - width_ < (int64_t(1) << 32),
                "RandomCrop: more than 2^32 offsets");
    Shape out = in;
    out[out.size() - 2] = height_;
    out.back() = width_;
    return out;
}

void RandomCrop::apply(const float* in, const Shape& in_shape, float* out, SampleRng& rng) const {
    const Chw d = image_dims(in_shape, "RandomCrop");
    // Window origin in padded coordinates, then shifted back into the image's.
    const int64_t oy = rng.below(d.h + 2 * padding_ - height_ + 1) - padding_;
    const int64_t ox = rng.below(d.w + 2 * padding_ - width_ + 1) - padding_;
    // Columns x of the output read input column ox + x when inside [0, W).
    const int64_t x0 = std::clamp<int64_t>(-ox, 0, width_);
    const int64_t x1 = std::clamp<int64_t>(d.w - ox, x0, width_);
    for (int64_t c = 0; c < d.c; ++c)
        for (int64_t y = 0; y < height_; ++y) {
            float* o = out + (c * height_ + y) * width_;
            const int64_t iy = oy + y;
            if (iy < 0 || iy >= d.h) {
                std::fill(o, o + width_, fill_);
                continue;
            }
            const float* row = in + (c * d.h + iy) * d.w;
            std::fill(o, o + x0, fill_);
            if (x1 > x0) std::memcpy(o + x0, row + ox + x0, size_t(x1 - x0) * sizeof(float));
            std::fill(o + x1, o + width_, fill_);
        }
}

std::string RandomCrop::describe() const {
    return str("RandomCrop(", height_, "x", width_, ", padding ", padding_, ")");
}

// ---- RandomHorizontalFlip -------------------------------------------------------------

RandomHorizontalFlip::RandomHorizontalFlip(double p) : p_(p) {
    EMBER_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
}

Shape RandomHorizontalFlip::output_shape(const Shape& in) const {
    image_dims(in, "RandomHorizontalFlip");
    return in;
}

void RandomHorizontalFlip::apply(const float* in, const Shape& in_shape, float* out,
                                 SampleRng& rng) const {
    const Chw d = image_dims(in_shape, "RandomHorizontalFlip");
    const bool flip = double(rng.uniform()) < p_;
    const int64_t rows = d.c * d.h;
    if (!flip) {
        std::memcpy(out, in, size_t(rows * d.w) * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t x = 0; x < d.w; ++x) out[r * d.w + x] = in[r * d.w + d.w - 1 - x];
}

std::string RandomHorizontalFlip::describe() const {
    return str("RandomHorizontalFlip(p ", num(p_), ")");
}

// ---- Compose -------------------------------------------------------------------------

std::vector<Shape> Compose::plan(const Shape& in) const {
    std::vector<Shape> shapes{in};
    for (const Entry& t : list_) shapes.push_back((*t).output_shape(shapes.back()));
    return shapes;
}

int64_t Compose::scratch_numel(const std::vector<Shape>& plan) {
    int64_t most = 0;
    for (const Shape& s : plan) most = std::max(most, shape_numel(s));
    return most;
}

void Compose::apply(const float* in, const std::vector<Shape>& plan, float* out, SampleRng& rng,
                    float* scratch_a, float* scratch_b) const {
    EMBER_INTERNAL_ASSERT(plan.size() == list_.size() + 1);
    if (list_.empty()) {
        std::memcpy(out, in, size_t(shape_numel(plan[0])) * sizeof(float));
        return;
    }
    const float* src = in;
    for (size_t k = 0; k < list_.size(); ++k) {
        float* dst = k + 1 == list_.size() ? out : (k % 2 == 0 ? scratch_a : scratch_b);
        (*list_[k]).apply(src, plan[k], dst, rng);
        src = dst;
    }
}

Tensor Compose::operator()(const Tensor& sample, uint64_t seed, uint64_t epoch,
                           uint64_t pos) const {
    EMBER_CHECK(sample.defined() && sample.dtype() == DType::f32 && sample.device().is_cpu(),
                "Compose: expects an f32 host sample");
    const Tensor in = sample.contiguous();
    const std::vector<Shape> shapes = plan(in.shape());
    const int64_t n = scratch_numel(shapes);
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    Tensor out = ember::empty(shapes.back());
    SampleRng rng = augment_rng(seed, epoch, pos);
    apply(in.data<float>(), shapes, out.data<float>(), rng, a.data(), b.data());
    return out;
}

std::string Compose::describe() const {
    std::string s;
    for (const Entry& t : list_) s.append(s.empty() ? "" : " -> ").append((*t).describe());
    return s.empty() ? "none" : s;
}

// ---- Statistics ----------------------------------------------------------------------

ChannelStats compute_mean_std(const Dataset& dataset, int64_t max_samples) {
    const int64_t n = max_samples < 0 ? dataset.size() : std::min(max_samples, dataset.size());
    const Shape shape = dataset.sample_shape();
    const int64_t numel = shape_numel(shape), channels = shape.empty() ? 1 : shape[0];
    EMBER_CHECK(n > 0 && numel > 0, "compute_mean_std: no values (", n, " samples of shape ",
                shape_str(shape), ")");
    const int64_t plane = numel / channels;
    // Sums of (x - shift) and its square, with the shift taken from sample 0:
    // keeps the variance accurate when the mean is large next to the spread.
    const size_t nc = static_cast<size_t>(channels);
    std::vector<double> shift(nc), sum(nc), sq(nc);
    std::vector<float> buf(static_cast<size_t>(numel));
    for (int64_t i = 0; i < n; ++i) {
        dataset.read(i, buf.data());
        for (int64_t c = 0; c < channels; ++c) {
            if (i == 0) shift[c] = buf[size_t(c * plane)];
            double s = 0, q = 0;
            for (int64_t j = c * plane; j < (c + 1) * plane; ++j) {
                const double v = double(buf[size_t(j)]) - shift[c];
                s += v;
                q += v * v;
            }
            sum[c] += s;
            sq[c] += q;
        }
    }
    ChannelStats st;
    const double count = double(n) * double(plane);
    for (int64_t c = 0; c < channels; ++c) {
        const double m = sum[c] / count;
        st.mean.push_back(shift[c] + m);
        st.std.push_back(std::sqrt(std::max(sq[c] / count - m * m, 0.0)));
    }
    return st;
}

}  // namespace ember::data

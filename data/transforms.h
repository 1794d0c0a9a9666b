// Per-sample transforms the loader's workers apply between reading a sample
// and writing it into the batch: Normalize (docs/tips.md #21), RandomCrop with
// padding and RandomHorizontalFlip, chained by Compose. Random transforms draw
// from the sample's own Philox stream (data/random.h), so augmentation is
// reproducible and independent of the number of workers.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/tensor.h"
#include "random.h"

namespace ember::data {

class Dataset;

/// A transform of one contiguous f32 sample. Image transforms read the last
/// two dims as height and width and every leading dim as channels.
class Transform {
  public:
    virtual ~Transform() = default;
    /// Output shape for an input of shape `in`; throws if the input does not fit.
    virtual Shape output_shape(const Shape& in) const = 0;
    /// Writes the transform of `in` (shape in_shape) to `out`
    /// (output_shape(in_shape)); in and out never overlap. A random transform
    /// draws the same number of words from `rng` whatever the data.
    virtual void apply(const float* in, const Shape& in_shape, float* out,
                       SampleRng& rng) const = 0;
    /// "RandomCrop(28x28, padding 4)", for messages and reports.
    virtual std::string describe() const = 0;
};

/// Per-channel mean and (population) standard deviation of a dataset's inputs.
struct ChannelStats {
    std::vector<double> mean, std;
};

/// Statistics over the first `max_samples` samples (all when < 0), per
/// channel (dim 0 of the sample), in f64: the numbers Normalize wants.
ChannelStats compute_mean_std(const Dataset& dataset, int64_t max_samples = -1);

/// out = (in - mean[c]) / std[c] for channel c (dim 0 of the sample). mean and
/// std hold one value per channel, or one value for all channels.
class Normalize : public Transform {
  public:
    Normalize(std::vector<double> mean, std::vector<double> std);
    explicit Normalize(const ChannelStats& stats) : Normalize(stats.mean, stats.std) {}
    Shape output_shape(const Shape& in) const override;
    void apply(const float* in, const Shape& in_shape, float* out, SampleRng& rng) const override;
    std::string describe() const override;

  private:
    std::vector<float> mean_, inv_std_;
};

/// Pads the image by `padding` on every side with `fill`, then cuts a
/// height x width window at a random offset: oy = below(Hp - height + 1),
/// then ox = below(Wp - width + 1) from the sample's rng (2 words).
class RandomCrop : public Transform {
  public:
    /// A size x size window.
    explicit RandomCrop(int64_t size, int64_t padding = 0, double fill = 0)
        : RandomCrop({size, size}, padding, fill) {}
    /// A {height, width} window.
    RandomCrop(std::array<int64_t, 2> size, int64_t padding = 0, double fill = 0);
    Shape output_shape(const Shape& in) const override;
    void apply(const float* in, const Shape& in_shape, float* out, SampleRng& rng) const override;
    std::string describe() const override;

  private:
    int64_t height_, width_, padding_;
    float fill_;
};

/// Mirrors the image left to right when rng.uniform() < p (1 word).
class RandomHorizontalFlip : public Transform {
  public:
    explicit RandomHorizontalFlip(double p = 0.5);
    Shape output_shape(const Shape& in) const override;
    void apply(const float* in, const Shape& in_shape, float* out, SampleRng& rng) const override;
    std::string describe() const override;

  private:
    double p_;
};

/// Transforms applied in order. Written as a list of values:
/// `Compose{RandomCrop(28, 4), RandomHorizontalFlip(), Normalize({0.286}, {0.353})}`.
class Compose {
  public:
    /// One entry: a Transform held by shared pointer (a value is copied in).
    class Entry {
      public:
        template <class T, class = std::enable_if_t<std::is_base_of_v<Transform, T>>>
        Entry(T transform) : ptr_(std::make_shared<T>(std::move(transform))) {}
        template <class T, class = std::enable_if_t<std::is_base_of_v<Transform, T>>>
        Entry(std::shared_ptr<T> transform) : ptr_(std::move(transform)) {}
        const Transform& operator*() const { return *ptr_; }

      private:
        std::shared_ptr<const Transform> ptr_;
    };

    Compose() = default;
    Compose(std::initializer_list<Entry> transforms) : list_(transforms) {}
    Compose& add(Entry transform) {
        list_.push_back(std::move(transform));
        return *this;
    }

    bool empty() const { return list_.empty(); }
    size_t size() const { return list_.size(); }
    /// Output shape for input `in`; throws if a transform does not fit.
    Shape output_shape(const Shape& in) const { return plan(in).back(); }
    /// The shape entering each transform, then the output shape (size() + 1
    /// shapes): computed once per input shape, so apply() allocates nothing.
    std::vector<Shape> plan(const Shape& in) const;
    /// Elements of the largest shape in a plan: the size of each of the two
    /// scratch buffers apply() needs.
    static int64_t scratch_numel(const std::vector<Shape>& plan);
    /// Applies every transform in turn to a sample of shape plan[0];
    /// intermediate results alternate between scratch_a and scratch_b and the
    /// last one lands in `out` (plan.back()).
    void apply(const float* in, const std::vector<Shape>& plan, float* out, SampleRng& rng,
               float* scratch_a, float* scratch_b) const;
    /// Runs the chain on one sample tensor, with the rng of (seed, epoch, pos)
    /// the loader would use: for inspection and tests (allocates).
    Tensor operator()(const Tensor& sample, uint64_t seed = 0, uint64_t epoch = 0,
                      uint64_t pos = 0) const;
    std::string describe() const;

  private:
    std::vector<Entry> list_;
};

}  // namespace ember::data

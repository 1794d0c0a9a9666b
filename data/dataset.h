// Datasets: a size and random access to one sample (an f32 input and an
// integer label), plus a batch-level fast path the loader uses. Here the
// interface, the in-memory TensorDataset and the seeded SyntheticDataset; file
// formats live in data/idx.h, data/fashion_mnist.h and data/mmap_dataset.h.
#pragma once

#include <cstdint>

#include "../core/tensor.h"

namespace ember::data {

/// One sample: the input as an f32 tensor of the dataset's sample_shape(), and its class.
struct Example {
    Tensor input;
    int64_t label = 0;
};

/// What a dataset's samples are.
enum class SampleKind {
    /// An f32 input of sample_shape() and an integer class label (read, read_batch).
    classification,
    /// Token ids: an i64 input of sample_shape() and an i64 target of the
    /// same shape, the next token at each position (read_tokens; text.h).
    tokens,
};

/// Random access to fixed-shape samples. Implementations must be safe to read
/// from several threads at once (the loader's workers call read() concurrently)
/// and must not depend on the order of calls: sample i is a function of i.
class Dataset {
  public:
    virtual ~Dataset() = default;

    /// Number of samples.
    virtual int64_t size() const = 0;
    /// Shape of every sample's input, e.g. [1, 28, 28] (the batch adds a leading dim).
    virtual Shape sample_shape() const = 0;
    /// Writes sample i's input as f32 (contiguous, shape_numel(sample_shape())
    /// values) to `out` and returns its label. Allocates nothing: this is what
    /// the loader's workers call. Throws ember::Error for a bad index or sample.
    virtual int64_t read(int64_t i, float* out) const = 0;
    /// Batch-level fast path: samples indices[0..count) into `inputs` (count
    /// samples back to back) and their labels into `labels`. The default calls
    /// read() per sample; in-memory datasets override it with one tight loop.
    virtual void read_batch(const int64_t* indices, int64_t count, float* inputs,
                            int64_t* labels) const;
    /// Bytes one read() takes from the dataset's storage (input and label as
    /// stored, e.g. 785 for a u8 28x28 image with a u8 label): the loader's
    /// read statistics. 0 for data that is computed, not read.
    virtual int64_t bytes_per_sample() const = 0;

    /// What the samples are: classification (the default) or tokens.
    virtual SampleKind kind() const { return SampleKind::classification; }
    /// SampleKind::tokens: sample i's token ids into `input` and its targets
    /// into `target` (sample_numel() of each). Allocates nothing; the
    /// default is an Error (a classification dataset has no tokens).
    virtual void read_tokens(int64_t i, int64_t* input, int64_t* target) const;

    /// Sample i as a new tensor (allocates; for inspection and tests).
    Example get(int64_t i) const;
    /// Elements of one sample: shape_numel(sample_shape()).
    int64_t sample_numel() const { return shape_numel(sample_shape()); }

  protected:
    /// Throws unless 0 <= i < size(); `op` names the dataset in the message.
    void check_index(int64_t i, const char* op) const;
};

/// Options of a TensorDataset.
struct TensorDatasetOptions {
    /// Every input value is multiplied by this when converted to f32 (1/255
    /// turns u8 pixels into [0, 1]).
    double scale = 1.0;
};

/// Samples are slices along dim 0 of existing host tensors, read in place
/// (zero-copy, docs/tips.md #11): inputs [N, ...] of any dtype and layout, labels [N]
/// of an integer dtype (i64, i32 or u8). The tensors are shared, not copied:
/// writing to them later changes the dataset.
class TensorDataset : public Dataset {
  public:
    TensorDataset(Tensor inputs, Tensor labels, TensorDatasetOptions options = {});

    int64_t size() const override { return inputs_.size(0); }
    Shape sample_shape() const override { return sample_shape_; }
    int64_t read(int64_t i, float* out) const override;
    void read_batch(const int64_t* indices, int64_t count, float* inputs,
                    int64_t* labels) const override;
    int64_t bytes_per_sample() const override;

    const Tensor& inputs() const { return inputs_; }
    const Tensor& labels() const { return labels_; }

  private:
    int64_t label_at(int64_t i) const;

    Tensor inputs_, labels_;
    Shape sample_shape_;
    float scale_;
};

/// A seeded, learnable classification task computed on demand (no memory):
/// class c has a fixed random prototype; sample i is 0.5 * prototype(label_i)
/// + 0.5 * noise_i, all values in [0, 1). Sample i depends only on (seed, i),
/// from Philox streams reserved for it (docs/data.md).
class SyntheticDataset : public Dataset {
  public:
    SyntheticDataset(int64_t size, Shape sample_shape, int64_t num_classes, uint64_t seed = 0);

    int64_t size() const override { return size_; }
    Shape sample_shape() const override { return sample_shape_; }
    int64_t read(int64_t i, float* out) const override;
    int64_t bytes_per_sample() const override { return 0; }
    int64_t num_classes() const { return num_classes_; }

  private:
    int64_t size_;
    Shape sample_shape_;
    int64_t numel_;
    int64_t num_classes_;
    uint64_t seed_;
};

}  // namespace ember::data

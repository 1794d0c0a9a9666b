// Layers: each a Module built from its sizes and an options struct with
// designated initializers — nn::Conv2d(1, 16, 3, {.padding = 1, .bias = false})
// — and default initialization as PyTorch's. docs/nn.md lists them all.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../autograd/grad_mode.h"
#include "../autograd/ops/elementwise.h"
#include "../autograd/ops/index.h"
#include "../autograd/ops/nn_ops.h"
#include "module.h"

namespace ember::nn {

/// A (height, width) pair that also takes one number for both: `.padding = 1`
/// or `.padding = {1, 2}`.
struct Pair {
    int64_t h = 0, w = 0;
    Pair(int64_t both) : h(both), w(both) {}  // NOLINT: implicit by design
    Pair(int64_t height, int64_t width) : h(height), w(width) {}
    operator Int2() const { return {h, w}; }  // NOLINT
};

struct LinearOptions {
    bool bias = true;
    DType dtype = DType::f32;
    /// y = relu(x·Wᵀ + b) as one op (ember::linear_relu: on CUDA the ReLU
    /// rides in the GEMM's epilogue with the bias); the parameters are the same.
    bool relu = false;
};
/// y = x·Wᵀ + b; W [out, in] and b [out] uniform in ±1/√in (PyTorch's default).
class Linear : public Module {
public:
    Linear(int64_t in_features, int64_t out_features, LinearOptions options = {});
    Tensor forward(const Tensor& x) override;
    /// relu(forward(x)) as one op (linear_relu); Sequential calls it for a
    /// Linear followed by a ReLU.
    Tensor forward_relu(const Tensor& x);
    /// gelu(forward(x), tanh approximation) as one op (linear_gelu);
    /// Sequential calls it for a Linear followed by a GELU(tanh).
    Tensor forward_gelu_tanh(const Tensor& x);
    std::string type_name() const override { return "Linear"; }
    std::string describe() const override;
    Tensor weight, bias;  // bias undefined without one

private:
    void check_input(const Tensor& x) const;
    int64_t in_, out_;
    bool relu_;
};

struct Conv2dOptions {
    Pair stride = 1;
    Pair padding = 0;
    Pair dilation = 1;
    int64_t groups = 1;
    bool bias = true;
    DType dtype = DType::f32;
};
/// 2-d convolution; weight [out, in/groups, kh, kw] uniform in ±1/√fan_in
/// (PyTorch's default). Before a BatchNorm2d, build it with .bias = false (docs/tips.md #12).
class Conv2d : public Module {
public:
    Conv2d(int64_t in_channels, int64_t out_channels, Pair kernel_size, Conv2dOptions options = {});
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "Conv2d"; }
    std::string describe() const override;
    Tensor weight, bias;
    const Conv2dOptions& options() const { return options_; }
    /// Turns the bias on or off (fold_batchnorm adds one).
    void set_bias(const Tensor& b);

private:
    int64_t in_, out_;
    Pair kernel_;
    Conv2dOptions options_;
};

struct BatchNormOptions {
    double eps = 1e-5;
    double momentum = 0.1;
    bool affine = true;               // learnable weight (1) and bias (0)
    bool track_running_stats = true;  // running_mean (0), running_var (1), num_batches_tracked
    DType dtype = DType::f32;
};
/// Batch norm over [N, C, H, W]: batch statistics in training (updating the
/// running ones), running statistics in eval.
class BatchNorm2d : public Module {
public:
    explicit BatchNorm2d(int64_t channels, BatchNormOptions options = {});
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "BatchNorm2d"; }
    std::string describe() const override;
    Tensor weight, bias, running_mean, running_var, num_batches_tracked;
    const BatchNormOptions& options() const { return options_; }

private:
    int64_t channels_;
    BatchNormOptions options_;
};

struct LayerNormOptions {
    double eps = 1e-5;
    bool elementwise_affine = true;
    DType dtype = DType::f32;
};
class LayerNorm : public Module {
public:
    explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "LayerNorm"; }
    std::string describe() const override;
    Tensor weight, bias;

private:
    Shape shape_;
    LayerNormOptions options_;
};

/// Rows of a [num, dim] table (N(0, 1) initialized) picked by integer indices.
class Embedding : public Module {
public:
    Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype = DType::f32);
    Tensor forward(const Tensor& indices) override;
    std::string type_name() const override { return "Embedding"; }
    std::string describe() const override;
    Tensor weight;
};

/// Dropout with probability p in training; identity in eval.
class Dropout : public Module {
public:
    explicit Dropout(double p = 0.5);
    Tensor forward(const Tensor& x) override { return dropout(x, p_, is_training()); }
    std::string type_name() const override { return "Dropout"; }
    std::string describe() const override;

private:
    double p_;
};

class ReLU : public Module {
public:
    Tensor forward(const Tensor& x) override { return relu(x); }
    std::string type_name() const override { return "ReLU"; }
};

class GELU : public Module {
public:
    explicit GELU(GeluApprox approximate = GeluApprox::none) : approximate_(approximate) {}
    Tensor forward(const Tensor& x) override { return ember::gelu(x, approximate_); }
    GeluApprox approximate() const { return approximate_; }
    std::string type_name() const override { return "GELU"; }

private:
    GeluApprox approximate_;
};

class SiLU : public Module {
public:
    Tensor forward(const Tensor& x) override { return ember::silu(x); }
    std::string type_name() const override { return "SiLU"; }
};

class Identity : public Module {
public:
    Tensor forward(const Tensor& x) override { return x; }
    std::string type_name() const override { return "Identity"; }
};

struct PoolOptions {
    Pair stride = 0;  // 0: the kernel size
    Pair padding = 0;
    Pair dilation = 1;  // max pooling only
    bool ceil_mode = false;
    bool count_include_pad = true;  // average pooling only
};
class MaxPool2d : public Module {
public:
    explicit MaxPool2d(Pair kernel_size, PoolOptions options = {})
        : kernel_(kernel_size), options_(options) {}
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "MaxPool2d"; }

private:
    Pair kernel_;
    PoolOptions options_;
};
class AvgPool2d : public Module {
public:
    explicit AvgPool2d(Pair kernel_size, PoolOptions options = {})
        : kernel_(kernel_size), options_(options) {}
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "AvgPool2d"; }

private:
    Pair kernel_;
    PoolOptions options_;
};
class AdaptiveAvgPool2d : public Module {
public:
    explicit AdaptiveAvgPool2d(Pair output_size) : size_(output_size) {}
    Tensor forward(const Tensor& x) override { return adaptive_avg_pool2d(x, size_); }
    std::string type_name() const override { return "AdaptiveAvgPool2d"; }

private:
    Pair size_;
};

/// Flattens dims start..end into one (default: all but the batch dim).
class Flatten : public Module {
public:
    explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_(start_dim), end_(end_dim) {}
    Tensor forward(const Tensor& x) override { return x.flatten(start_, end_); }
    std::string type_name() const override { return "Flatten"; }

private:
    int64_t start_, end_;
};

/// Runs its children in order. Children are named "0", "1", ... Appending a
/// BatchNorm2d right after a Conv2d that has a bias prints a warning (docs/tips.md #12).
/// A Linear followed by a ReLU, or by a GELU with the tanh approximation,
/// runs as one op (Linear::forward_relu, forward_gelu_tanh: on CUDA the bias
/// and the activation ride in the GEMM's epilogue) with the same values and
/// gradients as the two.
class Sequential : public Module {
public:
    Sequential() = default;
    // Not for a single Sequential: that is a copy or a move, and taking a
    // non-const lvalue here would recurse through push_back without end.
    template <class... M>
        requires(!(sizeof...(M) == 1 && (std::is_same_v<std::decay_t<M>, Sequential> && ...)))
    explicit Sequential(M&&... modules) {
        (push_back(std::forward<M>(modules)), ...);
    }
    template <class M>
    void push_back(M&& module) {
        if constexpr (std::is_convertible_v<M, std::shared_ptr<Module>>)
            append(std::shared_ptr<Module>(std::forward<M>(module)));
        else
            append(std::make_shared<std::decay_t<M>>(std::forward<M>(module)));
    }
    Tensor forward(const Tensor& x) override;
    std::string type_name() const override { return "Sequential"; }
    size_t size() const { return named_children().size(); }
    /// Child i.
    std::shared_ptr<Module> operator[](size_t i) const {
        EMBER_CHECK(i < size(), "Sequential: no child ", i, " (it has ", size(), ")");
        return named_children()[i].second;
    }
    /// Replaces child i (fold_batchnorm swaps a folded BatchNorm2d for Identity).
    void replace(size_t i, std::shared_ptr<Module> m);

private:
    void append(std::shared_ptr<Module> m);
};

}  // namespace ember::nn

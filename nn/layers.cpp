// Layer constructors (shapes, PyTorch's default initialization) and forwards.
#include "nn/layers.h"

#include "autograd/checkpoint.h"

#include <cmath>
#include <iostream>
#include <sstream>
#include <typeinfo>

#include "autograd/ops/matmul.h"
#include "kernels/factories.h"
#include "nn/conv_bn.h"
#include "nn/init.h"

namespace ember::nn {

namespace {

std::string pair_str(const Pair& p) {
    std::ostringstream os;
    if (p.h == p.w)
        os << p.h;
    else
        os << "(" << p.h << ", " << p.w << ")";
    return os.str();
}

void check_size(int64_t v, const char* what, const char* layer) {
    EMBER_CHECK(v > 0, layer, ": ", what, " must be positive, got ", v);
}

}  // namespace

// ---- Linear ----

Linear::Linear(int64_t in_features, int64_t out_features, LinearOptions options)
    : in_(in_features), out_(out_features), relu_(options.relu) {
    check_size(in_features, "in_features", "Linear");
    check_size(out_features, "out_features", "Linear");
    const double bound = 1.0 / std::sqrt(double(in_features));
    weight = register_parameter("weight", empty({out_features, in_features}, {options.dtype}));
    init::uniform_(weight, -bound, bound);
    if (options.bias) {
        bias = register_parameter("bias", empty({out_features}, {options.dtype}));
        init::uniform_(bias, -bound, bound);
    }
}

Tensor Linear::forward(const Tensor& x) {
    check_input(x);
    return relu_ ? linear_relu(x, weight, bias) : linear(x, weight, bias);
}

Tensor Linear::forward_relu(const Tensor& x) {
    check_input(x);
    return linear_relu(x, weight, bias);
}

Tensor Linear::forward_gelu_tanh(const Tensor& x) {
    check_input(x);
    return relu_ ? gelu(linear_relu(x, weight, bias), GeluApprox::tanh)
                 : linear_gelu(x, weight, bias);
}

void Linear::check_input(const Tensor& x) const {
    EMBER_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == in_, "Linear(in=", in_, ", out=", out_,
                "): input of shape ", x.defined() ? shape_str(x.shape()) : "undefined",
                " does not end in ", in_);
}

std::string Linear::describe() const {
    return str("Linear(in=", in_, ", out=", out_, ", bias=", bias.defined() ? "true" : "false",
               relu_ ? ", relu=true" : "", ")");
}

// ---- Conv2d ----

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, Pair kernel_size, Conv2dOptions options)
    : in_(in_channels), out_(out_channels), kernel_(kernel_size), options_(options) {
    check_size(in_channels, "in_channels", "Conv2d");
    check_size(out_channels, "out_channels", "Conv2d");
    check_size(options.groups, "groups", "Conv2d");
    EMBER_CHECK(in_channels % options.groups == 0 && out_channels % options.groups == 0,
                "Conv2d: groups = ", options.groups, " must divide in_channels = ", in_channels,
                " and out_channels = ", out_channels);
    EMBER_CHECK(kernel_.h > 0 && kernel_.w > 0, "Conv2d: kernel size must be positive");
    weight = register_parameter(
        "weight", empty({out_channels, in_channels / options.groups, kernel_.h, kernel_.w},
                        {options.dtype}));
    const double bound = 1.0 / std::sqrt(double(init::fans(weight).first));
    init::uniform_(weight, -bound, bound);
    if (options.bias) {
        bias = register_parameter("bias", empty({out_channels}, {options.dtype}));
        init::uniform_(bias, -bound, bound);
    }
}

Tensor Conv2d::forward(const Tensor& x) {
    return conv2d(x, weight, bias, options_.stride, options_.padding, options_.dilation,
                  options_.groups);
}

void Conv2d::set_bias(const Tensor& b) {
    if (bias.defined()) {
        if (b.defined()) {
            reset_tensor("bias", b);
            return;
        }
        remove_parameter("bias");
        bias = Tensor();
        options_.bias = false;
        return;
    }
    if (!b.defined()) return;
    bias = register_parameter("bias", b.detach());
    options_.bias = true;
}

std::string Conv2d::describe() const {
    return str("Conv2d(", in_, ", ", out_, ", kernel=", pair_str(kernel_), ", stride=",
               pair_str(options_.stride), ", padding=", pair_str(options_.padding),
               options_.dilation.h != 1 || options_.dilation.w != 1
                   ? ", dilation=" + pair_str(options_.dilation)
                   : "",
               options_.groups != 1 ? str(", groups=", options_.groups) : "",
               ", bias=", bias.defined() ? "true" : "false", ")");
}

// ---- BatchNorm2d ----

BatchNorm2d::BatchNorm2d(int64_t channels, BatchNormOptions options)
    : channels_(channels), options_(options) {
    check_size(channels, "channels", "BatchNorm2d");
    EMBER_CHECK(options.eps > 0, "BatchNorm2d: eps must be positive, got ", options.eps);
    if (options.affine) {
        weight = register_parameter("weight", ones({channels}, {options.dtype}));
        bias = register_parameter("bias", zeros({channels}, {options.dtype}));
    }
    if (options.track_running_stats) {
        running_mean = register_buffer("running_mean", zeros({channels}, {options.dtype}));
        running_var = register_buffer("running_var", ones({channels}, {options.dtype}));
        num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, {DType::i64}));
    }
}

Tensor BatchNorm2d::forward(const Tensor& x) {
    EMBER_CHECK(x.dim() == 4 && x.size(1) == channels_, "BatchNorm2d(", channels_,
                "): expected input [N, ", channels_, ", H, W], got ", shape_str(x.shape()));
    const bool use_batch_stats = is_training() || !options_.track_running_stats;
    Tensor y = batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats,
                          options_.momentum, options_.eps);
    // Counted once the op has accepted the batch (a rejected one changes
    // nothing), and not again when a checkpointed segment is recomputed.
    if (is_training() && options_.track_running_stats && !autograd::is_recomputing()) {
        NoGradGuard no_grad;
        add_(num_batches_tracked, ones({}, {DType::i64, num_batches_tracked.device()}));
    }
    return y;
}

std::string BatchNorm2d::describe() const {
    return str("BatchNorm2d(", channels_, ", eps=", options_.eps, ", momentum=", options_.momentum,
               ")");
}

// ---- LayerNorm ----

LayerNorm::LayerNorm(Shape normalized_shape, LayerNormOptions options)
    : shape_(std::move(normalized_shape)), options_(options) {
    EMBER_CHECK(!shape_.empty() && shape_numel(shape_) > 0,
                "LayerNorm: normalized_shape must be non-empty, got ", shape_str(shape_));
    if (options.elementwise_affine) {
        weight = register_parameter("weight", ones(shape_, {options.dtype}));
        bias = register_parameter("bias", zeros(shape_, {options.dtype}));
    }
}

Tensor LayerNorm::forward(const Tensor& x) {
    return layer_norm(x, shape_, weight, bias, options_.eps);
}

std::string LayerNorm::describe() const {
    return str("LayerNorm(", shape_str(shape_), ", eps=", options_.eps, ")");
}

// ---- Embedding ----

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim, DType dtype) {
    check_size(num_embeddings, "num_embeddings", "Embedding");
    check_size(embedding_dim, "embedding_dim", "Embedding");
    weight = register_parameter("weight", empty({num_embeddings, embedding_dim}, {dtype}));
    init::normal_(weight, 0, 1);
}

Tensor Embedding::forward(const Tensor& indices) { return embedding(weight, indices); }

std::string Embedding::describe() const {
    return str("Embedding(", weight.size(0), ", ", weight.size(1), ")");
}

// ---- Dropout, pooling ----

Dropout::Dropout(double p) : p_(p) {
    EMBER_CHECK(p >= 0 && p <= 1, "Dropout: p must be in [0, 1], got ", p);
}

std::string Dropout::describe() const { return str("Dropout(p=", p_, ")"); }

Tensor MaxPool2d::forward(const Tensor& x) {
    return max_pool2d(x, kernel_, options_.stride, options_.padding, options_.dilation,
                      options_.ceil_mode);
}

Tensor AvgPool2d::forward(const Tensor& x) {
    return avg_pool2d(x, kernel_, options_.stride, options_.padding, options_.ceil_mode,
                      options_.count_include_pad);
}

// ---- Sequential ----

void Sequential::append(std::shared_ptr<Module> m) {
    const size_t i = size();
    if (i > 0) {
        const std::string warning = conv_bias_before_batchnorm_warning(
            *operator[](i - 1), *m, std::to_string(i - 1), std::to_string(i));
        if (!warning.empty()) std::cerr << "ember: warning: " << warning << "\n";
    }
    register_module(std::to_string(i), std::move(m));
}

void Sequential::replace(size_t i, std::shared_ptr<Module> m) { replace_child(i, std::move(m)); }

Tensor Sequential::forward(const Tensor& x) {
    const auto& children = named_children();
    Tensor h = x;
    for (size_t i = 0; i < children.size(); ++i) {
        Module& m = *children[i].second;
        Module* next = i + 1 < children.size() ? children[i + 1].second.get() : nullptr;
        const bool is_linear = typeid(m) == typeid(Linear);
        if (is_linear && next && typeid(*next) == typeid(ReLU)) {  // one op for the pair
            h = static_cast<Linear&>(m).forward_relu(h);
            ++i;
        } else if (is_linear && next && typeid(*next) == typeid(GELU) &&
                   static_cast<GELU&>(*next).approximate() == GeluApprox::tanh) {
            h = static_cast<Linear&>(m).forward_gelu_tanh(h);
            ++i;
        } else {
            h = m.forward(h);
        }
    }
    return h;
}

}  // namespace ember::nn
